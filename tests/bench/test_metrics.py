"""Unit tests of the benchmark's metric functions on hand-made rankings."""

from __future__ import annotations

import math
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import metrics  # noqa: E402
from baselines import is_source_file, query_terms  # noqa: E402
from cases import Case, Ranking, score  # noqa: E402

GOLD = ["pkg/b.py", "pkg/z.py"]


def test_first_gold_rank():
    assert metrics.first_gold_rank(["a.py", "pkg/b.py", "pkg/z.py"], GOLD) == 2
    assert metrics.first_gold_rank(["pkg/z.py"], GOLD) == 1
    assert metrics.first_gold_rank(["a.py", "c.py"], GOLD) is None
    assert metrics.first_gold_rank([], GOLD) is None


def test_hit_at_k_counts_any_gold_file_at_or_above_k():
    ranked = ["a.py", "c.py", "d.py", "e.py", "pkg/b.py", "f.py"]
    assert not metrics.hit_at(ranked, GOLD, 1)
    assert not metrics.hit_at(ranked, GOLD, 4)
    assert metrics.hit_at(ranked, GOLD, 5)
    assert metrics.hit_at(ranked, GOLD, 10)
    assert metrics.hit_at(["pkg/z.py"], GOLD, 1)
    assert not metrics.hit_at([], GOLD, 10)


def test_reciprocal_rank_is_cut_at_k():
    assert metrics.reciprocal_rank(["pkg/b.py"], GOLD) == 1.0
    assert metrics.reciprocal_rank(["a.py", "x.py", "pkg/z.py"], GOLD) == 1 / 3
    ranked_11th = [f"f{i}.py" for i in range(10)] + ["pkg/b.py"]
    assert metrics.reciprocal_rank(ranked_11th, GOLD, k=10) == 0.0
    assert metrics.reciprocal_rank(ranked_11th, GOLD, k=11) == 1 / 11
    assert metrics.mean([1.0, 0.5, 0.0, 0.0]) == 0.375  # MRR over four cases


def test_spans_overlap_is_inclusive():
    assert metrics.spans_overlap((10, 20), (20, 30))
    assert metrics.spans_overlap((10, 20), (12, 13))
    assert metrics.spans_overlap((12, 13), (10, 20))
    assert not metrics.spans_overlap((10, 20), (21, 30))
    assert not metrics.spans_overlap((31, 40), (21, 30))


def test_line_hit_needs_same_file_and_top_k():
    gold_lines = {"pkg/b.py": [[100, 110], [200, 205]]}
    assert metrics.line_hit([("pkg/b.py", 195, 200)], gold_lines)
    assert not metrics.line_hit([("pkg/b.py", 1, 99)], gold_lines)
    # Right lines in the wrong file do not count.
    assert not metrics.line_hit([("pkg/other.py", 100, 110)], gold_lines)
    sixth = [("a.py", 1, 2)] * 5 + [("pkg/b.py", 100, 101)]
    assert not metrics.line_hit(sixth, gold_lines, k=5)
    assert metrics.line_hit(sixth, gold_lines, k=6)


def test_micro_and_macro_means():
    assert math.isnan(metrics.mean([]))
    by_repo = {"big/repo": [1.0, 1.0, 1.0, 0.0], "small/repo": [0.0], "empty/repo": []}
    micro = metrics.mean(v for vals in by_repo.values() for v in vals)
    assert micro == 0.6
    assert metrics.macro_mean(by_repo) == (0.75 + 0.0) / 2


def test_percentile_interpolates_like_numpy():
    values = [40.0, 10.0, 30.0, 20.0]
    assert metrics.percentile(values, 0) == 10.0
    assert metrics.percentile(values, 100) == 40.0
    assert metrics.percentile(values, 50) == 25.0
    assert math.isclose(metrics.percentile(values, 95), 38.5)
    assert metrics.percentile([7.0], 95) == 7.0
    assert math.isnan(metrics.percentile([], 50))


def test_score_a_case():
    case = Case(
        id="x__y-1",
        repo="x/y",
        base_commit="0" * 40,
        title="t",
        query="q",
        gold_files=("pkg/b.py",),
        gold_lines={"pkg/b.py": [[10, 12]]},
    )
    cited = Ranking(["a.py", "pkg/b.py"], 0.25, citations=[("a.py", 1, 9), ("pkg/b.py", 5, 10)])
    result = score(case, "title", "fast", cited)
    assert (result.gold_rank, result.hit1, result.hit5, result.rr10) == (2, False, True, 0.5)
    assert result.line_hit5 is True
    assert result.latency_ms == 250.0
    files_only = score(case, "query", "bm25-all", Ranking(["a.py"], 0.001))
    assert files_only.line_hit5 is None
    assert (files_only.hit10, files_only.rr10) == (False, 0.0)


def test_query_terms_and_source_filter():
    text = "The Foo_bar  fails; foo_bar is NOT a bug in x2 or Q? __init__ and The"
    assert query_terms(text) == ["foo_bar", "fails", "bug", "__init__"]
    assert len(query_terms(" ".join(f"term{i}" for i in range(100)))) == 32
    assert is_source_file("src/pkg/mod.py") and is_source_file("lib/x.PYX")
    assert not is_source_file("docs/index.rst") and not is_source_file("setup.cfg")
    assert not is_source_file("README.md") and not is_source_file("Makefile")
