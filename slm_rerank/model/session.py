"""A model session for long-lived callers (the MCP server): one event loop, one client.

A CLI run asks its questions inside one ``asyncio.run`` and is gone. A server that answers
many calls keeps a ``ModelSession`` on its ``Host`` instead: a background thread runs one
event loop for good, the pooled keep-alive ``ModelClient`` lives on it, and the endpoints a
call found (probe, model id, slots; every server of an ``endpoints`` list) are reused by the
next calls for ``ENDPOINT_SECONDS``, so a warm call pays neither connection set-up nor
discovery.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Coroutine
from typing import Any, TypeVar

from slm_rerank.model.client import ModelClient
from slm_rerank.registrations import Endpoint

T = TypeVar("T")

#: How long a found endpoint is trusted without probing it again.
ENDPOINT_SECONDS = 60.0


class ModelSession:
    def __init__(self, timeout: float = 60.0) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True,
                                        name="slm-rerank-model-session")
        self._thread.start()
        self.client: ModelClient = self.run(self._make_client(timeout))
        self._endpoints: dict[tuple[Any, ...], tuple[tuple[Endpoint, ...], float]] = {}

    @staticmethod
    async def _make_client(timeout: float) -> ModelClient:
        return ModelClient(timeout=timeout)  # made on the loop it will be used on

    def run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        """Run ``coroutine`` on the session's loop and wait for its result."""
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result()

    def endpoints(self, key: tuple[Any, ...]) -> tuple[Endpoint, ...] | None:
        """The servers found for ``key`` (one, or an ``endpoints`` list's) if still fresh."""
        found = self._endpoints.get(key)
        if found is None or time.monotonic() - found[1] > ENDPOINT_SECONDS:
            return None
        return found[0]

    def remember(self, key: tuple[Any, ...], endpoints: tuple[Endpoint, ...]) -> None:
        self._endpoints[key] = (endpoints, time.monotonic())

    def forget(self) -> None:
        """Drop the endpoints found so far (a server failed: find it again next time)."""
        self._endpoints.clear()

    def close(self) -> None:
        self.run(self.client.aclose())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)
