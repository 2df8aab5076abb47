"""The review as a person reads it (a table citing ``path:start-end`` like a search, with the
evidence lines as they are on disk) and as a program reads it (``--json``).

Everything that came from the repository or the model (paths, claims, code) passes through
the host's ``visible``: no control character reaches a terminal or an agent raw.
"""

from __future__ import annotations

import json
from typing import Any

from slm_rerank.report import visible
from slm_rerank_review.findings import Dropped, Finding, GateScores
from slm_rerank_review.review import ReviewReport

#: bumped when a key of the JSON document changes meaning or disappears
SCHEMA_VERSION = 1


def location(path: str, start_line: int, end_line: int) -> str:
    """``path:start-end``, as a search's results cite a chunk."""
    return f"{path}:{start_line}-{end_line}"


def render_text(report: ReviewReport, verbose: bool = False) -> str:
    """One block per finding: rank, severity, location, claim, then the evidence lines."""
    lines: list[str] = []
    for rank, finding in enumerate(report.findings, 1):
        c, span = finding.candidate, finding.span
        lines.append(f"{rank}. {visible(location(c.path, span.start_line, span.end_line))}  "
                     f"{c.severity}  {visible(c.claim)}")
        width = len(str(span.end_line))
        for number, text in enumerate(span.lines, span.start_line):
            lines.append(f"   {number:>{width}} | {visible(text, keep_lines=True)}")
        scores = _scores_text(finding.scores)
        if scores:
            lines.append(f"   {scores}")
    if not report.findings:
        lines.append(f"no findings ({len(report.reviewed)} chunks reviewed, "
                     f"{len(report.dropped)} candidates dropped)")
    elif report.dropped:
        lines.append(f"({len(report.dropped)} candidates dropped; --json lists them)")
    if verbose:
        for dropped in report.dropped:
            c = dropped.candidate
            lines.append(f"dropped {dropped.reason.value}: "
                         f"{visible(location(c.path, c.start_line, c.end_line))}  "
                         f"{visible(c.claim[:120])}  ({visible(dropped.detail)})")
    return "\n".join(lines) + "\n"


def _scores_text(scores: GateScores) -> str:
    parts = [f"{name} {value:.2f}" for name, value in (("support", scores.support),
                                                       ("contradiction", scores.contradiction))
             if value is not None]
    return ", ".join(parts)


def _probability(value: float | None) -> float | None:
    return None if value is None else round(value, 4)


def _scores(scores: GateScores) -> dict[str, Any]:
    return {"evidence": scores.evidence, "identifiers": scores.identifiers,
            "support": _probability(scores.support),
            "contradiction": _probability(scores.contradiction)}


def _candidate(c: Any) -> dict[str, Any]:
    return {"path": c.path, "start_line": c.start_line, "end_line": c.end_line,
            "claim": c.claim, "evidence": c.evidence, "identifiers": list(c.identifiers),
            "severity": c.severity}


def finding_json(finding: Finding) -> dict[str, Any]:
    span = finding.span
    return {**_candidate(finding.candidate),
            "location": location(finding.candidate.path, span.start_line, span.end_line),
            "evidence_start_line": span.start_line, "evidence_end_line": span.end_line,
            "evidence_lines": list(span.lines), "scores": _scores(finding.scores)}


def dropped_json(dropped: Dropped) -> dict[str, Any]:
    return {**_candidate(dropped.candidate), "reason": dropped.reason.value,
            "detail": dropped.detail, "scores": _scores(dropped.scores)}


def render_json(report: ReviewReport) -> str:
    """The whole review: reported and dropped candidates with reasons and gate scores."""
    document = {
        "schema_version": SCHEMA_VERSION, "query": report.query, "root": report.root,
        "findings": [finding_json(f) for f in report.findings],
        "dropped": [dropped_json(d) for d in report.dropped],
        "reviewed": report.reviewed,
        "degraded": report.degraded or None,
        "diff": report.diff, "outside_diff": report.outside_diff,
        "not_code": report.not_code,
        "malformed": report.malformed,
        "model": {"endpoint": report.endpoint, "model_id": report.model_id,
                  "profile": report.profile},
        "notes": report.notes, "warnings": report.warnings,
        "elapsed_s": round(report.elapsed_s, 3),
    }
    return visible(json.dumps(document, ensure_ascii=False, indent=2), json=True) + "\n"
