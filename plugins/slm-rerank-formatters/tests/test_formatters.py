from __future__ import annotations

import json

import slm_rerank_formatters

from slm_rerank.report import Degraded
from slm_rerank.testing import OutputFormatterContract, sample_report


class TestFormatters(OutputFormatterContract):
    plugin = slm_rerank_formatters
    distribution = "slm-rerank-formatters"
    names = {"text", "json", "jsonl", "markdown"}


def test_piped_text_is_one_plain_line_per_result() -> None:
    out = slm_rerank_formatters.render_text(sample_report(), tty=False)
    assert out.splitlines() == [
        "src/http/retry.py:10-42  2.500  RetryPolicy.backoff",
        "docs/réglages|pipes.md:1-30  0.750",
    ]


def test_terminal_text_is_an_aligned_table() -> None:
    lines = slm_rerank_formatters.render_text(sample_report(), tty=True).splitlines()
    assert lines[0].split() == ["#", "location", "score", "symbol"]
    # the score column ends at the same place on every row
    ends = {line.index(score) + len(score) for line, score in
            zip(lines[1:], ["2.500", "0.750"], strict=False)}
    assert len(ends) == 1


def test_json_keeps_degradation_and_null_model_score() -> None:
    report = sample_report()
    report.degraded = Degraded("model server at http://127.0.0.1:8033 refused the connection")
    doc = json.loads(slm_rerank_formatters.render_json(report))
    assert doc["degraded"] == {"reason": report.degraded.reason}
    assert doc["results"][0]["model_score"] is None
    assert doc["results"][1]["model_score"] == 0.61


def test_jsonl_is_one_object_per_result_in_rank_order() -> None:
    rows = [json.loads(line) for line in
            slm_rerank_formatters.render_jsonl(sample_report()).splitlines()]
    assert [r["rank"] for r in rows] == [1, 2]
    assert rows[0]["path"] == "src/http/retry.py"


def test_markdown_escapes_pipes_in_paths() -> None:
    out = slm_rerank_formatters.render_markdown(sample_report())
    assert "`docs/réglages\\|pipes.md:1-30`" in out
    assert out.splitlines()[0].startswith("| # |")
