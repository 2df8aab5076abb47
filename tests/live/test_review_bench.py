"""`slm-rerank review bench --live` against the real llama-server and the bundled Gemma 3
270M: one seeded case, reviewed and its two labelled claims judged, end to end.

So small a base model measures nothing; the point is the wire: the review's generation and
both judges reach a real server, its verdicts come back as probabilities for both labelled
claims, and every candidate it generated is counted at exactly one gate.
"""

from __future__ import annotations

import json
import time
from typing import Any

from click.testing import CliRunner

#: a case's whole deadline; the test allows it five times over
DEADLINE = 240.0
#: the shortest seeded file (20 lines, one function)
CASE = "sphinx-rpartition"


def test_a_live_case_against_the_served_model_is_counted_and_judged_end_to_end(
        llama_server: Any, isolated_home: Any) -> None:
    from slm_rerank_review.bench_command import bench

    started = time.monotonic()

    # a short answer: a loaded CPU runs the 270M model at a few tokens a second
    result = CliRunner().invoke(bench, ["--live", "-e", llama_server.base_url, "--case", CASE,
                                        "--max-tokens", "48", "--timeout", str(DEADLINE),
                                        "--json"])

    assert time.monotonic() - started < DEADLINE * 5
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    live = json.loads(result.stdout)["live"]
    assert live["endpoint"] == llama_server.base_url
    [case] = live["cases"]
    assert case["case"] == CASE
    generated = len(case["candidates"])
    gates = {g["gate"]: g for g in live["gates"]}
    assert gates["evidence"]["reached"] == generated
    assert sum(g["dropped"] for g in gates.values()) + sum(
        c["dropped_by"] is None for c in case["candidates"]) == generated
    labels = {claim["label"]: claim for claim in case["claims"]}
    # a machine loaded past the deadline degrades (said in the JSON), never fabricates: a
    # judge that answered gives a probability, one that did not gives none
    judged = not any("judge" in reason for reason in case["degraded"])
    for label in ("defect", "false_claim"):
        for judge in ("support", "contradiction"):
            p = labels[label][judge]
            assert (p is not None and 0.0 < p < 1.0) if judged else p is None or 0 < p < 1
    if live["degraded"] is not None:
        assert case["degraded"], live["degraded"]
