"""The trust benchmark with a model (``review bench --live``): the seeded set, reviewed.

Two measures per seeded case (``trust_corpus/seeded/<case>``: a copy of real code with one
defect seeded on a known line):

1. The review itself, end to end (retrieval, generation, every gate), in a temporary copy
   of the case's folder: how many generated candidates each gate passed and dropped, and
   the precision and recall of what is reported (a finding is correct when it cites the
   seeded file and its evidence lies within ``NEAR_LINES`` of the defect's line).
2. The two labelled claims of the case, the defect described truly and a false claim with
   real evidence, put to the support and contradiction judges directly: their
   probabilities for true against false claims (the separation) say what the semantic
   gates can tell apart, whatever the generator happened to write.

Each case has one deadline (``timeout``), its review and its judging included; a case
that runs out keeps what it has and says so.
"""

from __future__ import annotations

import dataclasses
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from slm_rerank_review import judges
from slm_rerank_review.findings import Candidate, Dropped, Finding, Reason
from slm_rerank_review.gates import check_evidence, deterministic_gates
from slm_rerank_review.reading import ChunkUnreadable, read_lines
from slm_rerank_review.review import ReviewReport, ReviewRequest, run_review
from slm_rerank_review.trust_bench import EVIDENCE_REASONS
from slm_rerank_review.trust_labels import (
    CORPUS,
    CorpusError,
    SeededClaim,
    load_seeded,
    read_bounded,
)

#: a finding whose evidence covers the seeded defect's line, or ends or starts this many
#: lines from it (a missing check's line is the one beside the gap), has found it; more
#: would count a true remark about a neighbouring line of a short function as the defect
NEAR_LINES = 1
#: the default deadline of one case (its review and its two claims judged): a 1.5B judge
#: on two busy cores reads 10-20 prompt tokens a second, and a case took 307-408 s there
DEFAULT_CASE_SECONDS = 600.0
#: the review's share of a case's deadline; the claims' judges get what it leaves
REVIEW_SHARE = 0.7
#: chunks of a case the model is asked about (a case is one short file, one or two chunks);
#: retrieval is lexical (``fast``): on one short file the search's judge has nothing to
#: reorder, and each of its calls would cost the server as much as a review's
CASE_TOP = 2
#: what each case is reviewed for: a reviewer names the code to review, and retrieval is
#: lexical first (the words "find real defects" alone occur in no file, so nothing would be
#: retrieved); the name is the defect's first identifier, its function
QUERY = "find real defects in {name}"
GATES = ("evidence", "identifiers", "code", "support", "contradiction")


@dataclass(frozen=True)
class Judged:
    """A labelled claim as the judges saw it (None: no verdict, or not asked)."""

    claim: SeededClaim
    support: float | None
    contradiction: float | None
    #: set when the deterministic gates dropped the labelled claim (a corpus fault)
    dropped: str | None = None


@dataclass(frozen=True)
class Verdict:
    """One generated candidate's fate in a case's review, and whether it found the defect."""

    gate: str | None  # the gate that dropped it; None: reported
    unverified: bool  # dropped because a judge gave no verdict
    correct: bool
    #: what the model proposed, and why it was dropped (for reading a run, not for measures)
    candidate: Candidate | None = None
    reason: str | None = None


@dataclass
class CaseResult:
    """One seeded case: its review's candidates and its labelled claims judged."""

    case: str
    verdicts: list[Verdict] = field(default_factory=list)
    judged: list[Judged] = field(default_factory=list)
    degraded: list[str] = field(default_factory=list)
    elapsed_s: float = 0.0
    endpoint: str | None = None
    model_id: str | None = None

    @property
    def found(self) -> bool:
        return any(v.correct and v.gate is None for v in self.verdicts)

    @property
    def found_before_judges(self) -> bool:
        return any(v.correct and v.gate in (None, "support", "contradiction")
                   for v in self.verdicts)


@dataclass
class LiveResult:
    """Every case reviewed (``trust_measures`` says what that measures)."""

    cases: list[CaseResult]

    @property
    def endpoint(self) -> str | None:
        return next((c.endpoint for c in self.cases if c.endpoint), None)

    @property
    def model_id(self) -> str | None:
        return next((c.model_id for c in self.cases if c.model_id), None)

    @property
    def degraded(self) -> str | None:
        """The first reason a case is less than asked, with how many cases have one."""
        hit = [c for c in self.cases if c.degraded]
        if not hit:
            return None
        return f"{len(hit)} of {len(self.cases)} cases: {hit[0].case}: {hit[0].degraded[0]}"


# --- running ---------------------------------------------------------------------------------


def _near(claim: SeededClaim, path: str, start: int, end: int) -> bool:
    return (path == claim.path.split("/", 2)[2]
            and start - NEAR_LINES <= claim.line <= end + NEAR_LINES)


def _span_of(dropped: Dropped, root: Path) -> tuple[int, int] | None:
    """Where a candidate the semantic gates dropped quoted its chunk (it passed evidence)."""
    candidate = dropped.candidate
    try:
        text = read_lines(root, candidate.path, candidate.start_line, candidate.end_line)
    except ChunkUnreadable:
        return None
    span = check_evidence(candidate, text)
    return None if isinstance(span, Dropped) else (span.start_line, span.end_line)


def _gate_of(dropped: Dropped) -> str:
    if dropped.reason in EVIDENCE_REASONS:
        return "evidence"
    if dropped.reason is Reason.CLAIM_SYMBOL_NOT_IN_CHUNK:
        return "identifiers"
    if dropped.reason in (Reason.EVIDENCE_NOT_CODE, Reason.CLAIM_NAMES_NO_CODE):
        return "code"
    # a judge's drop: the contradiction judge ran only if the support judge had a verdict
    return "contradiction" if dropped.scores.support is not None else "support"


def verdicts_of(report: ReviewReport, defect: SeededClaim, root: Path) -> list[Verdict]:
    """Each candidate of a review: the gate that dropped it, and whether it cites the defect."""
    found = [Verdict(None, False, _near(defect, f.candidate.path, f.span.start_line,
                                        f.span.end_line), f.candidate)
             for f in report.findings]
    for dropped in report.dropped:
        gate = _gate_of(dropped)
        span = _span_of(dropped, root) if gate in ("support", "contradiction") else None
        correct = span is not None and _near(defect, dropped.candidate.path, *span)
        found.append(Verdict(gate, dropped.reason is Reason.SUPPORT_UNVERIFIED, correct,
                             dropped.candidate, dropped.reason.value))
    return found


def _as_candidate(claim: SeededClaim) -> Candidate:
    return Candidate(path=claim.path.split("/", 2)[2], start_line=claim.chunk_start,
                     end_line=claim.chunk_end, claim=claim.claim, evidence=claim.evidence,
                     identifiers=claim.identifiers, severity=claim.severity)


def judge_claims(host: Any, root: Path, claims: Sequence[SeededClaim],
                 deadline: float) -> tuple[list[Judged], list[str]]:
    """The labelled claims put to both judges (one request each), and why any has no verdict."""
    passed: list[tuple[SeededClaim, Finding, str]] = []
    judged: list[Judged] = []
    for claim in claims:
        candidate = _as_candidate(claim)
        try:
            text = read_lines(root, candidate.path, candidate.start_line, candidate.end_line)
        except ChunkUnreadable:
            judged.append(Judged(claim, None, None, dropped=Reason.CHUNK_UNREADABLE.value))
            continue
        result = deterministic_gates(candidate, text)
        if isinstance(result, Dropped):
            judged.append(Judged(claim, None, None, dropped=result.reason.value))
        else:
            passed.append((claim, result, text))
    texts = [judges.judged_text(finding, text) for _, finding, text in passed]
    support = judges.judge(host, texts, instruction=judges.SUPPORT_INSTRUCTION,
                           query=judges.SUPPORT_QUERY, deadline=deadline)
    contradiction = judges.judge(host, texts, instruction=judges.CONTRADICTION_INSTRUCTION,
                                 query=judges.CONTRADICTION_QUERY, deadline=deadline)
    for (claim, _, _), p_support, p_contra in zip(passed, support.probabilities,
                                                  contradiction.probabilities, strict=True):
        judged.append(Judged(claim, p_support, p_contra))
    failures = [f"{name} judge: {v.failure}" for name, v in
                (("support", support), ("contradiction", contradiction)) if v.failure]
    return judged, failures


def copy_case(source: Path, target: Path) -> None:
    """The case's folder copied: folders and regular files only, each within the size cap.

    A corpus given with ``--corpus`` may hold anything: a link is not followed out of it
    and a FIFO is not opened (it would block the copy for ever).
    """
    if not source.is_dir() or source.is_symlink():
        raise CorpusError(f"{source}: the seeded case's folder is missing; every case of "
                          "seeded.jsonl needs seeded/<case>/")
    target.mkdir(parents=True)
    for path in sorted(source.rglob("*")):
        relative = path.relative_to(source)
        if path.is_symlink():
            continue
        if path.is_dir():
            (target / relative).mkdir(parents=True, exist_ok=True)
        elif path.is_file():
            try:
                data = read_bounded(path)
            except (OSError, ValueError, UnicodeDecodeError) as exc:
                raise CorpusError(f"{path}: cannot be read as a seeded file ({exc})") from None
            (target / relative).parent.mkdir(parents=True, exist_ok=True)
            (target / relative).write_bytes(data.encode("utf-8"))


def run_case(case: str, claims: Sequence[SeededClaim], corpus: Path, *,
             base_url: str | None, model: str | None, timeout: float,
             max_tokens: int | None = None,
             reviewer: Callable[[ReviewRequest], ReviewReport] = run_review) -> CaseResult:
    """One case reviewed in a temporary copy of its folder, then its claims judged."""
    started = time.monotonic()
    out = CaseResult(case)
    defect = next(c for c in claims if c.label == "defect")
    with tempfile.TemporaryDirectory(prefix="slm-rerank-trust-") as tmp:
        # a copy: no configuration or git state of wherever the corpus lies applies
        root = Path(tmp) / case
        copy_case(corpus / "seeded" / case, root)
        request = ReviewRequest(query=QUERY.format(name=defect.identifiers[0]), root=root,
                                top=CASE_TOP, fast=True, base_url=base_url, model=model,
                                timeout=max(timeout * REVIEW_SHARE, 0.1))
        if max_tokens is not None:
            request = dataclasses.replace(request, max_tokens=max_tokens)
        report = reviewer(request)
        out.endpoint, out.model_id = report.endpoint, report.model_id
        out.degraded.extend(f"review: {reason}" for reason in report.degraded)
        out.verdicts = verdicts_of(report, defect, root)
        host = judges.judges_host(root, base_url=base_url, model=model,
                                  timeout=max(started + timeout - time.monotonic(), 0.1))
        out.judged, failures = judge_claims(host, root, claims, started + timeout)
        out.degraded.extend(failures)
    out.elapsed_s = time.monotonic() - started
    return out


def run_live(corpus: Path = CORPUS, *, base_url: str | None = None, model: str | None = None,
             limit: int | None = None, timeout: float | None = None,
             only: Sequence[str] = (), max_tokens: int | None = None,
             reviewer: Callable[[ReviewRequest], ReviewReport] = run_review,
             progress: Callable[[str], None] | None = None) -> LiveResult:
    """Every seeded case (those named in ``only``, the first ``limit``), one after the
    other: the server is one."""
    claims = load_seeded(corpus / "seeded.jsonl")
    cases = list(dict.fromkeys(c.case for c in claims))
    unknown = sorted(set(only) - set(cases))
    if unknown:
        raise CorpusError(f"no seeded case {', '.join(unknown)}; the cases are: "
                          f"{', '.join(cases)}")
    cases = [case for case in cases if not only or case in only][:limit]
    result = LiveResult([])
    for case in cases:
        if progress:
            progress(case)
        result.cases.append(run_case(case, [c for c in claims if c.case == case], corpus,
                                     base_url=base_url, model=model,
                                     timeout=timeout or DEFAULT_CASE_SECONDS,
                                     max_tokens=max_tokens, reviewer=reviewer))
    return result
