"""What a ``--live`` trust benchmark measures, and its tables (docs/review-bench.md).

Per gate, how many of the generated candidates reached it, passed and were dropped;
precision and recall of what is reported, before the semantic gates and after them; and
the judges' probabilities for the true and the false labelled claims, with their
separation: the difference of the means and the AUC (the chance that a true claim gets a
higher P(supported) than a false one; for the contradiction judge, that a false claim gets
the higher P(contradicted)). An AUC of 0.5 is a judge that cannot tell them apart.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from slm_rerank_review import judges
from slm_rerank_review.trust_live import GATES, CaseResult, Judged, LiveResult, Verdict


@dataclass(frozen=True)
class GateCount:
    """One gate over the generated candidates of every case."""

    gate: str
    reached: int
    dropped: int
    #: of the dropped, those a judge gave no verdict on
    unverified: int

    @property
    def passed(self) -> int:
        return self.reached - self.dropped


@dataclass(frozen=True)
class Retrieval:
    """Precision and recall of what a stage reports."""

    stage: str
    reported: int
    correct: int
    cases: int
    found: int

    @property
    def precision(self) -> float | None:
        return self.correct / self.reported if self.reported else None

    @property
    def recall(self) -> float | None:
        return self.found / self.cases if self.cases else None


@dataclass(frozen=True)
class Separation:
    """One judge's probabilities for the true and for the false labelled claims."""

    judge: str
    true: tuple[float, ...]
    false: tuple[float, ...]
    #: claims the judge gave no verdict on
    missing: int

    @property
    def mean_true(self) -> float | None:
        return sum(self.true) / len(self.true) if self.true else None

    @property
    def mean_false(self) -> float | None:
        return sum(self.false) / len(self.false) if self.false else None

    @property
    def auc(self) -> float | None:
        """P(the claim the judge should score higher does), ties counted half."""
        high, low = (self.true, self.false) if self.judge == "support" else (
            self.false, self.true)
        if not high or not low:
            return None
        wins = sum(1.0 if h > lo else 0.5 if h == lo else 0.0 for h in high for lo in low)
        return wins / (len(high) * len(low))


@dataclass(frozen=True)
class Decisions:
    """The semantic gates' decisions on the labelled claims, at their thresholds."""

    true_kept: int
    true_total: int
    false_dropped: int
    false_total: int


def gate_counts(cases: Sequence[CaseResult]) -> list[GateCount]:
    verdicts = [v for case in cases for v in case.verdicts]
    counts: list[GateCount] = []
    reached = len(verdicts)
    for gate in GATES:
        dropped = [v for v in verdicts if v.gate == gate]
        counts.append(GateCount(gate, reached, len(dropped), sum(v.unverified for v in dropped)))
        reached -= len(dropped)
    return counts


def retrieval(cases: Sequence[CaseResult]) -> list[Retrieval]:
    before = [v for c in cases for v in c.verdicts if v.gate in (None, "support",
                                                                 "contradiction")]
    after = [v for c in cases for v in c.verdicts if v.gate is None]
    return [Retrieval("after the deterministic gates", len(before),
                      sum(v.correct for v in before), len(cases),
                      sum(c.found_before_judges for c in cases)),
            Retrieval("after every gate (reported)", len(after), sum(v.correct for v in after),
                      len(cases), sum(c.found for c in cases))]


def _judged(cases: Sequence[CaseResult]) -> list[Judged]:
    return [j for c in cases for j in c.judged if j.dropped is None]


def separations(cases: Sequence[CaseResult]) -> list[Separation]:
    judged = _judged(cases)
    found: list[Separation] = []
    for name in ("support", "contradiction"):
        def scores(label: str, name: str = name) -> tuple[float, ...]:
            values = (getattr(j, name) for j in judged if j.claim.label == label)
            return tuple(v for v in values if v is not None)
        missing = sum(getattr(j, name) is None for j in judged)
        found.append(Separation(name, scores("defect"), scores("false_claim"), missing))
    return found


def decisions(cases: Sequence[CaseResult]) -> Decisions:
    judged = _judged(cases)

    def kept(j: Judged) -> bool:
        return (j.support is not None and j.support > judges.SUPPORT_MIN
                and j.contradiction is not None and j.contradiction < judges.CONTRADICTION_VETO)

    true = [j for j in judged if j.claim.label == "defect"]
    false = [j for j in judged if j.claim.label == "false_claim"]
    return Decisions(sum(kept(j) for j in true), len(true),
                     sum(not kept(j) for j in false), len(false))


# --- tables ------------------------------------------------------------------------------------


def _f(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def render_text(result: LiveResult) -> str:
    """The live result as tables for a terminal."""
    rows = [f"trust benchmark, --live: {len(result.cases)} seeded cases, model "
            f"{result.model_id or '-'} at {result.endpoint or '-'}", "",
            f"{'gate':<16}{'reached':>8}{'passed':>8}{'dropped':>8}{'unverified':>11}"]
    rows += [f"{g.gate:<16}{g.reached:>8}{g.passed:>8}{g.dropped:>8}{g.unverified:>11}"
             for g in gate_counts(result.cases)]
    rows += ["", f"{'what is reported':<32}{'reported':>9}{'correct':>8}{'precision':>10}"
                 f"{'recall':>8}"]
    rows += [f"{r.stage:<32}{r.reported:>9}{r.correct:>8}{_f(r.precision):>10}"
             f"{_f(r.recall):>8}  ({r.found} of {r.cases} defects)"
             for r in retrieval(result.cases)]
    rows += ["", f"{'judge, labelled claims':<24}{'P true':>8}{'P false':>8}{'AUC':>7}"
                 f"{'n true/false':>14}{'no verdict':>11}"]
    for s in separations(result.cases):
        rows.append(f"{s.judge:<24}{_f(s.mean_true):>8}{_f(s.mean_false):>8}{_f(s.auc):>7}"
                    f"{f'{len(s.true)}/{len(s.false)}':>14}{s.missing:>11}")
    d = decisions(result.cases)
    rows += [f"at the gates' thresholds: {d.true_kept} of {d.true_total} true claims kept, "
             f"{d.false_dropped} of {d.false_total} false claims dropped"]
    dropped = [j for c in result.cases for j in c.judged if j.dropped]
    rows += [f"labelled claim dropped by a deterministic gate (a corpus fault): "
             f"{j.claim.id} {j.dropped}" for j in dropped]
    return "\n".join(rows) + "\n"


def _candidate(verdict: Verdict) -> dict[str, Any]:
    candidate = verdict.candidate
    return {"claim": candidate.claim if candidate else None,
            "evidence": candidate.evidence if candidate else None,
            "cites": f"{candidate.path}:{candidate.start_line}-{candidate.end_line}"
            if candidate else None,
            "dropped_by": verdict.gate, "reason": verdict.reason, "correct": verdict.correct}


def to_json(result: LiveResult) -> dict[str, Any]:
    """The live result as JSON (docs/review-bench.md describes the keys)."""
    d = decisions(result.cases)
    return {
        "endpoint": result.endpoint, "model": result.model_id,
        "degraded": {"reason": result.degraded} if result.degraded else None,
        "gates": [{"gate": g.gate, "reached": g.reached, "passed": g.passed,
                   "dropped": g.dropped, "unverified": g.unverified}
                  for g in gate_counts(result.cases)],
        "reported": [{"stage": r.stage, "reported": r.reported, "correct": r.correct,
                      "precision": r.precision, "recall": r.recall, "found": r.found,
                      "cases": r.cases} for r in retrieval(result.cases)],
        "separation": [{"judge": s.judge, "mean_true": s.mean_true,
                        "mean_false": s.mean_false, "auc": s.auc, "true": list(s.true),
                        "false": list(s.false), "no_verdict": s.missing}
                       for s in separations(result.cases)],
        "decisions": {"true_kept": d.true_kept, "true": d.true_total,
                      "false_dropped": d.false_dropped, "false": d.false_total},
        "cases": [{"case": c.case, "found": c.found, "elapsed_s": round(c.elapsed_s, 2),
                   "degraded": c.degraded,
                   "candidates": [_candidate(v) for v in c.verdicts],
                   "claims": [{"id": j.claim.id, "label": j.claim.label,
                               "support": j.support, "contradiction": j.contradiction,
                               "dropped": j.dropped} for j in c.judged]}
                  for c in result.cases],
    }
