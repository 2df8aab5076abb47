"""A short generation from the model client, and query expansion against a real server.

Fakes answer with payloads recorded from a real llama-server (tests/fixtures/wire/), with
the generated text replaced; the last tests ask the real llama-server.
"""

from __future__ import annotations

import asyncio
import copy
import json
from pathlib import Path
from typing import Any

import pytest
from pytest_httpserver import HTTPServer

import slm_rerank
from slm_rerank import pipeline
from slm_rerank.errors import ContractError, TransientError
from slm_rerank.host import Host
from slm_rerank.model.client import MAX_ANSWER_BYTES, ModelClient
from slm_rerank.registrations import Endpoint

WIRE = Path(__file__).resolve().parent.parent / "fixtures" / "wire"


def recorded(name: str) -> Any:
    data = json.loads((WIRE / name).read_text(encoding="utf-8"))
    return copy.deepcopy(data["exchanges"][0]["response"])


def generate(endpoint: Endpoint, prompt: str = "Words:", max_tokens: int = 16,
             stop: tuple[str, ...] = ("\n",)) -> str:
    async def run() -> str:
        async with ModelClient(timeout=5) as client:
            return await client.generate(endpoint, prompt, max_tokens, stop)

    return asyncio.run(run())


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


# --- the real server ----------------------------------------------------------------------


def test_real_llama_cpp_generates_a_short_line(llama_server: Any) -> None:
    endpoint = Endpoint(llama_server.base_url, "llama.cpp", llama_server.model_id)
    text = generate(endpoint, "Colours: red, green,", max_tokens=8)
    assert text.strip() and "\n" not in text


def test_real_expansion_adds_model_words_at_half_weight(
        llama_server: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The shared server may still be finishing requests an earlier test abandoned at its
    # deadline; this test is about what expansion adds, not how fast: give it time.
    monkeypatch.setattr(pipeline, "EXPAND_SECONDS", 120.0)
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "cache.py").write_text("def invalidate(cache):\n    cache.clear()\n")
    host = Host.from_environment(start=repo, flags={"base_url": llama_server.base_url,
                                                    "cache_dir": str(tmp_path / "cache")})
    report = slm_rerank.search("how is the cache invalidated", repo, fast=True, host=host,
                               expand=True, caller="test")
    added = [n for n in report.notes if n.startswith("expander llm")]
    assert added and "failed" not in added[0], report.notes
    assert [c.path for c in report.results][:1] == ["cache.py"]
    assert (tmp_path / "cache" / "expansions.json").is_file()
