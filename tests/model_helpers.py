"""Helpers the model-stage tests share, with fake servers and with the real llama-server."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from pytest_httpserver import HTTPServer

from slm_rerank.config import Settings
from slm_rerank.host import Host
from slm_rerank.model import discovery
from slm_rerank.model.client import ModelClient
from slm_rerank.model.discovery import Probe
from slm_rerank.model.passages import Passage
from slm_rerank.model.stage import judge
from slm_rerank.registrations import Endpoint


def probe(base_url: str, **kwargs: Any) -> Probe:
    """``discovery.probe`` of one URL, run to its end."""
    async def main() -> Probe:
        async with httpx.AsyncClient() as http:
            return await discovery.probe(http, base_url, **kwargs)
    return asyncio.run(main())


def closed_ports(count: int) -> list[int]:
    """Ports nothing listens on: bound, read, released."""
    sockets = [socket.socket() for _ in range(count)]
    try:
        for s in sockets:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


def generate(endpoint: Endpoint, prompt: str = "Words:", max_tokens: int = 16,
             stop: tuple[str, ...] = ("\n",), timeout: float = 5) -> str:
    """``ModelClient.generate`` of one prompt, run to its end."""
    async def run() -> str:
        async with ModelClient(timeout=timeout) as client:
            return await client.generate(endpoint, prompt, max_tokens, stop)

    return asyncio.run(run())


@pytest.fixture
def servers() -> Iterator[Callable[[], HTTPServer]]:
    """Start extra threaded HTTP servers (beside ``httpserver``); all stop at the end."""
    started: list[HTTPServer] = []

    def start() -> HTTPServer:
        server = HTTPServer(threaded=True)
        server.start()
        started.append(server)
        return server

    try:
        yield start
    finally:
        for server in started:
            server.clear()
            if server.is_running():
                server.stop()


#: Eight chunks, every other one about retries.
PASSAGES = [Passage(f"net/mod{i}.py", 1, 3, None,
                    "def retry_backoff():\n    return 2" if i % 2 == 0
                    else "def render_page():\n    return 1")
            for i in range(8)]


def judged(tmp_path: Path, urls: list[str], passages: list[Passage] = PASSAGES,
           **flags: Any) -> Any:
    """The judgement of ``passages`` by the servers at ``urls`` (no score cache)."""
    host = Host.from_environment(start=tmp_path, flags={"endpoints": urls,
                                                        "score_cache": False, **flags})
    settings: Settings = host.settings
    return judge("where are retries configured", passages, host, settings, None)
