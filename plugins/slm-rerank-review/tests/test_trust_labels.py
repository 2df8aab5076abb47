"""The trust corpus: its label files follow their schema and their labels are honest.

The honesty checks here read the files on disk with a rule of their own (whitespace-
normalised lines, plain substring identifiers), not with the review's gates, so that a
label cannot be right merely because the gates agree with it.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import zipfile
from collections import Counter
from pathlib import Path

import pytest
from slm_rerank_review.trust_labels import (
    CORPUS,
    DETERMINISTIC_REASONS,
    CorpusError,
    load_candidates,
    load_seeded,
)


def _norm(text: str) -> str:
    # whitespace, all of it, is the one difference a quote may have from the lines on disk
    return "".join(text.split())


def _quoted_lines_start(lines: list[str], evidence: str) -> int | None:
    """The index in ``lines`` where ``evidence`` starts as consecutive lines, else None."""
    target = _norm(evidence)
    for first in range(len(lines)):
        if not lines[first].strip():  # a quote starts on a line with code
            continue
        for last in range(first, len(lines)):
            if _norm(" ".join(lines[first:last + 1])) == target:
                return first
    return None


def _chunk(path: str, first: int, last: int) -> list[str]:
    return (CORPUS / "files" / path).read_text(encoding="utf-8").splitlines()[first - 1:last]


def test_the_corpus_holds_enough_candidates_of_every_label_and_reason() -> None:
    candidates = load_candidates()

    labels = Counter(c.label for c in candidates)
    reasons = {c.expected_reason for c in candidates} - {None}
    assert len(candidates) >= 60
    assert min(labels[label] for label in ("supported", "fabricated", "symbol_invented")) >= 15
    assert labels["injected"] >= 6
    assert reasons == DETERMINISTIC_REASONS
    assert len({Path(c.path).suffix for c in candidates}) >= 8  # eight languages


def test_the_corpus_holds_the_near_misses_of_the_gates() -> None:
    variants = {c.variant for c in load_candidates()}

    assert {"reindented", "respaced", "collapsed", "spaces_for_tabs", "crlf",
            "multi_line", "blank_inside"} <= variants
    assert {"partial", "straddles_chunk", "annotated", "lookalike", "altered", "other_chunk",
            "other_file", "reordered", "non_consecutive",
            "ellipsis", "empty", "too_short", "unreadable"} <= variants
    assert {"symbol_other_chunk", "symbol_renamed", "symbol_case",
            "symbol_superstring"} <= variants


def test_every_supported_candidate_quotes_its_chunk_and_names_only_what_is_in_it() -> None:
    for candidate in (c for c in load_candidates() if c.label == "supported"):
        chunk = _chunk(candidate.path, candidate.chunk_start, candidate.chunk_end)

        start = _quoted_lines_start(chunk, candidate.evidence)

        assert start is not None, candidate.id
        assert candidate.chunk_start + start == candidate.line, candidate.id
        assert all(name in "\n".join(chunk) for name in candidate.identifiers), candidate.id


def test_every_dropped_candidate_fails_exactly_the_check_its_reason_names() -> None:
    for candidate in (c for c in load_candidates() if c.label != "supported"):
        if candidate.expected_reason == "CHUNK_UNREADABLE":
            assert not (CORPUS / "files" / candidate.path).exists(), candidate.id
            continue
        if candidate.expected_reason == "EMPTY_EVIDENCE":
            assert not candidate.evidence.strip(), candidate.id
            continue
        if candidate.expected_reason == "EVIDENCE_TOO_SHORT":  # a brace: true, and no proof
            assert len(candidate.evidence.strip()) <= 3, candidate.id
            continue
        chunk = _chunk(candidate.path, candidate.chunk_start, candidate.chunk_end)
        found = _quoted_lines_start(chunk, candidate.evidence) if candidate.evidence else None
        if candidate.expected_reason == "CLAIM_SYMBOL_NOT_IN_CHUNK":
            assert found is not None, candidate.id
            assert any(name not in "\n".join(chunk) for name in candidate.identifiers)
        elif candidate.expected_reason in ("EVIDENCE_NOT_CODE", "CLAIM_NAMES_NO_CODE"):
            # a planted injection: its quote is on disk and every name it lists is there, so
            # only the code gate can drop it
            assert found is not None, candidate.id
            assert candidate.chunk_start + found == candidate.line, candidate.id
            assert all(name in "\n".join(chunk) for name in candidate.identifiers)
        else:
            assert found is None, candidate.id


def test_every_seeded_case_has_its_defect_on_its_true_line_and_one_false_claim() -> None:
    claims = load_seeded()

    by_case = Counter((c.case, c.label) for c in claims)
    assert len({c.case for c in claims}) >= 15
    assert set(by_case.values()) == {1}
    for claim in claims:
        lines = (CORPUS / claim.path).read_text(encoding="utf-8").splitlines()
        chunk = lines[claim.chunk_start - 1:claim.chunk_end]
        start = _quoted_lines_start(chunk, claim.evidence)
        assert start is not None and claim.chunk_start + start == claim.evidence_line, claim.id
        assert claim.chunk_end <= len(lines), claim.id
        assert all(name in "\n".join(chunk) for name in claim.identifiers), claim.id
        assert claim.source.license and claim.source.commit, claim.id


def _write(tmp_path: Path, record: dict[str, object]) -> Path:
    path = tmp_path / "candidates.jsonl"
    path.write_text(json.dumps(record) + "\n", encoding="utf-8")
    return path


def _a_good_record() -> dict[str, object]:
    return json.loads((CORPUS / "candidates.jsonl").read_text(encoding="utf-8").splitlines()[0])


@pytest.mark.parametrize(("change", "named"), [
    ({"label": "plausible"}, "'label' is 'plausible'"),
    ({"line": 0}, "'line' must be a line number"),
    ({"identifiers": "cost"}, "'identifiers' must be a list"),
    ({"expected_reason": "EVIDENCE_NOT_FOUND"}, "'expected_reason' must be null"),
    ({"surprise": 1}, "unknown ['surprise']"),
    ({"path": "../../etc/passwd"}, "'path' must be a path inside the corpus"),
])
def test_a_damaged_line_is_an_error_naming_the_file_line_and_key(
        tmp_path: Path, change: dict[str, object], named: str) -> None:
    path = _write(tmp_path, {**_a_good_record(), **change})

    with pytest.raises(CorpusError) as raised:
        load_candidates(path)

    assert f"{path}:1" in str(raised.value)
    assert named in str(raised.value)


def test_a_label_file_over_its_size_cap_is_refused_without_reading_it_whole(
        tmp_path: Path) -> None:
    path = tmp_path / "candidates.jsonl"
    path.write_text("\n" * 1_000_001, encoding="utf-8")

    with pytest.raises(CorpusError, match="over 1000000 bytes"):
        load_candidates(path)


def test_the_corpus_ships_in_the_wheel(tmp_path: Path) -> None:
    # setuptools puts only .py files in a wheel unless package-data names the rest
    plugin = Path(__file__).resolve().parents[1]
    source = tmp_path / "src"
    shutil.copytree(plugin, source, ignore=shutil.ignore_patterns(
        "build", "*.egg-info", "__pycache__", ".ruff_cache", "tests"))
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps",
                    "--no-build-isolation", str(source), "-w", str(tmp_path / "dist")],
                   check=True, timeout=300, capture_output=True)

    (wheel,) = (tmp_path / "dist").glob("*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    shipped = {name.split("slm_rerank_review/", 1)[1] for name in names
               if "/trust_corpus/" in f"/{name}"}
    expected = {path.relative_to(CORPUS.parent).as_posix()
                for path in CORPUS.rglob("*") if path.is_file()
                and ".ruff_cache" not in path.parts and path.name != "ruff.toml"}
    assert expected <= shipped
