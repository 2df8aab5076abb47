"""The model client: one token's top-K logprobs from every server kind, faults as our errors.

Fakes answer with payloads kept in tests/fixtures/wire/ (WIRE.md's shapes; the llama.cpp
ones recorded from a real llama-server by tests/model/record_wire.py), and check the request
body we send. tests/live/model/test_client.py asks a real llama-server.
"""

from __future__ import annotations

import asyncio
import json
import math
import socket
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from pytest_httpserver import HTTPServer
from werkzeug import Request, Response

from slm_rerank.errors import ConfigError, ContractError, TransientError
from slm_rerank.model.client import ModelClient, NextToken, TokenChoice
from slm_rerank.registrations import Endpoint

WIRE = Path(__file__).resolve().parent.parent / "fixtures" / "wire"


def wire(name: str) -> Any:
    return json.loads((WIRE / name).read_text(encoding="utf-8"))


def recorded(name: str, index: int = 0) -> Any:
    """The response of one exchange recorded from a real llama-server (record_wire.py)."""
    return wire(name)["exchanges"][index]["response"]


LOADING = recorded("llamacpp-health-loading.json")  # what every endpoint says while loading


def ask(method: str, endpoint: Endpoint, *args: Any, timeout: float = 5.0, **kwargs: Any) -> Any:
    async def main() -> Any:
        async with ModelClient(timeout=timeout) as client:
            return await getattr(client, method)(endpoint, *args, **kwargs)
    return asyncio.run(main())


def tokens(answer: NextToken) -> dict[str, float]:
    return {c.token: c.logprob for c in answer.top}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# --- llama.cpp /completion ------------------------------------------------------------------


def test_llama_cpp_legacy_probs_are_read_as_logs_of_probabilities(httpserver: HTTPServer):
    httpserver.expect_request("/completion", method="POST").respond_with_json(
        wire("old-llamacpp-completion.json"))
    endpoint = Endpoint(httpserver.url_for("/").rstrip("/"), "llama.cpp")

    [answer] = ask("next_token", endpoint, ["Q: A or B?\nA:"], top_k=2)

    assert [c.token for c in answer.top] == ["A", "B"]
    assert answer.top[0].logprob == pytest.approx(math.log(0.98))
    assert answer.prompt_tokens == 12
    assert answer.cached_tokens is None  # legacy timings carry no cache_n


def test_llama_cpp_completion_gives_top_logprobs_and_prompt_cache_reuse(httpserver: HTTPServer):
    body = recorded("llamacpp-completion.json")
    httpserver.expect_request("/completion", method="POST").respond_with_json(body)
    endpoint = Endpoint(httpserver.url_for("/").rstrip("/"), "llama.cpp")

    [answer] = ask("next_token", endpoint, ["two-shot prompt"], top_k=20)

    top = body["completion_probabilities"][0]["top_logprobs"]
    assert answer.top == tuple(TokenChoice(t["token"], t["logprob"], t["id"]) for t in top)
    assert answer.top[0].token == " yes"  # the leading space is part of the token
    assert answer.prompt_tokens == body["tokens_evaluated"]
    assert answer.cached_tokens == body["timings"]["cache_n"]


def test_llama_cpp_array_of_prompts_gives_one_answer_per_prompt(httpserver: HTTPServer):
    body = recorded("llamacpp-completion-array.json")
    httpserver.expect_request("/completion", method="POST", json={
        "prompt": ["relevant", "irrelevant"], "n_predict": 1, "n_probs": 5,
        "temperature": 0, "cache_prompt": True,
    }).respond_with_json(body)
    endpoint = Endpoint(httpserver.url_for("/").rstrip("/"), "llama.cpp")

    answers = ask("next_token", endpoint, ["relevant", "irrelevant"], top_k=5)

    httpserver.check_assertions()
    assert [tokens(a) for a in answers] == [
        {t["token"]: t["logprob"] for t in item["completion_probabilities"][0]["top_logprobs"]}
        for item in body]
    assert [a.cached_tokens for a in answers] == [item["timings"]["cache_n"] for item in body]


def test_llama_cpp_post_sampling_probabilities_are_read_as_logs(httpserver: HTTPServer):
    body = recorded("llamacpp-completion-post-sampling.json")
    httpserver.expect_request("/completion", method="POST").respond_with_json(body)
    endpoint = Endpoint(httpserver.url_for("/").rstrip("/"), "llama.cpp")

    [answer] = ask("next_token", endpoint, ["two-shot prompt"], top_k=5)

    top = body["completion_probabilities"][0]["top_probs"]
    assert [c.token for c in answer.top] == [t["token"] for t in top]
    assert [c.logprob for c in answer.top] == pytest.approx([math.log(t["prob"]) for t in top])


def test_llama_cpp_one_prompt_is_sent_as_a_string_with_one_token_and_greedy_settings(
        httpserver: HTTPServer):
    httpserver.expect_request("/completion", method="POST", json={
        "prompt": "Relevant:", "n_predict": 1, "n_probs": 5, "temperature": 0,
        "cache_prompt": True,
    }).respond_with_json(wire("old-llamacpp-completion.json"))
    endpoint = Endpoint(httpserver.url_for("/").rstrip("/"), "llama.cpp")

    ask("next_token", endpoint, ["Relevant:"], top_k=5, stop=["\n"])

    httpserver.check_assertions()


def test_llama_cpp_array_answer_of_the_wrong_length_is_a_contract_error(httpserver: HTTPServer):
    one = wire("old-llamacpp-completion.json")
    httpserver.expect_request("/completion", method="POST").respond_with_json([one])
    endpoint = Endpoint(httpserver.url_for("/").rstrip("/"), "llama.cpp")

    with pytest.raises(ContractError, match=r"/completion answered 1 results for 2 prompts"):
        ask("next_token", endpoint, ["a", "b"])


def test_llama_cpp_array_results_are_returned_in_prompt_order_by_their_index(
        httpserver: HTTPServer):
    first, second = wire("old-llamacpp-completion.json"), wire("old-llamacpp-completion.json")
    first["index"], second["index"] = 0, 1
    second["completion_probabilities"][0]["probs"] = [{"tok_str": "B", "prob": 0.9}]
    httpserver.expect_request("/completion", method="POST").respond_with_json([second, first])
    endpoint = Endpoint(httpserver.url_for("/").rstrip("/"), "llama.cpp")

    answers = ask("next_token", endpoint, ["a", "b"])

    assert [a.top[0].token for a in answers] == ["A", "B"]


# --- OpenAI-compatible /v1/completions -----------------------------------------------------


def test_vllm_list_prompt_gives_one_answer_per_prompt_from_legacy_top_logprobs(
        httpserver: HTTPServer):
    httpserver.expect_request("/v1/completions", method="POST", json={
        "model": "Qwen/Qwen3-Reranker-0.6B", "prompt": ["first", "second"], "max_tokens": 1,
        "logprobs": 3, "temperature": 0,
    }).respond_with_json(wire("vllm-v1-completions.json"))
    endpoint = Endpoint(httpserver.url_for("/").rstrip("/"), "openai-completions",
                        "Qwen/Qwen3-Reranker-0.6B")

    first, second = ask("next_token", endpoint, ["first", "second"], top_k=3)

    httpserver.check_assertions()
    assert first.top == (TokenChoice("yes", -0.02), TokenChoice("no", -3.9))
    assert [c.token for c in second.top] == ["no", "yes", "No"]  # best first
    # usage covers both prompts, so it is not any one prompt's count
    assert first.prompt_tokens is None and second.prompt_tokens is None


def test_llama_cpp_python_completion_keeps_the_leading_space_of_tokens(httpserver: HTTPServer):
    httpserver.expect_request("/v1/completions", method="POST").respond_with_json(
        wire("llama-cpp-python-v1-completions.json"))
    endpoint = Endpoint(httpserver.url_for("/").rstrip("/"), "openai-completions")

    [answer] = ask("next_token", endpoint, ["Relevant:"], top_k=2)

    assert tokens(answer) == {" yes": -0.84, " no": -1.02}
    assert answer.prompt_tokens == 52


def test_llama_cpp_v1_completions_reads_the_chat_shaped_logprobs(httpserver: HTTPServer):
    body = recorded("llamacpp-v1-completions.json")
    httpserver.expect_request("/v1/completions", method="POST").respond_with_json(body)
    endpoint = Endpoint(httpserver.url_for("/").rstrip("/"), "openai-completions",
                        "gemma-3-270m-q4_k_m.gguf")

    [answer] = ask("next_token", endpoint, ["two-shot prompt"], top_k=5)

    top = body["choices"][0]["logprobs"]["content"][0]["top_logprobs"]
    assert answer.top == tuple(TokenChoice(t["token"], t["logprob"], t["id"]) for t in top)
    assert answer.prompt_tokens == body["usage"]["prompt_tokens"]


def test_llama_cpp_chat_sends_real_messages_and_reads_the_first_token(httpserver: HTTPServer):
    exchange = wire("llamacpp-v1-chat-completions.json")["exchanges"][0]
    sent = exchange["request"]
    httpserver.expect_request("/v1/chat/completions", method="POST", json={
        "model": sent["model"], "messages": sent["messages"], "logprobs": True,
        "top_logprobs": 5, "max_tokens": 1, "temperature": 0,
    }).respond_with_json(exchange["response"])
    endpoint = Endpoint(httpserver.url_for("/").rstrip("/"), "llama.cpp", sent["model"])

    [answer] = ask("next_token_chat", endpoint, [sent["messages"]], top_k=5)

    httpserver.check_assertions()
    top = exchange["response"]["choices"][0]["logprobs"]["content"][0]["top_logprobs"]
    assert [c.token for c in answer.top] == [t["token"] for t in top]


def test_completions_without_logprobs_is_a_contract_error_naming_the_url(httpserver: HTTPServer):
    body = wire("llama-cpp-python-v1-completions.json")
    body["choices"][0]["logprobs"] = None  # what Ollama's /v1/completions does
    httpserver.expect_request("/v1/completions", method="POST").respond_with_json(body)
    base = httpserver.url_for("/").rstrip("/")

    with pytest.raises(ContractError, match="without top logprobs") as caught:
        ask("next_token", Endpoint(base, "openai-completions"), ["x"])

    assert f"{base}/v1/completions" in str(caught.value)
    assert caught.value.endpoint == base


def test_completions_with_fewer_choices_than_prompts_is_a_contract_error(httpserver: HTTPServer):
    httpserver.expect_request("/v1/completions", method="POST").respond_with_json(
        wire("llama-cpp-python-v1-completions.json"))
    endpoint = Endpoint(httpserver.url_for("/").rstrip("/"), "openai-completions")

    with pytest.raises(ContractError, match="1 choices for 3 prompts"):
        ask("next_token", endpoint, ["a", "b", "c"])


def test_a_chat_endpoint_refuses_raw_prompts_with_a_config_error():
    endpoint = Endpoint("http://127.0.0.1:9", "openai-chat")

    with pytest.raises(ConfigError, match="takes messages, not raw prompts"):
        ask("next_token", endpoint, ["x"])


# --- Ollama --------------------------------------------------------------------------------


def test_ollama_generate_is_asked_raw_without_streaming_once_per_prompt(httpserver: HTTPServer):
    for prompt in ("a", "b"):
        httpserver.expect_oneshot_request("/api/generate", method="POST", json={
            "model": "qwen3:0.6b", "prompt": prompt, "raw": True, "stream": False,
            "logprobs": True, "top_logprobs": 4,
            "options": {"num_predict": 1, "temperature": 0},
        }).respond_with_json(wire("ollama-api-generate.json"))
    endpoint = Endpoint(httpserver.url_for("/").rstrip("/"), "ollama", "qwen3:0.6b", slots=2)

    answers = ask("next_token", endpoint, ["a", "b"], top_k=4)

    httpserver.check_assertions()
    assert [tokens(a) for a in answers] == [{"yes": -0.02, "no": -3.9}] * 2
    assert answers[0].prompt_tokens == 40


def test_ollama_before_0_12_11_is_a_contract_error_saying_upgrade(httpserver: HTTPServer):
    httpserver.expect_request("/api/generate", method="POST").respond_with_json(
        wire("ollama-api-generate-before-0.12.11.json"))
    endpoint = Endpoint(httpserver.url_for("/").rstrip("/"), "ollama", "qwen3:0.6b")

    with pytest.raises(ContractError, match=r"before 0\.12\.11 .*upgrade"):
        ask("next_token", endpoint, ["a"])


def test_ollama_without_a_model_name_is_a_config_error():
    with pytest.raises(ConfigError, match="needs a model name"):
        ask("next_token", Endpoint("http://127.0.0.1:9", "ollama"), ["a"])


def test_ollama_chat_reads_the_chat_shaped_logprobs(httpserver: HTTPServer):
    messages = [{"role": "user", "content": "Is this relevant?"}]
    httpserver.expect_request("/v1/chat/completions", method="POST", json={
        "model": "qwen3:0.6b", "messages": messages, "logprobs": True, "top_logprobs": 2,
        "max_tokens": 1, "temperature": 0,
    }).respond_with_json(wire("ollama-v1-chat-completions.json"))
    endpoint = Endpoint(httpserver.url_for("/").rstrip("/"), "ollama", "qwen3:0.6b")

    [answer] = ask("next_token_chat", endpoint, [messages], top_k=2)

    httpserver.check_assertions()
    assert tokens(answer) == {"yes": -0.02, "no": -3.9}
    assert answer.prompt_tokens == 40


# --- concurrency and credentials -----------------------------------------------------------


def test_no_more_requests_are_in_flight_than_the_endpoint_has_slots():
    in_flight = peak = 0
    body = wire("ollama-api-generate.json")

    async def handler(request: httpx.Request) -> httpx.Response:
        nonlocal in_flight, peak
        in_flight += 1
        peak = max(peak, in_flight)
        await asyncio.sleep(0.01)
        in_flight -= 1
        return httpx.Response(200, json=body)

    async def main() -> list[NextToken]:
        http = httpx.AsyncClient(transport=httpx.MockTransport(handler))
        async with http, ModelClient(http=http) as client:
            endpoint = Endpoint("http://ollama.test", "ollama", "qwen3:0.6b", slots=2)
            return await client.next_token(endpoint, [str(i) for i in range(7)])

    answers = asyncio.run(main())

    assert len(answers) == 7
    assert peak == 2


def test_the_api_key_is_sent_as_a_bearer_token(httpserver: HTTPServer):
    httpserver.expect_request("/v1/completions", method="POST",
                              headers={"Authorization": "Bearer s3cret"}).respond_with_json(
        wire("llama-cpp-python-v1-completions.json"))
    endpoint = Endpoint(httpserver.url_for("/").rstrip("/"), "openai-completions",
                        api_key="s3cret")

    ask("next_token", endpoint, ["x"])

    httpserver.check_assertions()


def test_a_shared_http_client_is_left_open_for_its_owner():
    async def main() -> bool:
        http = httpx.AsyncClient()
        async with ModelClient(http=http):
            pass
        still_open = not http.is_closed
        await http.aclose()
        return still_open

    assert asyncio.run(main())


# --- faults --------------------------------------------------------------------------------


def test_a_refused_connection_is_transient_and_names_the_url():
    base = f"http://127.0.0.1:{free_port()}"

    with pytest.raises(TransientError, match="refused") as caught:
        ask("next_token", Endpoint(base, "llama.cpp"), ["x"])

    assert f"{base}/completion" in str(caught.value)
    assert caught.value.endpoint == base


def test_a_server_slower_than_the_timeout_is_transient(httpserver: HTTPServer):
    def slow(request: Request) -> Response:
        time.sleep(0.5)
        return Response(json.dumps(wire("old-llamacpp-completion.json")))

    httpserver.expect_request("/completion").respond_with_handler(slow)
    base = httpserver.url_for("/").rstrip("/")

    with pytest.raises(TransientError, match=r"did not answer within 0\.1 s") as caught:
        ask("next_token", Endpoint(base, "llama.cpp"), ["x"], timeout=0.1)

    assert base in str(caught.value)


def test_a_server_error_is_transient_and_quotes_the_server(httpserver: HTTPServer):
    httpserver.expect_request("/completion").respond_with_json(
        {"error": {"code": 500, "message": "llama_decode failed", "type": "server_error"}},
        status=500)
    base = httpserver.url_for("/").rstrip("/")

    with pytest.raises(TransientError, match="HTTP 500: llama_decode failed") as caught:
        ask("next_token", Endpoint(base, "llama.cpp"), ["x"])

    assert base in str(caught.value)


def test_a_server_still_loading_its_model_is_transient(httpserver: HTTPServer):
    httpserver.expect_request("/completion").respond_with_json(LOADING, status=503)
    base = httpserver.url_for("/").rstrip("/")

    with pytest.raises(TransientError, match="still loading its model") as caught:
        ask("next_token", Endpoint(base, "llama.cpp"), ["x"])

    assert base in str(caught.value)


def test_a_body_that_is_not_json_is_a_contract_error(httpserver: HTTPServer):
    httpserver.expect_request("/completion").respond_with_data(
        "<html>502 Bad Gateway</html>", content_type="text/html")
    base = httpserver.url_for("/").rstrip("/")

    with pytest.raises(ContractError, match="not JSON: <html>502 Bad Gateway</html>") as caught:
        ask("next_token", Endpoint(base, "llama.cpp"), ["x"])

    assert base in str(caught.value)


def test_json_without_completion_probabilities_is_a_contract_error(httpserver: HTTPServer):
    body = wire("old-llamacpp-completion.json")
    del body["completion_probabilities"]
    httpserver.expect_request("/completion").respond_with_json(body)
    base = httpserver.url_for("/").rstrip("/")

    with pytest.raises(ContractError, match="without completion_probabilities") as caught:
        ask("next_token", Endpoint(base, "llama.cpp"), ["x"])

    assert base in str(caught.value)


def test_a_rejected_request_is_a_contract_error_quoting_the_server(httpserver: HTTPServer):
    httpserver.expect_request("/completion").respond_with_json(
        {"error": {"code": 400, "message": "the request exceeds the available context size",
                   "type": "exceed_context_size_error"}}, status=400)
    base = httpserver.url_for("/").rstrip("/")

    with pytest.raises(ContractError, match="HTTP 400: the request exceeds the available"):
        ask("next_token", Endpoint(base, "llama.cpp"), ["x"])


def test_a_missing_key_is_a_contract_error_saying_to_set_the_api_key(httpserver: HTTPServer):
    httpserver.expect_request("/v1/completions").respond_with_json(
        {"error": {"code": 401, "message": "Invalid API Key", "type": "authentication_error"}},
        status=401)
    base = httpserver.url_for("/").rstrip("/")

    with pytest.raises(ContractError, match="Invalid API Key.*set the endpoint's api_key"):
        ask("next_token", Endpoint(base, "openai-completions"), ["x"])


def test_one_failing_conversation_fails_the_whole_batch(httpserver: HTTPServer):
    good = wire("ollama-v1-chat-completions.json")
    bad = dict(good, choices=[dict(good["choices"][0], logprobs=None)])
    httpserver.expect_oneshot_request("/v1/chat/completions", json={
        "messages": [{"role": "user", "content": "good"}], "logprobs": True,
        "top_logprobs": 20, "max_tokens": 1, "temperature": 0}).respond_with_json(good)
    httpserver.expect_oneshot_request("/v1/chat/completions").respond_with_json(bad)
    endpoint = Endpoint(httpserver.url_for("/").rstrip("/"), "openai-chat")
    conversations = [[{"role": "user", "content": "good"}], [{"role": "user", "content": "bad"}]]

    with pytest.raises(ContractError, match="without top logprobs"):
        ask("next_token_chat", endpoint, conversations)


# --- tokenize ------------------------------------------------------------------------------


def test_llama_cpp_tokenize_asks_without_special_tokens(httpserver: HTTPServer):
    httpserver.expect_request("/tokenize", method="POST", json={
        "content": " yes", "add_special": False,
    }).respond_with_json(recorded("llamacpp-tokenize.json", 0))
    endpoint = Endpoint(httpserver.url_for("/").rstrip("/"), "llama.cpp")

    assert ask("tokenize", endpoint, " yes") == [11262]
    httpserver.check_assertions()


def test_tokenize_reads_ids_from_pieces(httpserver: HTTPServer):
    with_pieces = recorded("llamacpp-tokenize.json", 1)  # [{"id": 11262, "piece": " yes"}]
    httpserver.expect_request("/tokenize").respond_with_json(with_pieces)
    endpoint = Endpoint(httpserver.url_for("/").rstrip("/"), "llama.cpp")

    assert ask("tokenize", endpoint, " yes") == [11262]


def test_vllm_tokenize_asks_without_special_tokens(httpserver: HTTPServer):
    httpserver.expect_request("/tokenize", method="POST", json={
        "model": "Qwen/Qwen3-Reranker-0.6B", "prompt": "yes", "add_special_tokens": False,
    }).respond_with_json(wire("vllm-tokenize.json"))
    endpoint = Endpoint(httpserver.url_for("/").rstrip("/"), "openai-completions",
                        "Qwen/Qwen3-Reranker-0.6B")

    assert ask("tokenize", endpoint, "yes") == [9693]
    httpserver.check_assertions()


def test_llama_cpp_python_tokenize_falls_back_to_extras_tokenize(httpserver: HTTPServer):
    httpserver.expect_request("/tokenize").respond_with_json({"detail": "Not Found"}, status=404)
    httpserver.expect_request("/extras/tokenize", json={"input": " yes"}).respond_with_json(
        wire("llama-cpp-python-extras-tokenize.json"))
    endpoint = Endpoint(httpserver.url_for("/").rstrip("/"), "openai-completions")

    assert ask("tokenize", endpoint, " yes") == [5081]


def test_an_openai_compatible_llama_cpp_is_tokenized_with_its_own_field_names(
        httpserver: HTTPServer):
    # llama.cpp ignores vLLM's "prompt" and answers an empty list; it reads "content".
    httpserver.expect_request("/tokenize", json={"content": " yes", "add_special": False}
                              ).respond_with_json({"tokens": [11262]})
    httpserver.expect_request("/tokenize").respond_with_json({"tokens": []})
    endpoint = Endpoint(httpserver.url_for("/").rstrip("/"), "openai-completions")

    assert ask("tokenize", endpoint, " yes") == [11262]


def test_tokenize_gives_none_when_the_server_has_no_tokenizer_endpoint(httpserver: HTTPServer):
    httpserver.expect_request("/tokenize").respond_with_data("Not Found", status=404)
    httpserver.expect_request("/extras/tokenize").respond_with_data("", status=405)
    endpoint = Endpoint(httpserver.url_for("/").rstrip("/"), "openai-completions")

    assert ask("tokenize", endpoint, "yes") is None


def test_ollama_has_no_tokenizer():
    assert ask("tokenize", Endpoint("http://127.0.0.1:9", "ollama", "qwen3:0.6b"), "yes") is None


def test_tokenize_on_a_server_that_is_down_is_transient():
    base = f"http://127.0.0.1:{free_port()}"

    with pytest.raises(TransientError, match="refused"):
        ask("tokenize", Endpoint(base, "llama.cpp"), "yes")
