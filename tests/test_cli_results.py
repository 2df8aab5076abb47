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


def judged_search(repo: Path, probability: float, top_k: int = 10, **settings: Any) -> Report:
    """An in-process search whose chunks the ``Constant`` scorer judges."""
    Constant.probability = probability
    options = {"scorer": "constant", "score_cache": False, **settings}
    host = Host.with_plugins(dataclasses.replace(Settings(), **options), slm_rerank_ripgrep,
                             Constant, slm_rerank_openai)
    return run_search(SearchRequest(query="retry backoff", root=repo.resolve(), fast=False,
                                    top_k=top_k), host)


def test_the_cut_note_counts_the_judged_chunks(tmp_path: Path) -> None:
    body = "\n".join(f"    step_{i} = {i}" for i in range(80))
    repo = make_repo(tmp_path / "repo", {"net/retry.py": f"def retry_backoff():\n{body}\n",
                                         "net/other.py": "def retry():\n    pass\n"})

    report = judged_search(repo, 0.9, prompt_chars=200, rerank_top=2, threshold=0.0)

    assert report.model is not None and report.model.scored == 2
    assert any(n.startswith("1 of 2 judged chunks were longer than prompt_chars = 200")
               for n in report.notes), report.notes
