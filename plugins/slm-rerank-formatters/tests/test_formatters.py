from __future__ import annotations

import json

import pytest
import slm_rerank_formatters

from slm_rerank.report import Citation, Degraded, Report
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


def odd_report(path: str, symbol: str | None = None) -> Report:
    return Report(query="q", root="/repo", mode="fast",
                  results=[Citation(path, 1, 2, symbol, 1.0, 1.0)])


@pytest.mark.parametrize(("path", "span"), [
    ("a`b.py", "``a`b.py:1-2``"),
    ("a``b```c.py", "````a``b```c.py:1-2````"),
    ("`lead.py", "`` `lead.py:1-2 ``"),
    ("plain.py", "`plain.py:1-2`"),
])
def test_markdown_code_span_fence_is_longer_than_any_backtick_run_in_the_name(
        path: str, span: str) -> None:
    row = slm_rerank_formatters.render_markdown(odd_report(path)).splitlines()[2]

    assert row == f"| 1 | {span} | 1.000 |  |"


@pytest.mark.parametrize("render", [slm_rerank_formatters.render_text,
                                    slm_rerank_formatters.render_markdown])
def test_on_a_terminal_control_characters_in_names_and_symbols_are_escaped(render) -> None:  # type: ignore[no-untyped-def]
    out = render(odd_report("evil\x1b]0;pwned\x07\r.py", "f\x1b[2J"), tty=True)

    assert not any(ord(ch) < 32 and ch != "\n" for ch in out), repr(out)
    assert "evil\\x1b]0;pwned\\x07\\x0d.py:1-2" in out
    assert "f\\x1b[2J" in out


def test_piped_text_writes_names_exactly_as_on_disk() -> None:
    out = slm_rerank_formatters.render_text(odd_report("red\x1b[31m.py"), tty=False)

    assert out == "red\x1b[31m.py:1-2  1.000\n"
