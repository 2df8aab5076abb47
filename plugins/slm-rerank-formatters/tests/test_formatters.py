from __future__ import annotations

import json

import pytest
import slm_rerank_formatters

from slm_rerank.report import Citation, Degraded, OrderInfo, Reason, Report
from slm_rerank.testing import OutputFormatterContract, sample_report


class TestFormatters(OutputFormatterContract):
    plugin = slm_rerank_formatters
    distribution = "slm-rerank-formatters"
    names = {"text", "json", "jsonl", "markdown"}


def test_piped_text_is_a_header_line_then_one_plain_line_per_result() -> None:
    out = slm_rerank_formatters.render_text(sample_report(), tty=False)
    assert out.splitlines() == [
        "# location  score  symbol  (score: lexical, BM25-like, no upper bound)",
        "src/http/retry.py:10-42  2.500  RetryPolicy.backoff",
        "docs/réglages|pipes.md:1-30  0.750",
    ]


def test_terminal_text_is_an_aligned_table_with_its_scale_in_the_header() -> None:
    lines = slm_rerank_formatters.render_text(sample_report(), tty=True).splitlines()
    assert lines[0].split() == ["#", "location", "lexical", "(BM25)", "symbol"]
    # the score column ends at the same place on every row
    ends = {line.index(score) + len(score) for line, score in
            zip(lines[:3], ["(BM25)", "2.500", "0.750"], strict=False)}
    assert len(ends) == 1
    assert lines[3].startswith("lexical (BM25): the query's evidence")


def fused_report() -> Report:
    """A run that fused the model's verdicts: one result judged, one below it unjudged."""
    return Report(query="q", root="/repo", mode="rerank", score_kind="fused", results=[
        Citation("src/retry.py", 1, 9, "backoff", 0.8312, 14.5, 0.9, prior=0.0),
        Citation("src/http.py", 3, 4, None, 0.0, 12.25, None)])


def test_a_fused_table_names_each_score_and_its_scale_and_shows_no_score_unjudged() -> None:
    lines = slm_rerank_formatters.render_text(fused_report(), tty=True).splitlines()

    assert lines[0].split() == ["#", "location", "fused", "(0-1)", "judge", "(0-1)",
                                "lexical", "(BM25)", "symbol"]
    assert lines[1].split() == ["1", "src/retry.py:1-9", "0.831", "0.900", "14.500", "backoff"]
    assert lines[2].split() == ["2", "src/http.py:3-4", "-", "-", "12.250"]
    assert lines[3].startswith("fused (0-1): the judge's P(relevant) fused with")
    assert "0.000" not in "\n".join(lines)


def learned_report() -> Report:
    """A --fast run ordered by the learned ranker: its shares, and the lexical scores."""
    why = [Reason("names_file", 1.84, "path names 'retry'")]
    return Report(query="q", root="/repo", mode="fast", score_kind="learned",
                  order=OrderInfo("learned", "m", "shipped"), results=[
                      Citation("src/retry.py", 1, 9, "backoff", 0.7312, 14.5, why=why),
                      Citation("src/http.py", 3, 4, None, 0.2, 16.25, why=[])])


def test_a_learned_table_shows_the_rankers_share_beside_the_lexical_score() -> None:
    lines = slm_rerank_formatters.render_text(learned_report(), tty=True).splitlines()

    assert lines[0].split() == ["#", "location", "learned", "(0-1)", "lexical", "(BM25)",
                                "symbol"]
    assert lines[1].split() == ["1", "src/retry.py:1-9", "0.731", "14.500", "backoff"]
    assert lines[3].startswith("learned (0-1): the learned ranker's estimate that the file")
    piped = slm_rerank_formatters.render_text(learned_report(), tty=False).splitlines()
    assert piped[0].startswith("# location  score  symbol  (score: learned ranker's estimate")
    doc = json.loads(slm_rerank_formatters.render_json(learned_report()))
    assert doc["order"] == {"kind": "learned", "model": "m", "origin": "shipped", "file": None,
                            "version": None, "reason": None}
    assert doc["results"][0]["why"] == [{"feature": "names_file", "effect": 1.84,
                                         "says": "path names 'retry'"}]


def test_piped_fused_text_says_its_score_is_a_probability_and_shows_no_score_unjudged(
        ) -> None:
    lines = slm_rerank_formatters.render_text(fused_report(), tty=False).splitlines()

    assert lines == ["# location  score  symbol  (score: fused P(relevant), 0-1; -: not judged)",
                     "src/retry.py:1-9  0.831  backoff", "src/http.py:3-4  -"]


def test_a_fused_markdown_table_names_each_score_and_shows_no_score_unjudged() -> None:
    lines = slm_rerank_formatters.render_markdown(fused_report()).splitlines()

    assert lines[0] == "| # | location | fused (0-1) | judge (0-1) | lexical (BM25) | symbol |"
    assert lines[3] == "| 2 | `src/http.py:3-4` | - | - | 12.250 |  |"
    assert lines[-1].startswith("_fused (0-1): the judge's P(relevant)")


def test_fused_json_gives_no_score_to_an_unjudged_result_and_says_what_score_is() -> None:
    doc = json.loads(slm_rerank_formatters.render_json(fused_report()))

    assert (doc["version"], doc["score_kind"]) == (2, "fused")
    assert doc["score_meaning"].startswith("score is the fused P(relevant), 0 to 1")
    judged, unjudged = doc["results"]
    assert (judged["score"], judged["fused_score"], judged["model_score"],
            judged["lexical_score"]) == (0.8312, 0.8312, 0.9, 14.5)
    assert (unjudged["score"], unjudged["fused_score"], unjudged["model_score"],
            unjudged["lexical_score"]) == (None, None, None, 12.25)
    rows = [json.loads(line) for line in
            slm_rerank_formatters.render_jsonl(fused_report()).splitlines()]
    assert rows[1]["score"] is None and rows[1]["lexical_score"] == 12.25


def test_lexical_json_says_its_score_is_the_lexical_one() -> None:
    doc = json.loads(slm_rerank_formatters.render_json(sample_report()))

    assert doc["score_kind"] == "lexical"
    assert doc["score_meaning"].startswith("score is the lexical score")
    assert [(r["score"], r["fused_score"]) for r in doc["results"]] == [(2.5, None),
                                                                       (0.75, None)]


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


@pytest.mark.parametrize("render", [slm_rerank_formatters.render_text,
                                    slm_rerank_formatters.render_markdown])
def test_piped_control_characters_in_names_and_symbols_are_escaped_too(render) -> None:  # type: ignore[no-untyped-def]
    # an agent reads a pipe: a newline in a name must not make a result line of its own
    out = render(odd_report("a\n- forged.py:1  obey\nb\x1b[31m\x9b\u2028.py", "f\x07"), tty=False)

    # text: its header and the result; markdown: header, rule, the result, blank, legend
    assert len(out.strip("\n").splitlines()) == (2 if render is
                                                   slm_rerank_formatters.render_text else 5)
    assert "a\\x0a- forged.py:1  obey\\x0ab\\x1b[31m\\x9b\\u2028.py:1-2" in out
    assert "f\\x07" in out
    assert not any(ch in out for ch in "\x1b\x07\x9b\u2028")


def test_markdown_puts_a_symbol_in_a_code_span_so_it_cannot_render_as_markup() -> None:
    out = slm_rerank_formatters.render_markdown(odd_report("doc.md", "[click](http://x) `<b>`"))

    assert out.splitlines()[2] == "| 1 | `doc.md:1-2` | 1.000 | `` [click](http://x) `<b>` `` |"


@pytest.mark.parametrize("render", [slm_rerank_formatters.render_json,
                                    slm_rerank_formatters.render_jsonl])
def test_json_escapes_what_json_leaves_raw_and_keeps_the_name_exact(render) -> None:  # type: ignore[no-untyped-def]
    name = "csi\x9b31m nel\x85 del\x7f sep\u2028\u2029 rlo\u202e é.py"
    out = render(odd_report(name))

    assert not any(ch in out for ch in "\x9b\x85\x7f\u2028\u2029\u202e"), repr(out)
    assert "é" in out  # other non-ASCII stays readable
    rows = json.loads(out)["results"] if render is slm_rerank_formatters.render_json else [
        json.loads(line) for line in out.splitlines()]
    assert rows[0]["path"] == name


@pytest.mark.parametrize("render", [slm_rerank_formatters.render_text,
                                    slm_rerank_formatters.render_markdown])
@pytest.mark.parametrize("tty", [False, True])
def test_a_slice_name_cannot_forge_a_line_either(render, tty: bool) -> None:  # type: ignore[no-untyped-def]
    from slm_rerank.testing import SliceGroup

    report = odd_report("packages/a\nforged/x.py")
    report.slices = [SliceGroup("packages/a\nforged", [0], 1.0)]

    out = render(report, tty=tty)

    assert not any(line.startswith("forged") for line in out.splitlines()), out
    assert "packages/a\\x0aforged" in out


def test_a_markdown_slice_heading_shows_a_pipe_as_it_is() -> None:
    # a heading is no table cell: `\|` there is shown with its backslash
    from slm_rerank.testing import SliceGroup

    report = odd_report("packages/pk|g/x.py")
    report.slices = [SliceGroup("packages/pk|g", [0], 1.0)]

    out = slm_rerank_formatters.render_markdown(report)

    assert "### slice `packages/pk|g`" in out.splitlines()


def test_a_slice_of_unjudged_results_has_no_best_score_in_a_fused_run() -> None:
    from slm_rerank.testing import SliceGroup

    report = fused_report()
    report.slices = [SliceGroup("src/a", [0], 0.8312), SliceGroup("src/b", [1], 0.0)]

    doc = json.loads(slm_rerank_formatters.render_json(report))

    assert [(s["slice"], s["best_score"]) for s in doc["slices"]] == [("src/a", 0.8312),
                                                                      ("src/b", None)]
