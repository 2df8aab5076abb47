"""The trust corpus's labelled candidates, read and checked: one dataclass per JSONL line.

The corpus ships with the plugin (``trust_corpus/``, its README says what each key means);
a damaged or hand-edited line is an error naming the file, the line and the key, because a
benchmark that silently skips a label measures something else than it says.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

#: where the corpus lives, beside this module
CORPUS = Path(__file__).resolve().parent / "trust_corpus"
#: the reason codes a deterministic gate may drop a candidate with (issues 19 and 27)
DETERMINISTIC_REASONS = frozenset({"EMPTY_EVIDENCE", "EVIDENCE_TOO_SHORT", "EVIDENCE_NOT_FOUND",
                                   "CLAIM_SYMBOL_NOT_IN_CHUNK", "EVIDENCE_NOT_CODE",
                                   "CLAIM_NAMES_NO_CODE", "CHUNK_UNREADABLE"})
CANDIDATE_LABELS = ("supported", "fabricated", "symbol_invented", "injected")
SEEDED_LABELS = ("defect", "false_claim")
SEVERITIES = frozenset({"low", "medium", "high"})
#: no label file or corpus file is near this; a larger one is not ours
MAX_LABEL_BYTES = 1_000_000
MAX_FILE_BYTES = 256_000


class CorpusError(Exception):
    """A label file of the trust corpus is missing, too large or not of its schema."""


@dataclass(frozen=True)
class CorpusCandidate:
    """A candidate finding of the deterministic corpus, with the outcome it must have."""

    id: str
    label: str
    variant: str
    path: str
    chunk_start: int
    chunk_end: int
    line: int
    claim: str
    evidence: str
    identifiers: tuple[str, ...]
    severity: str
    #: None: it must be reported; else the reason it must be dropped with
    expected_reason: str | None


@dataclass(frozen=True)
class Source:
    """Where a seeded file was copied from."""

    repo: str
    commit: str
    path: str
    lines: tuple[tuple[int, int], ...]
    license: str


@dataclass(frozen=True)
class SeededClaim:
    """A claim about a file of the seeded set: its seeded defect, or a false claim."""

    id: str
    label: str
    kind: str
    path: str
    #: the chunk a judge is shown (the function the claim is about), 1-based, inclusive
    chunk_start: int
    chunk_end: int
    #: the defect's true line (for a false claim, its evidence's first line)
    line: int
    evidence_line: int
    claim: str
    evidence: str
    identifiers: tuple[str, ...]
    severity: str
    source: Source

    @property
    def case(self) -> str:
        """The seeded case (its folder under ``seeded/``) the claim is about."""
        return Path(self.path).parts[1]


def read_bounded(path: Path, limit: int = MAX_FILE_BYTES) -> str:
    """``path``'s text, refusing a file over ``limit`` bytes (OSError, ValueError)."""
    with path.open("rb") as handle:
        data = handle.read(limit + 1)
    if len(data) > limit:
        raise ValueError(f"{path}: over {limit} bytes")
    return data.decode("utf-8")


def _records(path: Path) -> list[tuple[int, dict[str, Any]]]:
    try:
        text = read_bounded(path, MAX_LABEL_BYTES)
    except (OSError, ValueError) as exc:
        raise CorpusError(f"{path}: cannot read the trust corpus's labels ({exc}); "
                          "reinstall slm-rerank-review") from exc
    records = []
    for number, raw in enumerate(text.splitlines(), 1):
        if not raw.strip():
            continue
        try:
            record = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise CorpusError(f"{path}:{number}: not JSON ({exc.msg})") from exc
        if not isinstance(record, dict):
            raise CorpusError(f"{path}:{number}: a line must be a JSON object")
        records.append((number, record))
    return records


class _Fields:
    """Typed access to one record's keys, each error naming the file, line and key."""

    def __init__(self, path: Path, number: int, record: dict[str, Any],
                 keys: frozenset[str]) -> None:
        self.where = f"{path}:{number}"
        self.record = record
        unknown = sorted(set(record) - keys)
        missing = sorted(keys - set(record))
        if unknown or missing:
            raise CorpusError(f"{self.where}: keys not of the schema: unknown {unknown}, "
                              f"missing {missing} (trust_corpus/README.md lists them)")

    def text(self, key: str, empty: bool = False) -> str:
        value = self.record[key]
        if not isinstance(value, str) or (not empty and not value):
            raise CorpusError(f"{self.where}: '{key}' must be a non-empty string")
        return value

    def number(self, key: str) -> int:
        value = self.record[key]
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise CorpusError(f"{self.where}: '{key}' must be a line number (an integer >= 1)")
        return value

    def names(self, key: str) -> tuple[str, ...]:
        value = self.record[key]
        if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
            raise CorpusError(f"{self.where}: '{key}' must be a list of non-empty strings")
        return tuple(value)

    def choice(self, key: str, allowed: tuple[str, ...] | frozenset[str]) -> str:
        value = self.record[key]
        if value not in allowed:
            raise CorpusError(f"{self.where}: '{key}' is {value!r}, not one of "
                              f"{', '.join(sorted(allowed))}")
        return value


def _relative(fields: _Fields, key: str) -> str:
    value = fields.text(key)
    if value.startswith("/") or ".." in Path(value).parts or "\\" in value:
        raise CorpusError(f"{fields.where}: '{key}' must be a path inside the corpus")
    return value


_CANDIDATE_KEYS = frozenset({"id", "label", "variant", "path", "chunk_start", "chunk_end",
                             "line", "claim", "evidence", "identifiers", "severity",
                             "expected_reason"})


def load_candidates(path: Path = CORPUS / "candidates.jsonl") -> list[CorpusCandidate]:
    """The deterministic corpus's candidates, checked against the schema."""
    found: list[CorpusCandidate] = []
    seen: set[str] = set()
    for number, record in _records(path):
        fields = _Fields(path, number, record, _CANDIDATE_KEYS)
        label = fields.choice("label", CANDIDATE_LABELS)
        reason = record["expected_reason"]
        if label == "supported" and reason is not None:
            raise CorpusError(f"{fields.where}: a supported candidate's 'expected_reason' "
                              "must be null: it must be reported")
        if label != "supported":
            reason = fields.choice("expected_reason", DETERMINISTIC_REASONS)
        candidate = CorpusCandidate(
            id=fields.text("id"), label=label, variant=fields.text("variant"),
            path=_relative(fields, "path"), chunk_start=fields.number("chunk_start"),
            chunk_end=fields.number("chunk_end"), line=fields.number("line"),
            claim=fields.text("claim"), evidence=fields.text("evidence", empty=True),
            identifiers=fields.names("identifiers"),
            severity=fields.choice("severity", SEVERITIES), expected_reason=reason)
        if not candidate.chunk_start <= candidate.line <= candidate.chunk_end:
            raise CorpusError(f"{fields.where}: 'line' {candidate.line} is outside the chunk "
                              f"{candidate.chunk_start}-{candidate.chunk_end}")
        if candidate.id in seen:
            raise CorpusError(f"{fields.where}: id {candidate.id!r} is used twice")
        seen.add(candidate.id)
        found.append(candidate)
    if not found:
        raise CorpusError(f"{path}: holds no candidate")
    return found


_SEEDED_KEYS = frozenset({"id", "label", "kind", "path", "chunk_start", "chunk_end", "line",
                          "evidence_line", "claim", "evidence", "identifiers", "severity",
                          "source"})
_SOURCE_KEYS = frozenset({"repo", "commit", "path", "lines", "license"})


def _source(fields: _Fields) -> Source:
    value = fields.record["source"]
    if not isinstance(value, dict):
        raise CorpusError(f"{fields.where}: 'source' must be an object")
    inner = _Fields(Path(fields.where), 0, value, _SOURCE_KEYS)
    inner.where = f"{fields.where}: source"
    lines = value["lines"]
    if not isinstance(lines, list) or not all(
            isinstance(r, list) and len(r) == 2 and all(isinstance(n, int) for n in r)
            for r in lines):
        raise CorpusError(f"{fields.where}: 'source.lines' must be a list of [first, last]")
    return Source(repo=inner.text("repo"), commit=inner.text("commit"),
                  path=inner.text("path"), lines=tuple((a, b) for a, b in lines),
                  license=inner.text("license"))


def load_seeded(path: Path = CORPUS / "seeded.jsonl") -> list[SeededClaim]:
    """The seeded set's labelled claims (each case: its defect and a false claim)."""
    found: list[SeededClaim] = []
    seen: set[str] = set()
    for number, record in _records(path):
        fields = _Fields(path, number, record, _SEEDED_KEYS)
        claim = SeededClaim(
            id=fields.text("id"), label=fields.choice("label", SEEDED_LABELS),
            kind=fields.text("kind"), path=_relative(fields, "path"),
            chunk_start=fields.number("chunk_start"), chunk_end=fields.number("chunk_end"),
            line=fields.number("line"), evidence_line=fields.number("evidence_line"),
            claim=fields.text("claim"), evidence=fields.text("evidence"),
            identifiers=fields.names("identifiers"),
            severity=fields.choice("severity", SEVERITIES), source=_source(fields))
        if not claim.path.startswith("seeded/") or len(Path(claim.path).parts) < 3:
            raise CorpusError(f"{fields.where}: 'path' must be seeded/<case>/<file>")
        if not all(claim.chunk_start <= n <= claim.chunk_end
                   for n in (claim.line, claim.evidence_line)):
            raise CorpusError(f"{fields.where}: 'line' and 'evidence_line' must be in the chunk "
                              f"{claim.chunk_start}-{claim.chunk_end}")
        if claim.id in seen:
            raise CorpusError(f"{fields.where}: id {claim.id!r} is used twice")
        seen.add(claim.id)
        found.append(claim)
    if not found:
        raise CorpusError(f"{path}: holds no claim")
    return found
