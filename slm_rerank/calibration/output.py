"""What ``calibrate`` and ``bench --cases`` print: a table for a person, JSON for a tool."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

from slm_rerank.calibration.measure import LEXICAL, OrderSummary
from slm_rerank.calibration.run import Measurement
from slm_rerank.report import visible


def _ci(ci: tuple[float, float]) -> str:
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


def render_text(measurement: Measurement, header: list[str], written: str | None) -> str:
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
    choice = measurement.choice
    if choice is not None:
        lines += ["", visible(f"best weight: {choice.reason}")]
    if written:
        lines.append(visible(f"written: {written}"))
    return "\n".join(lines) + "\n"


def _number(value: float) -> float | None:
    return None if math.isnan(value) else round(value, 4)


def render_json(measurement: Measurement, about: Mapping[str, Any], written: str | None
                ) -> str:
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
    }
    return visible(json.dumps(document, indent=2, ensure_ascii=False, allow_nan=False),
                   json=True) + "\n"
