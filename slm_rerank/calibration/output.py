"""What ``calibrate`` and ``bench --cases`` print: a table for a person, JSON for a tool."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from slm_rerank.calibration.measure import LEXICAL, OrderSummary, first_gold_rank
from slm_rerank.calibration.mining import Case
from slm_rerank.calibration.run import Measurement
from slm_rerank.model.repository_judge import JudgeFinding
from slm_rerank.report import visible


def _ci(ci: tuple[float, ...]) -> str:
    if any(math.isnan(v) for v in ci):
        return ""
    return f"{ci[0]:+.3f} .. {ci[1]:+.3f}"


def table(summaries: list[OrderSummary]) -> list[str]:
    """The orders as a markdown table (it reads as plain text too)."""
    lines = ["| order | cases | Hit@1 | Hit@5 | Hit@10 | MRR@10 | ΔMRR (95 % CI) | "
             "ΔHit@1 (95 % CI) |",
             "| --- | ---: | ---: | ---: | ---: | ---: | --- | --- |"]
    for s in summaries:
        deltas = ("| | |" if s.order == LEXICAL else
                  f"| {s.mrr_delta:+.3f} ({_ci(s.mrr_ci)}) | "
                  f"{100 * s.hit_at_1_delta:+.1f} ({_ci(tuple(100 * v for v in s.hit_at_1_ci))})"
                  " |")
        lines.append(f"| {s.order} | {s.cases} | {100 * s.hit_at_1:.1f} | "
                     f"{100 * s.hit_at_5:.1f} | {100 * s.hit_at_10:.1f} | {s.mrr:.3f} "
                     f"{deltas}")
    return lines


@dataclass(frozen=True)
class CaseResult:
    """One case of the cases file as measured: the rank of its first gold file in each
    order (None: not ranked at all), or no ranks when it was left out."""

    id: str
    query: str
    #: order name -> 1-based rank of the first gold file, None when none was ranked
    ranks: dict[str, int | None]
    left_out: bool = False
    #: why it was left out, when the measurement's one reason for leaving cases out says so
    why: str | None = None


def case_results(cases: Sequence[Case], measurement: Measurement) -> list[CaseResult]:
    """Each of ``cases``, in the file's order, with its ranks from ``measurement``.

    A measured case is matched to its input by id and query (a measured case keeps both;
    only its gold files are narrowed to those in the tree); the rest were left out."""
    measured: dict[tuple[str, str], list[Any]] = {}
    for result in measurement.results:
        measured.setdefault((result.case.id, result.case.query), []).append(result)
    reasons = list(measurement.dropped)
    why = reasons[0] if len(reasons) == 1 else None
    shown = []
    for case in cases:
        found = measured.get((case.id, case.query))
        if not found:
            shown.append(CaseResult(case.id, case.query, {}, left_out=True, why=why))
            continue
        result = found.pop(0)
        shown.append(CaseResult(case.id, case.query, {
            order: first_gold_rank(files, result.case.gold_files)
            for order, files in result.orders.items()}))
    return shown


def case_lines(results: Sequence[CaseResult]) -> list[str]:
    """A line per case: its id, then the rank of its first gold file in each order ("miss":
    no gold file was ranked), or "left out"."""
    lines = ["per case: rank of the first gold file in each order (miss: not ranked)"]
    for r in results:
        left_out = f"left out ({r.why})" if r.why else "left out"
        ranks = (left_out if r.left_out else ", ".join(
            f"{order} {'miss' if rank is None else rank}" for order, rank in r.ranks.items()))
        lines.append(visible(f"  {r.id}: {ranks}"))
    return lines


def judge_line(finding: JudgeFinding) -> str:
    """What the measurement says of the judge on this repository, in one line."""
    if not finding.ask:
        return f"the judge adds nothing in this repository: {finding.reason}"
    weight = (f"; w={finding.weight:g} measured best" if finding.weight is not None
              else "; no weight measured better than the one in use")
    return f"the judge helps in this repository: {finding.reason}{weight}"


def render_text(measurement: Measurement, header: list[str], written: str | None,
                per_case: Sequence[CaseResult] | None = None,
                finding: JudgeFinding | None = None, kept: str | None = None) -> str:
    """``per_case`` (``bench --cases``) adds a line per case after the table; ``finding``
    is what the run says of the judge here, ``kept`` where ``--write`` kept it."""
    lines = [visible(line) for line in header]
    if measurement.dropped:
        lines.append("left out: " + ", ".join(f"{n} ({reason})" for reason, n
                                              in sorted(measurement.dropped.items())))
    model = measurement.model
    if model is not None and model.weight is not None:
        lines.append(visible(f"model {model.model_id or '(no id)'}, profile {model.profile}; "
                             f"a search uses w={model.weight:g} ({model.weight_source})"))
    lines += ["", *table(measurement.summaries)]
    if measurement.results and measurement.results[0].head_recall is not None:
        share = sum(bool(r.head_recall) for r in measurement.results) / len(
            measurement.results)
        lines += ["", f"head file recall (a gold file among the judged chunks): "
                      f"{100 * share:.1f} %"]
    if not measurement.results:
        lines.append("no case was measured")
    if per_case is not None:
        lines += ["", *case_lines(per_case)]
    choice = measurement.choice
    if choice is not None:
        lines += ["", visible(f"best weight: {choice.reason}")]
    if finding is not None:
        lines.append(visible(judge_line(finding)))
    if written:
        lines.append(visible(f"written: {written}"))
    if kept:
        lines.append(visible(f"written: {kept}"))
    return "\n".join(lines) + "\n"


def _number(value: float) -> float | None:
    return None if math.isnan(value) else round(value, 4)


def render_json(measurement: Measurement, about: Mapping[str, Any], written: str | None,
                per_case: Sequence[CaseResult] | None = None,
                finding: JudgeFinding | None = None, kept: str | None = None) -> str:
    """``per_case`` (``bench --cases``) adds a ``per_case`` list: each case's id, query,
    ``ranks`` (order -> rank of its first gold file, null: not ranked) and ``left_out``.
    ``judge_here`` is what the run says of the judge on this repository (null: too few
    cases, or no verdicts), ``judge_here_written`` where ``--write`` kept it."""
    model, choice = measurement.model, measurement.choice
    document = {
        **about,
        "cases": len(measurement.results),
        "left_out": dict(measurement.dropped),
        "orders": [{"order": s.order, "cases": s.cases, "hit_at_1": _number(s.hit_at_1),
                    "hit_at_5": _number(s.hit_at_5), "hit_at_10": _number(s.hit_at_10),
                    "mrr": _number(s.mrr),
                    "mrr_delta": None if s.order == LEXICAL else _number(s.mrr_delta),
                    "mrr_ci": None if s.order == LEXICAL else [_number(v) for v in s.mrr_ci],
                    "hit_at_1_delta": (None if s.order == LEXICAL
                                       else _number(s.hit_at_1_delta)),
                    "hit_at_1_ci": (None if s.order == LEXICAL
                                    else [_number(v) for v in s.hit_at_1_ci])}
                   for s in measurement.summaries],
        "model": None if model is None else {
            "model_id": model.model_id, "profile": model.profile, "weight": model.weight,
            "weight_source": model.weight_source, "degraded": model.degraded},
        "choice": None if choice is None else {
            "best": choice.best, "current": choice.current, "separated": choice.separated,
            "reason": choice.reason, "ci": list(choice.ci) if choice.ci else None},
        "written": written,
        "judge_here": None if finding is None else {"model_id": finding.model_id,
                                                     **finding.to_json()},
        "judge_here_written": kept,
    }
    if per_case is not None:
        document["per_case"] = [{"id": r.id, "query": r.query, "ranks": r.ranks,
                                 "left_out": r.left_out} for r in per_case]
    return visible(json.dumps(document, indent=2, ensure_ascii=False, allow_nan=False),
                   json=True) + "\n"


# --- calibrate --learn ----------------------------------------------------------------------


def _gain(g: Any, points: bool) -> str:
    if math.isnan(g.mean):
        return ""
    f, fmt = (100, ".1f") if points else (1, ".3f")
    return f"{g.mean * f:+{fmt}} ({g.low * f:+{fmt}} .. {g.high * f:+{fmt}})"


def learn_tables(measured: Any, shipped_name: str) -> list[str]:
    """``per_repository.Measured`` as two markdown tables: each order's metrics, then each
    gain with its 95 % interval (Hit@k in points, MRR@10 as a fraction)."""
    from slm_rerank.calibration.per_repository import (
        COMPARISONS,
        FIXED,
        METRICS,
        REPOSITORY,
        SHIPPED,
    )

    names = {FIXED: "fixed lexical order", SHIPPED: f"shipped model {shipped_name!r}",
             REPOSITORY: "this repository's model"}
    heads = " | ".join(head for _, head in METRICS)
    lines = [f"| order ({measured.cases} test cases) | {heads} |",
             "| --- |" + " ---: |" * len(METRICS)]
    for order, label in names.items():
        means = measured.means[order]
        cells = " | ".join(f"{means[key]:.3f}" if key == "mrr" else f"{100 * means[key]:.1f}"
                           for key, _ in METRICS)
        lines.append(f"| {label} | {cells} |")
    lines += ["", "| gain | " + " | ".join(f"Δ{head} (95 % CI)" for _, head in METRICS) + " |",
              "| --- |" + " --- |" * len(METRICS)]
    for label, _, _ in COMPARISONS:
        gains = measured.gains[label]
        lines.append(f"| {label} | " + " | ".join(_gain(gains[key], key != "mrr")
                                                  for key, _ in METRICS) + " |")
    return lines


def render_learn_text(header: Sequence[str], measured: Any, shipped_name: str,
                      rule: str, verdict: str, written: str | None) -> str:
    """What ``calibrate --learn`` prints for a person."""
    lines = [visible(line) for line in header]
    lines += ["", *learn_tables(measured, shipped_name), "",
              visible(f"rule: the repository's model is {rule}"), visible(verdict)]
    if written:
        lines.append(visible(f"written: {written}"))
    return "\n".join(lines) + "\n"


def render_learn_json(document: Mapping[str, Any]) -> str:
    """What ``calibrate --learn --format json`` prints."""
    return visible(json.dumps(document, indent=2, ensure_ascii=False, allow_nan=False),
                   json=True) + "\n"
