"""The trust benchmark, deterministic part: the review's gates over the labelled corpus.

Every candidate of ``trust_corpus/candidates.jsonl`` is read against its file exactly as a
review reads a model's candidate (``reading.read_lines``, then
``gates.deterministic_gates``); no model is asked. A supported candidate must be reported,
a fabricated, symbol-invented or injected one dropped with the reason its label names.
What it measures is the precision of what would be reported: with no gate (every
candidate), with the evidence gate alone, with the identifier gate too, and with the code
gate too (what a review reports).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from slm_rerank_review.findings import Candidate, Dropped, Finding, Reason
from slm_rerank_review.gates import deterministic_gates
from slm_rerank_review.reading import ChunkUnreadable, read_lines
from slm_rerank_review.trust_labels import (
    CANDIDATE_LABELS,
    CORPUS,
    CorpusCandidate,
    load_candidates,
)

#: the reasons the evidence gate (and the read before it) drops with; the rest is the
#: identifier gate's
EVIDENCE_REASONS = frozenset({Reason.CHUNK_UNREADABLE, Reason.EMPTY_EVIDENCE,
                              Reason.EVIDENCE_TOO_SHORT, Reason.EVIDENCE_NOT_FOUND})
#: ... and the identifier gate's; the rest is the code gate's (comment or string evidence,
#: a claim that names none of the chunk's code)
IDENTIFIER_REASONS = EVIDENCE_REASONS | {Reason.CLAIM_SYMBOL_NOT_IN_CHUNK}


@dataclass(frozen=True)
class Outcome:
    """What the gates made of one labelled candidate."""

    labelled: CorpusCandidate
    #: None: reported
    reason: Reason | None
    detail: str = ""

    @property
    def reported(self) -> bool:
        return self.reason is None

    @property
    def as_labelled(self) -> bool:
        """The gates did what the label says: reported it, or dropped it for that reason."""
        expected = self.labelled.expected_reason
        return (self.reason.value if self.reason else None) == expected


@dataclass(frozen=True)
class Precision:
    """Of what a stage would report, how much is supported."""

    reported: int
    supported: int

    @property
    def value(self) -> float | None:
        return self.supported / self.reported if self.reported else None


@dataclass(frozen=True)
class DeterministicResult:
    """The corpus's outcomes and what they measure."""

    outcomes: list[Outcome]
    #: stage name (no gates, evidence gate, ..., every gate) -> precision of what it reports
    precision: dict[str, Precision] = field(default_factory=dict)

    @property
    def mismatches(self) -> list[Outcome]:
        return [o for o in self.outcomes if not o.as_labelled]

    @property
    def passed(self) -> bool:
        return not self.mismatches

    def by_label(self) -> dict[str, tuple[int, int]]:
        """Label -> (reported, dropped)."""
        counts = {label: [0, 0] for label in CANDIDATE_LABELS}
        for outcome in self.outcomes:
            counts[outcome.labelled.label][0 if outcome.reported else 1] += 1
        return {label: (kept, dropped) for label, (kept, dropped) in counts.items()}

    def by_reason(self) -> dict[str, Counter[str]]:
        """Reason -> how many candidates of each label it dropped (reasons in gate order)."""
        found: dict[str, Counter[str]] = {}
        for reason in Reason:
            labels = Counter(o.labelled.label for o in self.outcomes if o.reason is reason)
            if labels:
                found[reason.value] = labels
        return found


def gate_one(labelled: CorpusCandidate, files: Path) -> Outcome:
    """The deterministic gates' verdict on one corpus candidate, its file read from disk."""
    candidate = Candidate(path=labelled.path, start_line=labelled.chunk_start,
                          end_line=labelled.chunk_end, claim=labelled.claim,
                          evidence=labelled.evidence, identifiers=labelled.identifiers,
                          severity=labelled.severity)
    try:
        chunk = read_lines(files, labelled.path, labelled.chunk_start, labelled.chunk_end)
    except ChunkUnreadable as exc:
        return Outcome(labelled, Reason.CHUNK_UNREADABLE, str(exc))
    verdict = deterministic_gates(candidate, chunk)
    if isinstance(verdict, Finding):
        return Outcome(labelled, None)
    assert isinstance(verdict, Dropped)
    return Outcome(labelled, verdict.reason, verdict.detail)


def _precision(outcomes: list[Outcome], kept: Any) -> Precision:
    reported = [o for o in outcomes if kept(o)]
    return Precision(len(reported), sum(o.labelled.label == "supported" for o in reported))


def run_deterministic(corpus: Path = CORPUS) -> DeterministicResult:
    """Every candidate of ``corpus`` through the deterministic gates, and the precisions."""
    labelled = load_candidates(corpus / "candidates.jsonl")
    outcomes = [gate_one(candidate, corpus / "files") for candidate in labelled]
    precision = {
        "no gates": _precision(outcomes, lambda o: True),
        "evidence gate": _precision(outcomes, lambda o: o.reason not in EVIDENCE_REASONS),
        "evidence + identifier gates": _precision(
            outcomes, lambda o: o.reason not in IDENTIFIER_REASONS),
        "evidence + identifier + code gates": _precision(outcomes, lambda o: o.reported),
    }
    return DeterministicResult(outcomes, precision)


# --- what a person or a program reads --------------------------------------------------------


def _ratio(precision: Precision) -> str:
    value = precision.value
    shown = "-" if value is None else f"{value:.3f}"
    return f"{shown} ({precision.supported} of {precision.reported} reported are supported)"


def render_text(result: DeterministicResult) -> str:
    """The deterministic result as a short table for a terminal."""
    files = {o.labelled.path for o in result.outcomes}
    rows = [f"trust benchmark, deterministic gates: {len(result.outcomes)} candidates "
            f"citing {len(files)} files",
            "",
            f"{'label':<18}{'candidates':>11}{'reported':>10}{'dropped':>9}"]
    for label, (kept, dropped) in result.by_label().items():
        rows.append(f"{label:<18}{kept + dropped:>11}{kept:>10}{dropped:>9}")
    rows += ["", "precision of what is reported:"]
    rows += [f"  {stage:<36}{_ratio(p)}" for stage, p in result.precision.items()]
    rows += ["", "dropped, by reason:"]
    for reason, labels in result.by_reason().items():
        shares = ", ".join(f"{label} {n}" for label, n in sorted(labels.items()))
        rows.append(f"  {reason:<29}{sum(labels.values()):>3}  ({shares})")
    mismatches = result.mismatches
    rows += ["", f"not as labelled: {len(mismatches)}"]
    for outcome in mismatches:
        labelled = outcome.labelled
        got = f"dropped {outcome.reason.value}" if outcome.reason else "reported"
        wanted = f"dropped {labelled.expected_reason}" if labelled.expected_reason else "reported"
        rows.append(f"  {labelled.id} ({labelled.label}, {labelled.variant}): {got}, "
                    f"expected {wanted}")
    return "\n".join(rows) + "\n"


def to_json(result: DeterministicResult) -> dict[str, Any]:
    """The deterministic result as JSON (docs/review-bench.md describes the keys)."""
    return {
        "candidates": len(result.outcomes),
        "passed": result.passed,
        "labels": {label: {"reported": kept, "dropped": dropped}
                   for label, (kept, dropped) in result.by_label().items()},
        "precision": {stage: {"value": p.value, "reported": p.reported,
                              "supported": p.supported}
                      for stage, p in result.precision.items()},
        "dropped_by_reason": {reason: dict(labels)
                              for reason, labels in result.by_reason().items()},
        "outcomes": [{"id": o.labelled.id, "label": o.labelled.label,
                      "variant": o.labelled.variant, "reported": o.reported,
                      "reason": o.reason.value if o.reason else None,
                      "expected_reason": o.labelled.expected_reason,
                      "as_labelled": o.as_labelled, "detail": o.detail}
                     for o in result.outcomes],
    }
