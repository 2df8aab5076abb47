"""ModelClient.post_json: JSON to any path of a server, faults mapped like every request.

The 501 answer is the one a real llama-server without ``--reranking`` gives to
``/v1/rerank`` (recorded in plugins/slm-rerank-rerank-endpoint/tests/fixtures).
"""

from __future__ import annotations

import asyncio
import json
import socket
import time
from pathlib import Path
from typing import Any

import pytest
from misbehaving_servers import misbehaving_server
from pytest_httpserver import HTTPServer
from werkzeug import Request, Response

from slm_rerank.errors import ContractError, TransientError
from slm_rerank.model.client import ModelClient
from slm_rerank.registrations import Endpoint

RECORDED = (Path(__file__).resolve().parents[2] / "plugins" / "slm-rerank-rerank-endpoint"
            / "tests" / "fixtures")


def post(endpoint: Endpoint, path: str, body: dict[str, Any], timeout: float = 5.0) -> Any:
    async def main() -> Any:
        async with ModelClient(timeout=timeout) as client:
            return await client.post_json(endpoint, path, body)
    return asyncio.run(main())


def base(httpserver: HTTPServer) -> str:
    return httpserver.url_for("/").rstrip("/")


def test_the_body_goes_to_the_path_as_json_and_the_answer_comes_back_decoded(
        httpserver: HTTPServer):
    body = {"query": "retries", "documents": ["a", "b"]}
    httpserver.expect_request("/v1/rerank", method="POST", json=body).respond_with_json(
        {"results": [{"index": 0, "relevance_score": 0.5}]})

    answer = post(Endpoint(base(httpserver)), "/v1/rerank", body)

    assert answer == {"results": [{"index": 0, "relevance_score": 0.5}]}


def test_the_api_key_is_sent_as_a_bearer_token(httpserver: HTTPServer):
    httpserver.expect_request("/v1/rerank", headers={"Authorization": "Bearer s3cret"}
                              ).respond_with_json({"results": []})

    post(Endpoint(base(httpserver), api_key="s3cret"), "/v1/rerank", {})

    httpserver.check_assertions()


def test_a_server_error_is_transient(httpserver: HTTPServer):
    httpserver.expect_request("/v1/rerank").respond_with_json(
        {"error": {"code": 500, "message": "llama_decode failed"}}, status=500)

    with pytest.raises(TransientError, match="HTTP 500: llama_decode failed"):
        post(Endpoint(base(httpserver)), "/v1/rerank", {})


def test_not_implemented_is_permanent_and_quotes_the_server(httpserver: HTTPServer):
    recorded = json.loads((RECORDED / "llamacpp-rerank-not-enabled.json").read_text())
    httpserver.expect_request("/v1/rerank").respond_with_json(
        recorded["response"]["body"], status=recorded["response"]["status"])
    where = base(httpserver)

    with pytest.raises(ContractError, match=r"HTTP 501 \(Not Implemented\).*--reranking") as e:
        post(Endpoint(where), "/v1/rerank", {})

    assert f"{where}/v1/rerank" in str(e.value) and e.value.endpoint == where


def test_a_refusal_is_permanent(httpserver: HTTPServer):
    httpserver.expect_request("/v1/rerank").respond_with_json(
        {"detail": "model is required"}, status=422)

    with pytest.raises(ContractError, match="HTTP 422"):
        post(Endpoint(base(httpserver)), "/v1/rerank", {})


def test_an_answer_that_is_not_json_is_a_contract_error(httpserver: HTTPServer):
    httpserver.expect_request("/v1/rerank").respond_with_data("<html>hello</html>")

    with pytest.raises(ContractError, match="not JSON"):
        post(Endpoint(base(httpserver)), "/v1/rerank", {})


def test_a_refused_connection_is_transient():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]

    with pytest.raises(TransientError, match="refused"):
        post(Endpoint(f"http://127.0.0.1:{port}"), "/v1/rerank", {})


def test_a_server_slower_than_the_timeout_is_transient(httpserver: HTTPServer):
    def slow(request: Request) -> Response:
        time.sleep(0.5)
        return Response(json.dumps({"results": []}))

    httpserver.expect_request("/v1/rerank").respond_with_handler(slow)

    with pytest.raises(TransientError, match="did not answer"):
        post(Endpoint(base(httpserver)), "/v1/rerank", {}, timeout=0.1)


def test_a_501_to_a_completion_is_permanent_not_a_fault_to_wait_out(
        httpserver: HTTPServer) -> None:
    """A llama-server started with --embedding answers /completion with 501: retrying or
    degrading forever would hide a server that can never judge."""
    httpserver.expect_request("/completion", method="POST").respond_with_json(
        {"error": {"code": 501, "message": "This server does not support completions.",
                   "type": "not_supported_error"}}, status=501)
    endpoint = Endpoint(httpserver.url_for("/").rstrip("/"), "llama.cpp", "m.gguf")

    async def ask() -> None:
        async with ModelClient(timeout=5) as client:
            await client.next_token(endpoint, ["prompt"])

    with pytest.raises(ContractError, match="HTTP 501"):
        asyncio.run(ask())


def test_an_answer_that_trickles_ends_at_the_timeout_as_a_whole():
    # one byte every 0.2 s: each read beats the timeout, the answer never ends
    async def main(url: str) -> Any:
        async with ModelClient(timeout=1.0) as client:
            # a hang becomes a TimeoutError here, which pytest.raises does not catch
            return await asyncio.wait_for(client.post_json(Endpoint(url), "/v1/rerank", {}),
                                          20.0)

    with misbehaving_server("trickle", interval=0.2) as server:
        started = time.monotonic()
        with pytest.raises(TransientError, match="did not answer within 1 s"):
            asyncio.run(main(server.url))
        took = time.monotonic() - started

    assert took < 5 * 1.0
