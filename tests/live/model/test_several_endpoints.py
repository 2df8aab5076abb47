"""One query's chunks over real llama-servers: beside a dead URL, and one of two killed mid-run."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from model_helpers import PASSAGES, judged
from pytest_httpserver import HTTPServer

from slm_rerank.model.client import ModelClient
from slm_rerank.registrations import (
    Endpoint,
)

#: few chunks: the real model takes a fraction of a second for each, two cores for all
SHORT = PASSAGES[:5]


def test_a_real_llama_server_beside_a_dead_url_judges_every_chunk(
        tmp_path: Path, llama_server: Any, servers: Callable[[], HTTPServer]) -> None:
    dead = servers()
    dead_url = dead.url_for("/").rstrip("/")
    dead.stop()

    judgement = judged(tmp_path, [dead_url, llama_server.base_url], SHORT)

    assert judgement.degraded is None
    assert sorted(judgement.scores) == list(range(len(SHORT)))
    assert [(u.url, u.scored) for u in judgement.uses] == [(llama_server.base_url, len(SHORT))]


def test_two_llama_servers_one_killed_mid_run_the_other_gives_every_verdict(
        tmp_path: Path, llama_server_factory: Callable[..., Any],
        monkeypatch: pytest.MonkeyPatch) -> None:
    first, second = llama_server_factory(slots=1), llama_server_factory(slots=1)
    original = ModelClient.next_token
    asked: dict[str, int] = {}

    async def crashing(self: ModelClient, endpoint: Endpoint, *args: Any,
                       **kwargs: Any) -> Any:
        asked[endpoint.base_url] = asked.get(endpoint.base_url, 0) + 1
        if endpoint.base_url == second.base_url and asked[endpoint.base_url] == 2:
            # the second server dies while it computes its second answer
            request = asyncio.ensure_future(original(self, endpoint, *args, **kwargs))
            await asyncio.sleep(0.02)
            second.kill()
            return await request
        return await original(self, endpoint, *args, **kwargs)

    monkeypatch.setattr(ModelClient, "next_token", crashing)

    judgement = judged(tmp_path, [first.base_url, second.base_url], SHORT)

    assert judgement.degraded is None
    assert sorted(judgement.scores) == list(range(len(SHORT)))
    used_first, used_second = judgement.uses
    assert used_second.failed is not None and used_second.scored == 1
    assert used_first.scored == len(SHORT) - 1
    assert any(n.startswith(f"endpoint {second.base_url} failed after 1 verdicts") and
               n.endswith(f"carried on with {first.base_url}") for n in judgement.notes)
