"""A scorer's ``multiplier`` option sizes the head at top_k x multiplier (listwise's knob)."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest
import slm_rerank_openai
import slm_rerank_ripgrep
from search_fixtures import make_repo

import slm_rerank
from slm_rerank.config import Settings
from slm_rerank.host import Host
from slm_rerank.pipeline import SearchRequest, run_search
from slm_rerank.registrations import DocumentScore, PluginOption, Scorer, ScoreRequest


class Counting:
    """A serverless scorer that records how many documents it was asked about."""

    asked: list[int] = []

    @staticmethod
    @slm_rerank.hookimpl
    def register_scorers(register: Callable[[Scorer], None]) -> None:
        async def score(request: ScoreRequest) -> AsyncIterator[DocumentScore]:
            Counting.asked.append(len(request.documents))
            for i, _ in enumerate(request.documents):
                yield DocumentScore(i, 0.9)

        register(Scorer("counting", "says yes", score, needs_endpoint=False,
                        options=(PluginOption("multiplier", 0, "head = top_k x this"),)))


@pytest.mark.parametrize(("multiplier", "top_k", "judged"), [(0, 2, 12), (1, 2, 2),
                                                             (2, 3, 6), (100, 2, 12)])
def test_the_head_is_top_k_times_the_multiplier_at_most_rerank_top(
        tmp_path: Path, multiplier: float, top_k: int, judged: int) -> None:
    files = {f"mod{i}.py": f"def retry_{i}():\n    return 'retry'\n" for i in range(20)}
    repo = make_repo(tmp_path / "repo", files)
    settings = dataclasses.replace(Settings(), scorer="counting", rerank_top=12, top_k=top_k,
                                   score_cache=False, threshold=0.0,
                                   plugins={"counting": {"multiplier": multiplier}})
    host = Host.with_plugins(settings, slm_rerank_ripgrep, Counting, slm_rerank_openai)
    Counting.asked = []

    run_search(SearchRequest(query="retry", root=repo.resolve(), fast=False), host)

    assert Counting.asked == [judged]
