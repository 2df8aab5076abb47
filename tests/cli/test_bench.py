"""`slm-rerank bench --cases FILE.jsonl`: a user's labelled queries, each line checked."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from search_fixtures import cli, isolate, make_repo

from slm_rerank.calibration.labelled import load_cases
from slm_rerank.config import ConfigError

TREE = {"src/retry.py": "def retry_backoff(attempts):\n    return 2 ** attempts\n",
        "src/http.py": "def get(url):\n    return url\n",
        "docs/retry.md": "# Retry\nretry backoff\n"}


def test_fast_measures_the_lexical_stage_on_the_labelled_queries(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    isolate(monkeypatch, tmp_path)
    root = make_repo(tmp_path / "repo", TREE)
    cases = tmp_path / "cases.jsonl"
    cases.write_text(
        json.dumps({"query": "retry backoff", "gold_files": ["src/retry.py"]}) + "\n\n"
        + json.dumps({"id": "get", "query": "http get url", "gold_files": ["src/http.py"],
                      "gold_lines": {"src/http.py": [[1, 2]]}}) + "\n")

    run = cli("bench", "--cases", str(cases), "--fast", "--format", "json", str(root),
              cwd=tmp_path, timeout=60)

    document = run.json()
    assert document["cases"] == 2 and document["model"] is None
    [lexical] = document["orders"]
    assert (lexical["hit_at_1"], lexical["mrr"]) == (1.0, 1.0)


def test_a_gold_path_written_with_dots_or_doubled_slashes_names_the_searched_file(
        tmp_path: Path) -> None:
    cases = tmp_path / "cases.jsonl"
    cases.write_text(json.dumps({"query": "retry",
                                 "gold_files": ["./src//retry.py", "src/retry.py"],
                                 "gold_lines": {"./src/retry.py": [[1, 2]]}}) + "\n")

    [case] = load_cases(cases)

    assert case.gold_files == ("src/retry.py",)
    assert case.gold_lines == {"src/retry.py": [(1, 2)]}


@pytest.mark.parametrize(("line", "message"), [
    ('{"query": "q", "gold_files": ["./"]}', "line 2: key 'gold_files': a path names no file"),
    (json.dumps({"query": "q" * 1_000_001, "gold_files": ["a.py"]}),
     "line 2: key 'query': the query is longer than the query limit"),
    ('{"query": "retry"}', "line 2: key 'gold_files' is missing"),
    ('{"query": "retry", "gold_files": []}', "line 2: key 'gold_files' must be a non-empty"),
    ('{"query": "", "gold_files": ["a.py"]}', "line 2: key 'query' must be a non-empty string"),
    ('{"query": "q", "gold_files": ["a.py"], "gold": 1}', "line 2: unknown key 'gold'"),
    ('{"query": "q", "gold_files": ["../a.py"]}', "line 2: key 'gold_files': each path must "
                                                 "be relative"),
    ('{"query": "q", "gold_files": ["a.py"], "gold_lines": {"a.py": [[5, 2]]}}',
     "line 2: key 'gold_lines': 'a.py' must hold [start, end] pairs"),
    ('{"query": "q", "gold_files": ["a.py"], "gold_lines": {"b.py": [[1, 2]]}}',
     "line 2: key 'gold_lines': 'b.py' is not in gold_files"),
    ('["q", "a.py"]', "line 2: expected a JSON object, got list"),
    ('{"query": "q", ', "line 2: not JSON"),
])
def test_each_bad_line_is_an_error_naming_its_line_and_key(tmp_path: Path, line: str,
                                                           message: str) -> None:
    cases = tmp_path / "cases.jsonl"
    cases.write_text('{"query": "fine", "gold_files": ["a.py"]}\n' + line + "\n")

    with pytest.raises(ConfigError) as raised:
        load_cases(cases)

    assert f"{cases} {message}" in str(raised.value)


def test_a_bad_cases_file_stops_bench_with_the_line_named(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    isolate(monkeypatch, tmp_path)
    cases = tmp_path / "cases.jsonl"
    cases.write_text('{"query": "retry", "gold_files": "src/retry.py"}\n')

    run = cli("bench", "--cases", str(cases), "--fast", cwd=tmp_path)

    assert run.returncode == 1
    assert "cases.jsonl line 1: key 'gold_files' must be a non-empty list" in run.stderr


def test_each_case_gets_a_line_with_the_rank_of_its_gold_file_or_miss(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    isolate(monkeypatch, tmp_path)
    root = make_repo(tmp_path / "repo", TREE)
    cases = tmp_path / "cases.jsonl"
    cases.write_text("\n".join(json.dumps(case) for case in [
        {"id": "retries", "query": "retry backoff", "gold_files": ["src/retry.py"]},
        {"query": "retry backoff", "gold_files": ["src/http.py"]},  # never ranked
        {"id": "gone", "query": "retry", "gold_files": ["src/nope.py"]},
    ]) + "\n")

    text = cli("bench", "--cases", str(cases), "--fast", str(root), cwd=tmp_path, timeout=60)
    document = cli("bench", "--cases", str(cases), "--fast", "--format", "json", str(root),
                   cwd=tmp_path, timeout=60).json()

    assert text.returncode == 0, text.stderr
    assert text.stdout.splitlines()[-4:] == [
        "per case: rank of the first gold file in each order (miss: not ranked)",
        "  retries: lexical 1",
        "  line 2: lexical miss",
        "  gone: left out (gold files missing or generated in the searched tree)"]
    assert [(c["id"], c["ranks"], c["left_out"]) for c in document["per_case"]] == [
        ("retries", {"lexical": 1}, False), ("line 2", {"lexical": None}, False),
        ("gone", {}, True)]


def test_no_measurable_case_is_an_error_not_an_empty_table(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    isolate(monkeypatch, tmp_path)
    root = make_repo(tmp_path / "repo", TREE)
    cases = tmp_path / "cases.jsonl"
    # paths relative to the wrong folder: not one gold file is in the searched tree
    cases.write_text(json.dumps({"query": "retry backoff", "gold_files": ["repo/src/retry.py"]})
                     + "\n" + json.dumps({"query": "get url", "gold_files": ["http.py"]}) + "\n")

    for form in ("text", "json"):
        run = cli("bench", "--cases", str(cases), "--fast", "--format", form, str(root),
                  cwd=tmp_path, timeout=60)

        assert run.returncode == 1
        assert run.stdout == ""
        assert run.stderr == (
            "slm-rerank: error: no case could be measured: all 2 were left out (gold files "
            "missing or generated in the searched tree); gold files are paths relative to "
            f"{root.resolve()}\n")
