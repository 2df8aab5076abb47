"""The Python API of the model stage, against the real llama-server."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from search_fixtures import make_repo

import slm_rerank
from slm_rerank.report import Report

FILES = {
    "net/retry.py": "def retry_backoff(attempt):\n    return 2 ** attempt\n",
    "net/client.py": "from net.retry import retry_backoff\n\ndef get(url):\n    return url\n",
}


@pytest.fixture
def report(tmp_path: Path) -> Report:
    root = make_repo(tmp_path / "repo", FILES)
    return slm_rerank.search("retry backoff", root=root, top_k=2)


def test_rerank_sync_judges_the_candidates_of_a_lexical_search(report, llama_server) -> None:  # type: ignore[no-untyped-def]
    reranker = slm_rerank.Reranker(base_url=llama_server.base_url, threshold=0.0)
    result = reranker.rerank_sync("retry backoff", report)

    assert result.degraded is None
    assert {r.path for r in result} == {"net/retry.py", "net/client.py"}
    assert all(r.model_score is not None and 0.0 < r.score < 1.0 for r in result)
    assert result.judgement.profile is not None
    assert result.judgement.profile.profile.name == "gemma-base"


def test_rerank_is_a_coroutine_for_callers_with_an_event_loop(llama_server) -> None:  # type: ignore[no-untyped-def]
    reranker = slm_rerank.Reranker(base_url=llama_server.base_url, threshold=0.0, cache=False)
    candidates = [slm_rerank.Candidate("a.py", 1, 2, "def retry():\n    pass\n",
                                       lexical_score=2.0),
                  slm_rerank.Candidate("b.py", 1, 1, "RED = 1\n", lexical_score=1.0)]

    async def main() -> list[str]:
        result = await reranker.rerank("retry", candidates)
        return [r.path for r in result]

    assert sorted(asyncio.run(main())) == ["a.py", "b.py"]


def test_a_dead_server_degrades_and_keeps_the_lexical_order(report, llama_server_factory) -> None:  # type: ignore[no-untyped-def]
    server = llama_server_factory()
    server.kill()
    result = slm_rerank.Reranker(base_url=server.base_url).rerank_sync("retry backoff", report)

    assert result.degraded is not None and server.base_url in result.degraded
    assert [r.path for r in result] == [c.path for c in report.results]
    assert all(r.model_score is None for r in result)
