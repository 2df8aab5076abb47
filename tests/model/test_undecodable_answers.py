"""JSON that Python's json refuses with other errors than JSONDecodeError: nesting past the
recursion limit (RecursionError) and an integer of more than 4300 digits (ValueError).

Either is a listener that is not a usable model server: a probe says so, a request is a
ContractError naming the URL, a server's error text falls back to the raw body. None ends
in a traceback.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from pytest_httpserver import HTTPServer

from slm_rerank.errors import ContractError, TransientError
from slm_rerank.model import discovery
from slm_rerank.model.answers import NotJSON, decode_json
from slm_rerank.model.client import ModelClient
from slm_rerank.registrations import Endpoint

WIRE = Path(__file__).resolve().parent.parent / "fixtures" / "wire"

#: far deeper than any recursion limit: json gives up with a RecursionError
DEEP = b"[" * 100_000 + b"]" * 100_000


def recorded_completion() -> str:
    exchanges = json.loads((WIRE / "llamacpp-completion.json").read_text(encoding="utf-8"))
    return json.dumps(exchanges["exchanges"][0]["response"])


def next_token(httpserver: HTTPServer) -> Any:
    endpoint = Endpoint(httpserver.url_for("/").rstrip("/"), "llama.cpp")

    async def main() -> Any:
        async with ModelClient(timeout=5.0) as client:
            return await client.next_token(endpoint, ["q"])
    return asyncio.run(main())


@pytest.mark.parametrize(("body", "why"), [
    (DEEP, "nested too deep"),
    (b'{"n": ' + b"9" * 5000 + b"}", "cannot be read"),
    (b"<html>", "not JSON"),
    (b"\xff\xfe\xfa", "not JSON"),
])
def test_every_way_json_can_refuse_a_body_is_one_not_json_error(body: bytes, why: str):
    with pytest.raises(NotJSON, match=why):
        decode_json(body)


def test_a_completion_nested_too_deep_is_a_contract_error_naming_the_url(
        httpserver: HTTPServer):
    httpserver.expect_request("/completion", method="POST").respond_with_data(
        DEEP, content_type="application/json")

    with pytest.raises(ContractError, match="nested too deep") as caught:
        next_token(httpserver)
    assert httpserver.url_for("/completion") in str(caught.value)


def test_a_completion_with_a_5000_digit_number_is_a_contract_error_naming_the_url(
        httpserver: HTTPServer):
    body = recorded_completion().replace('"logprob": ', '"logprob": -' + "9" * 5000 + ", "
                                         '"was": ', 1)
    httpserver.expect_request("/completion", method="POST").respond_with_data(
        body, content_type="application/json")

    with pytest.raises(ContractError, match="cannot be read") as caught:
        next_token(httpserver)
    assert httpserver.url_for("/completion") in str(caught.value)


def test_a_500_whose_body_is_nested_too_deep_is_transient_and_quotes_the_raw_body(
        httpserver: HTTPServer):
    httpserver.expect_request("/completion", method="POST").respond_with_data(
        b'{"error": ' + DEEP + b"}", status=500, content_type="application/json")

    with pytest.raises(TransientError, match=r"HTTP 500: \{\"error\": \[\[\["):
        next_token(httpserver)


@pytest.mark.parametrize("path", ["/v1/models", "/props", "/api/version"])
def test_a_probe_calls_a_listener_answering_json_nested_too_deep_not_a_model_server(
        httpserver: HTTPServer, path: str):
    httpserver.expect_request(path).respond_with_data(DEEP, content_type="application/json")

    async def main() -> discovery.Probe:
        async with ModelClient(timeout=5.0) as client:
            return await discovery.probe(client, httpserver.url_for("/"), timeout=5.0)
    found = asyncio.run(main())

    assert found.endpoint is None
    assert found.reason is not None and found.reason.startswith("not a model server")
    if path == "/v1/models":
        assert "nested too deep" in found.reason
