"""`slm-rerank mcp` against the real llama-server: reranks, and outlives a dead server."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

import pytest
from mcp import ClientSession, StdioServerParameters, stdio_client
from search_fixtures import CLI, make_repo

TOOL = "rerank_codebase"
FILES = {
    "net/retry.py": "def retry_backoff(attempt):\n    return 2 ** attempt\n",
    "net/client.py": "from net.retry import retry_backoff\n\ndef get(url):\n    return url\n",
    "ui/colour.py": "RED = 'red'\n",
}
# threshold 0: the bundled base model is a weak judge; these tests check the wiring.
QUERY = {"query": "retry backoff", "threshold": 0.0}


@pytest.fixture
def small_repo(tmp_path: Path) -> Path:
    repo = make_repo(tmp_path / "repo", FILES)
    # a small head keeps the real model's work (and the test) short
    (repo / ".slm-rerank.toml").write_text("rerank_top = 2\n")
    return repo


def session_calls(repo: Path, base_url: str, steps: list[Any]) -> list[Any]:
    """One `slm-rerank mcp -e base_url` session; each step is tool arguments or a callable
    run between calls (to kill the model server)."""
    params = StdioServerParameters(command=str(CLI), args=["mcp", "-e", base_url],
                                   cwd=str(repo), env=dict(os.environ))

    async def run() -> list[Any]:
        results = []
        async with stdio_client(params) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                for step in steps:
                    if callable(step):
                        step()
                    else:
                        results.append(await session.call_tool(TOOL, step))
        return results

    return asyncio.run(asyncio.wait_for(run(), timeout=300))


def test_a_call_is_reranked_by_the_served_model(small_repo: Path, llama_server) -> None:  # type: ignore[no-untyped-def]
    [result] = session_calls(small_repo, llama_server.base_url, [QUERY])

    assert not result.is_error, result.content
    report = result.structured_content
    assert report["mode"] == "rerank" and report["degraded"] is None
    assert report["model"]["endpoint"] == llama_server.base_url
    assert report["model"]["scored"] == 2
    assert any(r["model_score"] is not None for r in report["results"])
    assert "degraded" not in result.content[0].text


def test_a_model_server_that_dies_mid_session_degrades_the_call_and_the_server_stays_up(
        small_repo: Path, llama_server_factory) -> None:  # type: ignore[no-untyped-def]
    server = llama_server_factory()

    first, second, third = session_calls(small_repo, server.base_url, [
        QUERY,
        server.kill,
        # another query: the score cache must not hide the dead server
        {"query": "retry attempt", "threshold": 0.0},
        {"query": "retry backoff", "fast": True},
    ])

    assert first.structured_content["degraded"] is None, first.content
    assert not second.is_error, second.content
    reason = second.structured_content["degraded"]["reason"]
    assert server.base_url in reason
    assert second.content[0].text.startswith(f"degraded: {reason}")
    assert second.structured_content["results"][0]["path"] == "net/retry.py"
    assert not third.is_error and third.structured_content["mode"] == "fast"
