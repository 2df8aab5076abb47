"""A short generation from the model client, and query expansion against a real server.

Fakes answer with payloads recorded from a real llama-server (tests/fixtures/wire/), with
the generated text replaced; tests/live/model/test_expand_model.py asks the real one.
"""

from __future__ import annotations

import asyncio
import copy
import json
import time
from pathlib import Path
from typing import Any

import pytest
from misbehaving_servers import misbehaving_server
from model_helpers import generate
from pytest_httpserver import HTTPServer
from search_fixtures import cli

import slm_rerank
from slm_rerank import pipeline
from slm_rerank.config import Settings
from slm_rerank.errors import ContractError, TransientError
from slm_rerank.host import Host
from slm_rerank.model.client import MAX_ANSWER_BYTES, ModelClient
from slm_rerank.registrations import Endpoint, ExpandRequest, QueryExpander

WIRE = Path(__file__).resolve().parent.parent / "fixtures" / "wire"


def sources() -> list[Any]:
    import slm_rerank_ripgrep

    return [slm_rerank_ripgrep]


def recorded(name: str) -> Any:
    data = json.loads((WIRE / name).read_text(encoding="utf-8"))
    return copy.deepcopy(data["exchanges"][0]["response"])


def test_llama_cpp_generates_greedily_up_to_n_predict(httpserver: HTTPServer) -> None:
    body = recorded("llamacpp-completion.json")
    body["content"] = " backoff, attempts"
    httpserver.expect_request("/completion", method="POST", json={
        "prompt": "Words:", "n_predict": 16, "temperature": 0, "cache_prompt": True,
        "stop": ["\n"]}).respond_with_json(body)
    endpoint = Endpoint(httpserver.url_for("/").rstrip("/"), "llama.cpp")
    assert generate(endpoint) == " backoff, attempts"


def test_openai_completions_generate_with_max_tokens_and_the_model(
        httpserver: HTTPServer) -> None:
    body = recorded("llamacpp-v1-completions.json")
    body["choices"][0]["text"] = " backoff"
    httpserver.expect_request("/v1/completions", method="POST", json={
        "prompt": "Words:", "max_tokens": 16, "temperature": 0, "stop": ["\n"],
        "model": "m.gguf"}).respond_with_json(body)
    endpoint = Endpoint(httpserver.url_for("/").rstrip("/"), "openai-completions", "m.gguf")
    assert generate(endpoint) == " backoff"


def test_an_answer_without_text_is_a_contract_error(httpserver: HTTPServer) -> None:
    body = recorded("llamacpp-completion.json")
    del body["content"]
    httpserver.expect_request("/completion", method="POST").respond_with_json(body)
    endpoint = Endpoint(httpserver.url_for("/").rstrip("/"), "llama.cpp")
    with pytest.raises(ContractError, match="without generated text"):
        generate(endpoint)


def test_a_server_error_while_generating_is_transient(httpserver: HTTPServer) -> None:
    httpserver.expect_request("/completion", method="POST").respond_with_json(
        {"error": {"code": 500, "message": "slot crashed"}}, status=500)
    endpoint = Endpoint(httpserver.url_for("/").rstrip("/"), "llama.cpp")
    with pytest.raises(TransientError, match="slot crashed"):
        generate(endpoint)


def test_a_generation_answer_past_16_mb_is_refused(httpserver: HTTPServer) -> None:
    httpserver.expect_request("/completion", method="POST").respond_with_data(
        b"x" * (MAX_ANSWER_BYTES + 1), content_type="application/json")
    endpoint = Endpoint(httpserver.url_for("/").rstrip("/"), "llama.cpp")
    with pytest.raises(ContractError, match="16 MB"):
        generate(endpoint)


# --- deadlines: a server that trickles its answer ----------------------------------------

#: how long a test waits before calling a run hung: far past every bound under test
HUNG = 30.0


def probe_answers() -> dict[str, bytes]:
    """What a llama-server answers a probe (recorded), so that only /completion trickles."""
    return {"/v1/models": json.dumps(recorded("llamacpp-v1-models.json")).encode(),
            "/props": json.dumps(recorded("llamacpp-props.json")).encode(),
            "/api/version": b"{}"}


def test_a_generation_that_trickles_ends_at_the_timeout_with_advice_that_fits() -> None:
    async def run(url: str) -> str:
        async with ModelClient(timeout=1.0) as client:
            # HUNG turns a hang into a TimeoutError, which pytest.raises does not catch
            return await asyncio.wait_for(client.generate(Endpoint(url, "llama.cpp"),
                                                          "Words:"), HUNG)

    with misbehaving_server("trickle", interval=0.2) as server:
        started = time.monotonic()
        with pytest.raises(TransientError) as caught:
            asyncio.run(run(server.url))
        took = time.monotonic() - started

    assert took < 5 * 1.0
    message = str(caught.value)
    assert "did not answer within 1 s" in message
    assert "score fewer documents" not in message  # one generation, not a batch of chunks


def test_expansion_against_a_trickling_completion_ends_within_the_runs_timeout(
        isolated_home: Path, tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "retry.py").write_text("def retry(attempts):\n    return attempts\n")
    with misbehaving_server("trickle", interval=0.2, answers=probe_answers()) as server:
        started = time.monotonic()
        # a real process, so that a hang is a TimeoutExpired and not a stalled suite
        run = cli("-v", "-q", "retry", "--root", str(repo), "--fast", "--expand", "-e",
                  server.url, "--timeout", "2", cwd=repo, timeout=HUNG)
        took = time.monotonic() - started

    assert run.returncode == 0, run.stderr
    assert "expander llm failed" in run.stderr and "--timeout" in run.stderr
    assert "score fewer documents" not in run.stderr
    assert "retry.py" in run.stdout  # the search went on with the typed words
    assert took < 5 * 2.0 + 5  # the deadline, and the process and lexical search around it


def test_the_expansion_deadline_is_the_runs_timeout(tmp_path: Path) -> None:
    seen: list[float] = []

    def expand(request: ExpandRequest) -> list[Any]:
        assert request.deadline is not None
        seen.append(request.deadline - time.monotonic())
        return []

    class Plugin:
        @slm_rerank.hookimpl
        def register_query_expanders(self, register: Any) -> None:
            register(QueryExpander("recorder", "records its deadline", expand,
                                   needs_endpoint=False))

    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "retry.py").write_text("def retry(attempts):\n    return attempts\n")
    for timeout in (0.5, 100.0):
        host = Host.with_plugins(Settings(sources=["ripgrep"], timeout=timeout), Plugin(),
                                 *sources())
        pipeline.run_search(pipeline.SearchRequest(query="retry", root=repo, fast=True,
                                                   expanders=["recorder"]), host)

    short, long = seen
    assert 0 < short <= 0.5  # a short --timeout is not stretched to a fixed allowance
    assert 50 < long <= 100.0  # nor a long one cut to it
