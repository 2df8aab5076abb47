"""What a search says about its results beyond the list: fewer than asked for and why, and
what the model read."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
import slm_rerank_openai
import slm_rerank_ripgrep
from search_fixtures import cli, free_port, make_repo

import slm_rerank
from slm_rerank.config import Settings
from slm_rerank.host import Host
from slm_rerank.pipeline import SearchRequest, run_search
from slm_rerank.registrations import DocumentScore, Scorer, ScoreRequest
from slm_rerank.report import Report


@pytest.fixture
def user_config(isolated_home: Path, tmp_path: Path) -> Path:
    """The user's config.toml (under the isolated XDG_CONFIG_HOME)."""
    folder = tmp_path / "_config" / "slm-rerank"
    folder.mkdir(parents=True, exist_ok=True)
    return folder / "config.toml"


def test_a_run_that_degraded_before_judging_reports_no_judged_chunk_as_cut(
        tmp_path: Path, user_config: Path) -> None:
    body = "\n".join(f"    step_{i} = {i}" for i in range(80))
    repo = make_repo(tmp_path / "repo", {"net/retry.py": f"def retry_backoff():\n{body}\n"})
    user_config.write_text("prompt_chars = 200\n")

    # nothing listens on the port: the run degrades before any chunk is judged
    run = cli("-q", "retry backoff", "-e", f"http://127.0.0.1:{free_port()}", "-v", cwd=repo)

    assert run.returncode == 0, run.stderr
    assert "degraded:" in run.stderr
    assert "judged chunks were longer than prompt_chars" not in run.stderr


class Constant:
    """A serverless scorer that gives every chunk the same P(relevant)."""

    probability = 0.9

    @staticmethod
    @slm_rerank.hookimpl
    def register_scorers(register: Callable[[Scorer], None]) -> None:
        async def score(request: ScoreRequest) -> AsyncIterator[DocumentScore]:
            for i, _ in enumerate(request.documents):
                yield DocumentScore(i, Constant.probability)

        register(Scorer("constant", "one verdict for all", score, needs_endpoint=False))


def judged_search(repo: Path, probability: float, top_k: int = 10, fast: bool = False,
                  **settings: Any) -> Report:
    """An in-process search whose chunks the ``Constant`` scorer judges (none: ``fast``)."""
    Constant.probability = probability
    options = {"scorer": "constant", "score_cache": False, "top_k": top_k, **settings}
    host = Host.with_plugins(dataclasses.replace(Settings(), **options), slm_rerank_ripgrep,
                             Constant, slm_rerank_openai)
    return run_search(SearchRequest(query="retry backoff", root=repo.resolve(), fast=fast),
                      host)


def test_the_cut_note_counts_the_judged_chunks(tmp_path: Path) -> None:
    body = "\n".join(f"    step_{i} = {i}" for i in range(80))
    repo = make_repo(tmp_path / "repo", {"net/retry.py": f"def retry_backoff():\n{body}\n",
                                         "net/other.py": "def retry():\n    pass\n"})

    report = judged_search(repo, 0.9, prompt_chars=200, rerank_top=2, threshold=0.0)

    assert report.model is not None and report.model.scored == 2
    assert any(n.startswith("1 of 2 judged chunks were longer than prompt_chars = 200")
               for n in report.notes), report.notes


def repo_of(tmp_path: Path, count: int) -> Path:
    """``count`` files that each match "retry backoff", and one that does not."""
    files = {f"net/retry{i}.py": f"def retry_backoff_{i}():\n    return {i}\n"
             for i in range(count)}
    return make_repo(tmp_path / "repo", {**files, "ui/colour.py": "RED = 1\n"})


def test_fewer_matching_files_than_k_is_said_on_stderr_and_in_json(tmp_path: Path) -> None:
    repo = repo_of(tmp_path, 3)

    run = cli("-q", "retry backoff", "--fast", "-k", "10", "--format", "json", cwd=repo)

    assert run.json()["shortfall"] == {"asked": 10, "shown": 3, "cause": "matches",
                                       "reason": "only 3 files in scope match the query"}
    assert run.stderr == "slm-rerank: 3 of 10 results: only 3 files in scope match the query\n"


def test_matching_files_that_could_not_be_read_are_counted_in_the_shortfall(
        tmp_path: Path) -> None:
    # the only match is minified: "no file in scope matches" alone was untrue
    repo = make_repo(tmp_path / "repo", {"dist/app.min.js": "var retry_backoff=1;" * 20,
                                         "README.md": "nothing here\n"})

    run = cli("-q", "retry backoff", "--fast", "--format", "json", cwd=repo)

    assert run.json()["shortfall"]["reason"] == (
        "no file in scope matches the query (1 more file with evidence could not be read: "
        "huge, minified, binary or unreadable; -v names them)")


def test_as_many_results_as_asked_for_say_nothing_more(tmp_path: Path) -> None:
    repo = repo_of(tmp_path, 3)

    run = cli("-q", "retry backoff", "--fast", "-k", "3", "--format", "json", cwd=repo)

    assert run.json()["shortfall"] is None
    assert run.stderr == ""


def test_a_threshold_that_drops_results_says_so_without_v(tmp_path: Path) -> None:
    repo = repo_of(tmp_path, 5)

    report = judged_search(repo, 0.001, threshold=0.5)

    assert report.results == []
    short = report.shortfall
    assert short is not None and (short.asked, short.shown, short.cause) == (10, 0, "threshold")
    assert short.reason.startswith("threshold 0.5 dropped 5 of 5 judged chunks (the judge's "
                                   "best P(relevant) 0.00)")
    assert short.reason.endswith("lower it with --threshold, or leave it unset")
    assert not any("dropped" in note for note in report.notes)  # said once, not twice


def test_a_head_smaller_than_k_keeps_the_unjudged_files_after_the_judged_ones(
        tmp_path: Path) -> None:
    repo = repo_of(tmp_path, 5)
    fast = judged_search(repo, 0.9, fast=True)

    report = judged_search(repo, 0.9, threshold=0.0, rerank_top=2)

    # as many results as --fast gives: the model's head reorders, it never shortens
    assert len(report.results) == len(fast.results) == 5
    assert [r.model_score is not None for r in report.results] == [True] * 2 + [False] * 3
    assert ({r.path for r in report.results[2:]}
            == {r.path for r in fast.results} - {r.path for r in report.results[:2]})
    assert report.shortfall is not None and report.shortfall.cause == "matches"


def test_the_cli_says_a_threshold_shortfall_in_one_line_without_v(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from click.testing import CliRunner
    from search_fixtures import install_plugin, load_plugins

    from slm_rerank.cli.commands import cli as cli_group

    repo = repo_of(tmp_path, 5)
    install_plugin(monkeypatch, "constant", Constant)
    load_plugins(monkeypatch, "constant")
    Constant.probability = 0.001

    result = CliRunner().invoke(cli_group, ["-q", "retry backoff", "--root", str(repo),
                                            "--scorer", "constant", "--threshold", "0.5",
                                            "-k", "4", "--no-cache"])

    assert result.exit_code == 0, result.stderr
    [line] = result.stderr.splitlines()
    assert line.startswith("slm-rerank: 0 of 4 results: threshold 0.5 dropped 5 of 5 judged "
                           "chunks")


def test_a_model_run_gives_no_score_to_the_results_it_did_not_judge(tmp_path: Path) -> None:
    repo = repo_of(tmp_path, 5)

    doc = judged_search(repo, 0.9, threshold=0.0, rerank_top=2).to_dict()

    assert (doc["version"], doc["score_kind"]) == (2, "fused")
    assert "0 to 1" in doc["score_meaning"] and "null" in doc["score_meaning"]
    judged, unjudged = doc["results"][:2], doc["results"][2:]
    assert len(unjudged) == 3
    for row in judged:
        assert row["model_score"] == 0.9
        assert row["score"] == row["fused_score"] and 0 < row["score"] < 1
        assert row["lexical_score"] > 0
    for row in unjudged:  # was "score": 0.0, a score nobody gave them
        assert (row["score"], row["fused_score"], row["model_score"]) == (None, None, None)
        assert row["lexical_score"] > 0


def test_a_run_that_fused_no_verdict_says_its_scores_are_not_fused(tmp_path: Path) -> None:
    repo = repo_of(tmp_path, 3)

    # nothing listens on the port: the run degrades before any chunk is judged
    run = cli("-q", "retry backoff", "-e", f"http://127.0.0.1:{free_port()}", "--format",
              "json", cwd=repo)

    fixed = cli("-q", "retry backoff", "-e", f"http://127.0.0.1:{free_port()}", "--format",
                "json", "--fixed-order", cwd=repo)

    doc = run.json()
    # the learned ranker's shares: the order --fast gives
    assert (doc["mode"], doc["score_kind"], doc["degraded"] is not None) == (
        "rerank", "learned", True)
    assert all(0 <= r["score"] <= 1 and r["lexical_score"] > 0 and r["fused_score"] is None
               for r in doc["results"])
    doc = fixed.json()
    assert (doc["mode"], doc["score_kind"], doc["degraded"] is not None) == (
        "rerank", "lexical", True)
    assert all(r["score"] == r["lexical_score"] > 0 and r["fused_score"] is None
               for r in doc["results"])


def test_piped_text_of_a_model_run_says_what_its_score_is(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from click.testing import CliRunner
    from search_fixtures import install_plugin, load_plugins

    from slm_rerank.cli.commands import cli as cli_group

    repo = repo_of(tmp_path, 5)
    install_plugin(monkeypatch, "constant", Constant)
    load_plugins(monkeypatch, "constant")
    Constant.probability = 0.9

    result = CliRunner().invoke(cli_group, ["-q", "retry backoff", "--root", str(repo),
                                            "--scorer", "constant", "--rerank-top", "2",
                                            "-k", "5", "--no-cache"])

    assert result.exit_code == 0, result.stderr
    header, *rows = result.stdout.splitlines()
    assert header == "# location  score  symbol  (score: fused P(relevant), 0-1; -: not judged)"
    assert [row.split()[1] for row in rows[2:]] == ["-"] * 3
    assert all(0 < float(row.split()[1]) < 1 for row in rows[:2])
