"""Unit tests of the benchmark's metric functions on hand-made rankings."""

from __future__ import annotations

import dataclasses
import json
import math
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import metrics  # noqa: E402
import pytest  # noqa: E402
from baselines import is_code_file, is_source_file, query_terms  # noqa: E402
from cases import Case, Ranking, case_split, load_cases, score, split_of  # noqa: E402
from report import render  # noqa: E402
from run import select_cases  # noqa: E402

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


def test_source_files_keep_tests_and_code_files_drop_them():
    # bm25-src: by extension only, so test modules and docs/conf.py are indexed.
    assert is_source_file("tests/test_app.py") and is_source_file("pkg/parser_test.go")
    assert is_source_file("docs/conf.py") and is_source_file("web/app.test.ts")
    # bm25-code: what the tool calls program source.
    assert is_code_file("src/pkg/mod.py") and is_code_file("pkg/parser.go")
    assert not is_code_file("tests/test_app.py") and not is_code_file("pkg/parser_test.go")
    assert not is_code_file("docs/conf.py") and not is_code_file("web/app.test.ts")
    assert not is_code_file("static/jquery-3.5.1.js") and not is_code_file("README.md")


def _case_line(case_id: str, repo: str, **extra: str) -> str:
    obj = {"id": case_id, "repo": repo, "base_commit": "0" * 40, "title": "t", "query": "q",
           "gold_files": ["a.go"], "gold_lines": {}, **extra}
    return json.dumps(obj)


def test_split_is_the_cases_own_else_the_hash_split(tmp_path):
    cases_file = tmp_path / "cases.jsonl"
    lines = [
        _case_line("own-train", "x/y", lang="go", split="train"),
        _case_line("own-held", "x/z", lang="go", split="held-out"),
        *[_case_line(f"hashed-{i}", "x/w") for i in range(8)],
    ]
    cases_file.write_text("\n".join(lines) + "\n")
    cases = load_cases(cases_file)
    assert [c.lang for c in cases[:3]] == ["go", "go", ""]
    assert case_split(cases[0]) == "train" and case_split(cases[1]) == "held-out"
    hashed = {c.id: split_of(c.id) for c in cases[2:]}
    assert {case_split(c) for c in cases[2:]} == {"dev", "held-out"}
    held = [c.id for c in select_cases(cases, None, None, "held-out")]
    assert held == sorted(["own-held", *(i for i, s in hashed.items() if s == "held-out")])
    assert [c.id for c in select_cases(cases, None, None, "train")] == ["own-train"]
    assert len(select_cases(cases, None, None, "all")) == 10


def test_an_unknown_split_names_the_line(tmp_path):
    cases_file = tmp_path / "cases.jsonl"
    cases_file.write_text(_case_line("a", "x/y") + "\n" + _case_line("b", "x/y", split="test"))
    with pytest.raises(SystemExit, match=r"cases\.jsonl:2: .*split 'test'"):
        load_cases(cases_file)


def _lang_case(case_id: str, lang: str) -> Case:
    return Case(id=case_id, repo=f"o/{lang}", base_commit="0" * 40, title="t", query="q",
                gold_files=("a.src",), gold_lines={}, lang=lang)


def test_report_has_a_table_per_language_when_cases_name_one():
    hits = {"go-1": 1, "go-2": None, "rust-1": 2}  # rank of the gold file for `fast`
    results = []
    for case_id, rank in hits.items():
        case = _lang_case(case_id, case_id.split("-")[0])
        paths = ["x.src"] if rank is None else ["x.src"] * (rank - 1) + ["a.src"]
        results.append(score(case, "title", "fast", Ranking(paths, 0.01)))
        results.append(score(case, "title", "bm25-src", Ranking(["a.src"], 0.001)))
    text = render(results, ["fast", "bm25-src"], ["title"], [])
    rows = {tuple(cell.strip() for cell in line.strip("|").split("|"))
            for line in text.splitlines() if line.startswith("| ")}
    assert ("go", "2", "fast", "50.0", "50.0", "50.0", "0.500") in rows
    assert ("rust", "1", "fast", "0.0", "100.0", "100.0", "0.500") in rows
    assert ("go", "2", "bm25-src", "100.0", "100.0", "100.0", "1.000") in rows
    assert ("**all (micro)**", "3", "fast", "33.3", "66.7", "66.7", "0.500") in rows
    assert ("**macro over 2 languages**", "3", "fast", "25.0", "75.0", "75.0", "0.500") in rows
    # Without languages the report is as before: no such table.
    plain = [dataclasses.replace(r, lang="") for r in results]
    assert "Per language" not in render(plain, ["fast", "bm25-src"], ["title"], [])


def test_a_mined_case_id_with_a_slash_gets_a_query_file():
    from systems import Runner

    case = _lang_case("owner/name@0123456789ab", "go")
    runner = Runner()
    try:
        argv = runner._query_args(case, "query", "the whole commit message")
        assert argv[0] == "--query-file"
        assert Path(argv[1]).read_text(encoding="utf-8") == "the whole commit message"
    finally:
        runner.close()


def test_per_repo_spreads_a_sample_over_every_repository():
    cases = [_lang_case(f"go-{i}", "go") for i in range(10)]
    cases += [_lang_case(f"rust-{i}", "rust") for i in range(2)]
    ids = [c.id for c in select_cases(cases, None, None, "all", per_repo=3)]
    assert ids == ["go-0", "go-3", "go-6", "rust-0", "rust-1"]


def _row(case: str, repo: str, split: str, mode: str):
    from train_ranker import Row
    return Row(case, repo, "go", split, mode, "", ["a.go"], [(1.0,)], ["a.go"])


def test_fewer_cases_keeps_a_spread_of_each_repositorys_cases_with_both_modes():
    from train_ranker import fewer_cases
    rows = [_row(f"{repo}@{i:02d}", repo, "train", mode)
            for repo in ("o/a", "o/b") for i in range(10) for mode in ("title", "query")]
    rows += [_row("bench-1", "x/y", "dev", mode) for mode in ("title", "query")]
    kept = fewer_cases(3)(rows)
    cases = {r.case for r in kept}
    assert {c for c in cases if c.startswith("o/a")} == {"o/a@00", "o/a@03", "o/a@06"}
    assert len({c for c in cases if c.startswith("o/b")}) == 3
    # a kept case keeps both its query modes, and the benchmark's dev rows are all kept
    assert all(sum(r.case == c for r in kept) == 2 for c in cases)
    assert "bench-1" in cases
    assert fewer_cases(50)(rows) == rows
