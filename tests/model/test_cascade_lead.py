"""The cascade asks no judge when the lexical order is decisive (``lexical.rank.lead``,
``model.cascade.DECISIVE_LEAD``): the first file leads the next by enough that, on the
benchmark, the lexical first was right far more often than a judge could lift it.

A judge that needs no server records what it is asked, so a test sees whether anything
was sent; the search is the real pipeline over a small repository.
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import pytest
import slm_rerank_openai
import slm_rerank_ripgrep
from fake_plugins import LengthJudge
from search_fixtures import make_repo

from slm_rerank.config import Settings
from slm_rerank.host import Host
from slm_rerank.lexical.chunking import Chunk
from slm_rerank.lexical.rank import Ranked, lead
from slm_rerank.lexical.scores import ScoredChunk
from slm_rerank.model.cascade import DECISIVE_LEAD, decisive_lead
from slm_rerank.pipeline import SearchRequest, run_search

#: one file all about the query, one that mentions it once: a decisive lead
DECISIVE = {
    "net/backoff.py": "".join(f"def retry_backoff_{i}(attempt):\n    # retry backoff delay\n"
                              f"    return retry_backoff_delay(attempt) * {i}\n\n"
                              for i in range(6)),
    "ui/colour.py": "RED = 'red'\n# retry once\n",
}
#: two files with the same words: no lead
CLOSE = {
    "net/a.py": "def retry_backoff(attempt):\n    # retry backoff delay\n    return 2 ** attempt\n",
    "net/b.py": "def retry_backoff(tries):\n    # retry backoff delay\n    return 3 ** tries\n",
}
QUERY = "retry backoff delay"


def chunk(path: str, score: float) -> ScoredChunk:
    return ScoredChunk(path, Chunk(1, 2), score, [])


def test_the_lead_is_the_first_files_best_chunk_over_the_next_files() -> None:
    ranked = Ranked([chunk("a.py", 10), chunk("a.py", 9), chunk("b.py", 4), chunk("c.py", 3)])

    assert lead(ranked) == pytest.approx(2.5)
    assert lead(Ranked([chunk("a.py", 5), chunk("b.py", 5)])) == pytest.approx(1.0)


def test_one_file_or_no_positive_score_has_no_lead() -> None:
    assert lead(Ranked([])) is None
    assert lead(Ranked([chunk("a.py", 10), chunk("a.py", 3)])) is None
    assert lead(Ranked([chunk("a.py", 0), chunk("b.py", 0)])) is None
    assert lead(Ranked([chunk("a.py", 2), chunk("b.py", 0)])) is None


@pytest.mark.parametrize("first, second", [(math.nan, 1.0), (5.0, math.nan),
                                           (math.inf, 1.0), (math.inf, math.inf)])
def test_a_score_that_is_no_number_gives_no_lead_so_the_judge_is_asked(
        first: float, second: float) -> None:
    # NaN compares false with everything: unguarded, NaN >= 1.2 failing would not stop a
    # "nan times the next" from passing as decisive
    assert lead(Ranked([chunk("a.py", first), chunk("b.py", second)])) is None
    assert decisive_lead(math.nan) is None and decisive_lead(math.inf) is None


def test_the_cascade_is_decisive_from_its_threshold_on() -> None:
    assert decisive_lead(None) is None
    assert decisive_lead(DECISIVE_LEAD - 0.01) is None
    reason = decisive_lead(DECISIVE_LEAD)
    assert reason is not None and "decisive" in reason and f"{DECISIVE_LEAD:g}" in reason


def searched(tmp_path: Path, files: dict[str, str], cascade: bool,  # type: ignore[no-untyped-def]
             **more: object):
    LengthJudge.seen = []
    root = make_repo(tmp_path / "repo", files)
    settings = dataclasses.replace(Settings(), scorer="length", score_cache=False,
                                   cascade=cascade, rerank_top=4, **more)
    host = Host.with_plugins(settings, LengthJudge, slm_rerank_openai, slm_rerank_ripgrep)
    fast = run_search(SearchRequest(query=QUERY, root=root, fast=True), host)
    report = run_search(SearchRequest(query=QUERY, root=root, fast=False), host)
    return fast, report


def test_a_decisive_lexical_order_is_not_judged_and_keeps_every_result(tmp_path: Path) -> None:
    fast, report = searched(tmp_path, DECISIVE, cascade=True)

    assert LengthJudge.seen == []  # nothing was sent to the judge
    tokens = report.model.tokens
    assert "decisive" in tokens["stopped"] and tokens["cascade"] is True
    assert tokens["unjudged"] >= 2 and tokens["saved"] > 0 and tokens["prompt"] == 0
    assert report.degraded is None  # a choice, not a fault
    assert [c.path for c in report.results] == [c.path for c in fast.results]
    assert all(c.model_score is None for c in report.results)
    assert any("0 of" in n and "decisive" in n for n in report.notes)


def test_a_decisive_order_shows_fasts_lexical_scores_not_zeros(tmp_path: Path) -> None:
    # nothing was judged, so nothing was fused: a table of 0.000 would read as a judge
    # that said no to every result
    fast, report = searched(tmp_path, DECISIVE, cascade=True)

    assert [(c.location, c.score) for c in report.results] == [
        (c.location, c.score) for c in fast.results]
    assert report.score_kind == fast.score_kind != "fused"
    assert all(c.score > 0 and c.lexical_score > 0 for c in report.results)
    assert report.model is not None and report.model.scored == 0


def test_a_decisive_order_still_reports_the_budgets_asked_for(tmp_path: Path) -> None:
    # model.tokens says budget_tokens and budget_seconds "as asked", judged or not
    _, report = searched(tmp_path, DECISIVE, cascade=True, budget_tokens=2000,
                         budget_seconds=20.0)

    tokens = report.model.tokens
    assert LengthJudge.seen == [] and "decisive" in tokens["stopped"]
    assert (tokens["budget_tokens"], tokens["budget_seconds"]) == (2000, 20.0)


def test_without_the_cascade_a_decisive_order_is_judged_as_before(tmp_path: Path) -> None:
    _, report = searched(tmp_path, DECISIVE, cascade=False)

    assert LengthJudge.seen, "the judge was asked"
    assert report.model.tokens["stopped"] is None
    assert any(c.model_score is not None for c in report.results)


def test_the_cascade_judges_a_close_race(tmp_path: Path) -> None:
    _, report = searched(tmp_path, CLOSE, cascade=True)

    assert LengthJudge.seen, "the judge was asked"
    assert not (report.model.tokens["stopped"] or "").count("decisive")
    assert any(c.model_score is not None for c in report.results)
