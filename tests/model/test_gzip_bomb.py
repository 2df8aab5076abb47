"""A small gzip body that expands to a gigabyte: the size cap counts decoded bytes and
stops the decoding once it is passed, a step at a time, so neither memory nor the deadline
is spent on the rest (httpx's own decoder expands each 64 KB read to 64 MB in one call).
"""

from __future__ import annotations

import asyncio
import tracemalloc
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from misbehaving_servers import gzip_bomb, misbehaving_server

from slm_rerank.errors import ContractError
from slm_rerank.model import client as client_module
from slm_rerank.model import discovery
from slm_rerank.model.answers import Unreadable, read_capped
from slm_rerank.model.client import ModelClient
from slm_rerank.registrations import Endpoint

GIB = 1 << 30


def peak_bytes(work: Callable[[ModelClient, str], Awaitable[Any]], url: str) -> tuple[Any, int]:
    """What ``work`` returned (or raised) and the most memory Python held while it ran."""
    async def main() -> Any:
        async with ModelClient(timeout=10.0) as client:
            try:
                return await work(client, url)
            except ContractError as exc:
                return exc
    tracemalloc.start()
    try:
        result = asyncio.run(main())
        return result, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_a_probe_of_a_gzip_bomb_stops_at_the_size_cap_holding_little_more_than_it():
    gzip_bomb(GIB)  # built before the clock and the memory count start
    with misbehaving_server("gzipbomb", body_bytes=GIB) as server:
        found, peak = peak_bytes(lambda c, url: discovery.probe(c, url, timeout=10.0),
                                 server.url)

    assert found.endpoint is None
    assert found.reason.startswith("not a model server") and "MB" in found.reason
    # three answers read at once, each stopped just past the cap
    assert peak < 4 * discovery.MAX_PROBE_BYTES


def test_a_request_answered_by_a_gzip_bomb_is_a_contract_error_holding_little_past_the_cap(
        ):
    gzip_bomb(GIB)
    with misbehaving_server("gzipbomb", body_bytes=GIB) as server:
        caught, peak = peak_bytes(
            lambda c, url: c.post_json(Endpoint(url), "/v1/rerank", {}), server.url)

    assert isinstance(caught, ContractError)
    assert "more than 16 MB" in str(caught) and server.url in str(caught)
    assert peak < 2 * client_module.MAX_ANSWER_BYTES


async def chunks(*parts: bytes) -> Any:
    for part in parts:
        yield part


def test_a_body_in_a_coding_that_was_not_asked_for_is_unreadable():
    with pytest.raises(Unreadable, match="br"):
        asyncio.run(read_capped(chunks(b"x"), "br", 100))


def test_a_gzip_body_within_the_cap_reads_whole_and_deflate_with_or_without_its_header():
    import zlib

    body = b'{"ok": true}' * 1000
    raw = zlib.compressobj(9, zlib.DEFLATED, -zlib.MAX_WBITS)
    raw_deflate = raw.compress(body) + raw.flush()
    one_by_one = [bytes([b]) for b in gzip_bomb(2 << 20)]

    assert asyncio.run(read_capped(chunks(zlib.compress(body)), "deflate", 1 << 20)) == body
    assert asyncio.run(read_capped(chunks(raw_deflate), "deflate", 1 << 20)) == body
    assert asyncio.run(read_capped(chunks(*one_by_one), "gzip", 3 << 20)) == b" " * (2 << 20)
    assert asyncio.run(read_capped(chunks(*one_by_one), "gzip", 1 << 20)) is None
