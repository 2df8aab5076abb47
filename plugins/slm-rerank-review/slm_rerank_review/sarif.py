"""``--format sarif``: the findings as SARIF 2.1.0, for GitHub code scanning and editors.

One run, one rule per severity-free kind of result (``review/finding``); each result's
location is the evidence's lines (``region`` startLine/endLine, with the lines as the
snippet) relative to ``%SRCROOT%``, the review's root. Dropped candidates are not results:
a code-scanning view lists what was found, and ``--json`` keeps the rest.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any
from urllib.parse import quote

import slm_rerank_review
from slm_rerank.report import visible
from slm_rerank_review.findings import Finding
from slm_rerank_review.reading import on_disk
from slm_rerank_review.review import ReviewReport

SCHEMA_URI = "https://json.schemastore.org/sarif-2.1.0.json"
RULE_ID = "review/finding"


def _result(finding: Finding, root: Path) -> dict[str, Any]:
    c, span = finding.candidate, finding.span
    properties: dict[str, Any] = {"identifiers": list(c.identifiers)}
    for name in ("support", "contradiction"):
        value = getattr(finding.scores, name)
        if value is not None:
            properties[name] = round(value, 4)
    return {
        "ruleId": RULE_ID,
        "level": c.severity,
        "message": {"text": c.claim},
        "locations": [{"physicalLocation": {
            # a relative reference: each segment percent-encoded, "/" kept; of the file's own
            # bytes, so a name that is not UTF-8 is the file's (quote() of it would raise)
            "artifactLocation": {"uri": quote(os.fsencode(on_disk(root, c.path))),
                                 "uriBaseId": "%SRCROOT%"},
            "region": {"startLine": span.start_line, "endLine": span.end_line,
                       "snippet": {"text": "\n".join(span.lines)}},
            "contextRegion": {"startLine": c.start_line, "endLine": c.end_line},
        }}],
        "properties": properties,
    }


def render_sarif(report: ReviewReport) -> str:
    """The SARIF 2.1.0 log of ``report``'s findings."""
    root = Path(report.root).resolve().as_uri().rstrip("/") + "/"
    log = {
        "$schema": SCHEMA_URI,
        "version": "2.1.0",
        "runs": [{
            "tool": {"driver": {
                "name": "slm-rerank-review",
                "version": getattr(slm_rerank_review, "__version__", "0.1.0"),
                "rules": [{"id": RULE_ID, "name": "GroundedFinding",
                           "shortDescription": {"text": "A model's finding whose quoted "
                                                        "evidence is on disk"},
                           "defaultConfiguration": {"level": "warning"}}],
            }},
            "originalUriBaseIds": {"%SRCROOT%": {"uri": root}},
            "results": [_result(f, Path(report.root)) for f in report.findings],
            "properties": {"query": report.query, "degraded": report.degraded,
                           "dropped": len(report.dropped)},
        }],
    }
    return visible(json.dumps(log, ensure_ascii=False, indent=2), json=True) + "\n"
