"""`slm-rerank serve-api`: a Cohere/Jina-shaped POST /v1/rerank, called with a real client.

Most tests start the command as a real subprocess on a free port (never 8033-8040, the
ports queries scan) and call it with httpx; the model-backed ones point it at the real
llama-server. A judge that fails part-way cannot be timed against a real server, so the
partial-answer and concurrency tests run the same server in-process with a fake judge.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import slm_rerank_openai
from search_fixtures import free_port

import slm_rerank
from slm_rerank.config import Settings
from slm_rerank.documents import DocumentsResult, RankedDocument
from slm_rerank.errors import ConfigError, TransientError
from slm_rerank.host import Host
from slm_rerank.registrations import DocumentScore, Scorer, ScoreRequest
from slm_rerank.servers.api_key import read_api_key
from slm_rerank.servers.rerank_api import (
    DEGRADED_HEADER,
    RerankRequest,
    parse_size,
    shape_response,
)

CLI = Path(sys.executable).parent / "slm-rerank"
QUERY = "how do I rotate an API key?"
DOCS = ["To rotate an API key, open Settings > Security and press Rotate.",
        "Our office is closed on public holidays.",
        "API keys expire after 90 days unless rotated."]
KEY = "s3cret-key-for-tests"


@dataclasses.dataclass
class ApiServer:
    url: str
    process: subprocess.Popen[str]

    def stderr(self) -> str:
        self.process.terminate()
        return self.process.communicate(timeout=10)[1]


@pytest.fixture
def serve_api(tmp_path: Path) -> Iterator[Callable[..., ApiServer]]:
    """Start `slm-rerank serve-api ARGS` on a free port; every one is stopped at the end."""
    started: list[subprocess.Popen[str]] = []

    def start(*args: str, env: dict[str, str] | None = None) -> ApiServer:
        port = free_port()
        environ = {**os.environ, "SLM_RERANK_CACHE_DIR": str(tmp_path / "cache"),
                   "XDG_CONFIG_HOME": str(tmp_path / "config"), **(env or {})}
        environ.pop("SLM_ENDPOINT", None)
        process = subprocess.Popen([str(CLI), "serve-api", "--port", str(port), *args],
                                   cwd=tmp_path, env=environ, stdin=subprocess.DEVNULL,
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        started.append(process)
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if process.poll() is not None:
                pytest.fail(f"serve-api exited {process.returncode}: "
                            f"{process.communicate()[1]}")
            try:
                if httpx.get(url + "/health", timeout=2).status_code == 200:
                    return ApiServer(url, process)
            except httpx.TransportError:
                time.sleep(0.1)
        pytest.fail("serve-api did not answer /health within 60 s")

    try:
        yield start
    finally:
        for process in started:
            process.terminate()
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def post(server: ApiServer, body: Any, path: str = "/v1/rerank", **kwargs: Any
         ) -> httpx.Response:
    return httpx.post(server.url + path, json=body, timeout=300, **kwargs)


# --- against the real llama-server -------------------------------------------------------

def test_a_rerank_request_ranks_every_document_once_best_first(
        llama_server: Any, serve_api: Callable[..., ApiServer]) -> None:
    server = serve_api("-e", llama_server.base_url, "--no-cache")

    response = post(server, {"query": QUERY, "documents": [DOCS[0], DOCS[1], {"text": DOCS[2]}]})

    assert response.status_code == 200, response.text
    body = response.json()
    assert DEGRADED_HEADER not in response.headers and "degraded" not in body
    assert body["model"] == llama_server.model_id and body["id"]
    results = body["results"]
    assert sorted(r["index"] for r in results) == [0, 1, 2]
    scores = [r["relevance_score"] for r in results]
    assert all(0.0 <= s <= 1.0 for s in scores) and scores == sorted(scores, reverse=True)
    assert all("document" not in r for r in results)  # return_documents defaults to false


def test_top_n_keeps_the_best_and_return_documents_echoes_their_text(
        llama_server: Any, serve_api: Callable[..., ApiServer]) -> None:
    server = serve_api("-e", llama_server.base_url)  # score cache on: the second call hits it
    full = post(server, {"query": QUERY, "documents": DOCS}).json()["results"]

    response = post(server, {"query": QUERY, "documents": DOCS, "top_n": 2,
                             "return_documents": True, "max_tokens_per_doc": 512})

    assert response.status_code == 200, response.text
    body = response.json()
    assert [r["index"] for r in body["results"]] == [r["index"] for r in full[:2]]
    assert all(r["document"] == {"text": DOCS[r["index"]]} for r in body["results"])
    assert body["meta"]["warnings"] == ["field 'max_tokens_per_doc' is not used by this server"]


def test_the_request_langchain_and_llamaindex_clients_send_is_answered_in_their_shape(
        llama_server: Any, serve_api: Callable[..., ApiServer], tmp_path: Path) -> None:
    """The bodies and headers two documented client libraries send, reproduced as sent.

    LangChain's ``CohereRerank`` (langchain-ai/langchain-cohere,
    libs/cohere/langchain_cohere/rerank.py) builds ``cohere.ClientV2(key, client_name=
    "langchain:partner", base_url=...)`` and calls ``client.rerank(query=, documents=[str],
    model=, top_n=, max_tokens_per_doc=None)``; Cohere's v2 OpenAPI spec: ``POST
    /v2/rerank``, ``Authorization: Bearer <token>``, ``X-Client-Name``, body ``model``,
    ``query``, ``documents`` (strings), ``top_n``, ``max_tokens_per_doc``; results
    ``{index, relevance_score}``, which LangChain reads back by key.

    LlamaIndex's ``JinaRerank`` (run-llama/llama_index, llama-index-postprocessor-jinaai-
    rerank, base.py) posts ``{"query", "documents", "model", "top_n"}`` with
    ``Authorization: Bearer`` and ``Accept-Encoding: identity`` to ``/v1/rerank``, reads
    ``results[i]["index"]`` and ``["relevance_score"]``, and raises ``resp["detail"]`` when
    there are no results.
    """
    key_file = tmp_path / "key"
    key_file.write_text(KEY + "\n")
    server = serve_api("-e", llama_server.base_url, "--api-key-file", str(key_file))

    langchain = post(server, {"model": "rerank-english-v3.0", "query": QUERY,
                              "documents": DOCS, "top_n": 3}, path="/v2/rerank",
                     headers={"Authorization": f"Bearer {KEY}",
                              "X-Client-Name": "langchain:partner"})
    llamaindex = post(server, {"query": QUERY, "documents": DOCS,
                               "model": "jina-reranker-v1-base-en", "top_n": 2},
                      headers={"Authorization": f"Bearer {KEY}",
                               "Accept-Encoding": "identity"})
    refused = post(server, {"query": QUERY, "documents": DOCS, "top_n": 2},
                   headers={"Authorization": "Bearer wrong", "Accept-Encoding": "identity"})

    assert langchain.status_code == 200, langchain.text
    as_langchain_reads_it = [{"index": r["index"], "relevance_score": r["relevance_score"]}
                             for r in langchain.json()["results"]]
    assert sorted(r["index"] for r in as_langchain_reads_it) == [0, 1, 2]
    assert llamaindex.status_code == 200, llamaindex.text
    nodes = [(DOCS[r["index"]], r["relevance_score"]) for r in llamaindex.json()["results"]]
    assert len(nodes) == 2
    assert refused.status_code == 401
    assert "API key" in refused.json()["detail"]  # what JinaRerank would raise with


def test_a_killed_model_server_is_a_503_naming_it_and_the_api_keeps_serving(
        llama_server_factory: Callable[..., Any], serve_api: Callable[..., ApiServer]) -> None:
    model = llama_server_factory(slots=1, ctx_per_slot=1024)
    server = serve_api("-e", model.base_url, "--no-cache", "--timeout", "20")
    model.kill()

    first = post(server, {"query": QUERY, "documents": DOCS})
    again = post(server, {"query": QUERY, "documents": DOCS})

    for response in (first, again):
        assert response.status_code == 503, response.text
        assert response.json()["type"] == "model_unavailable"
        assert "judged" in response.json()["message"]
    assert model.base_url in again.json()["message"]  # found again: it does not answer
    assert httpx.get(server.url + "/health").json() == {"status": "ok"}


# --- errors: no model call needed ----------------------------------------------------------

@pytest.fixture
def strict_server(serve_api: Callable[..., ApiServer]) -> ApiServer:
    # a pinned URL nobody listens on: every error below is answered before judging
    return serve_api("-e", f"http://127.0.0.1:{free_port()}", "--max-documents", "3",
                     "--max-bytes", "2K", "--api-key-env", "TEST_RERANK_KEY",
                     env={"TEST_RERANK_KEY": KEY})


AUTH = {"Authorization": f"Bearer {KEY}"}
BAD_BODIES = [
    ({"documents": DOCS}, "'query'"),
    ({"query": "  ", "documents": DOCS}, "'query'"),
    ({"query": QUERY}, "'documents'"),
    ({"query": QUERY, "documents": []}, "'documents'"),
    ({"query": QUERY, "documents": "one string"}, "'documents'"),
    ({"query": QUERY, "documents": ["a", 7]}, "documents[1]"),
    ({"query": QUERY, "documents": [{"title": "no text"}]}, "documents[0]"),
    ({"query": QUERY, "documents": DOCS, "top_n": 0}, "'top_n'"),
    ({"query": QUERY, "documents": DOCS, "top_n": "2"}, "'top_n'"),
    ({"query": QUERY, "documents": DOCS, "top_n": True}, "'top_n'"),
    ({"query": QUERY, "documents": DOCS, "return_documents": "yes"}, "'return_documents'"),
    ({"query": QUERY, "documents": DOCS, "model": 3}, "'model'"),
    (["a", "list"], "JSON object"),
]


@pytest.mark.parametrize(("body", "named"), BAD_BODIES, ids=[b[1] for b in BAD_BODIES])
def test_a_malformed_request_is_a_400_naming_the_field(
        strict_server: ApiServer, body: Any, named: str) -> None:
    response = post(strict_server, body, headers=AUTH)

    assert response.status_code == 400
    assert named in response.json()["message"]
    assert response.json()["detail"] == response.json()["message"]


def test_each_http_level_fault_has_its_own_status_and_a_json_body(
        strict_server: ApiServer) -> None:
    url = strict_server.url
    cases = {
        "bad JSON": (400, lambda: httpx.post(url + "/v1/rerank", content=b"{nope",
                                             headers={**AUTH, "Content-Type":
                                                      "application/json"})),
        "NaN": (400, lambda: httpx.post(url + "/v1/rerank", content=b'{"query": NaN}',
                                        headers={**AUTH, "Content-Type": "application/json"})),
        "no key": (401, lambda: post(strict_server, {"query": QUERY, "documents": DOCS})),
        "wrong key": (401, lambda: post(strict_server, {"query": QUERY, "documents": DOCS},
                                        headers={"Authorization": f"Bearer {KEY}x"})),
        "unknown path": (404, lambda: httpx.post(url + "/v1/embeddings", json={})),
        "GET rerank": (405, lambda: httpx.get(url + "/v1/rerank")),
        "POST health": (405, lambda: httpx.post(url + "/health", json={})),
        "form body": (415, lambda: httpx.post(url + "/v1/rerank", headers=AUTH,
                                              data={"query": QUERY})),
        "too many bytes": (413, lambda: post(strict_server, {"query": "q" * 3000,
                                                             "documents": DOCS}, headers=AUTH)),
        "too many documents": (413, lambda: post(strict_server, {"query": QUERY,
                                                                 "documents": DOCS * 2},
                                                 headers=AUTH)),
    }
    for name, (status, call) in cases.items():
        response = call()
        assert response.status_code == status, (name, response.text)
        assert response.headers["Content-Type"] == "application/json", name
        assert response.json()["message"], name
    assert "Allow" in httpx.get(url + "/v1/rerank").headers
    assert httpx.get(url + "/health").status_code == 200  # no key needed to monitor it


def test_an_api_key_is_read_from_an_environment_variable_or_a_file_never_empty(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RERANK_KEY", " k1 \n")
    key_file = tmp_path / "key"
    key_file.write_text("k2\n")
    (tmp_path / "empty").write_text("\n")

    assert read_api_key("RERANK_KEY", None) == "k1"
    assert read_api_key(None, key_file) == "k2"
    assert read_api_key(None, None) is None
    for env_name, path, named in [("UNSET_RERANK_KEY", None, "UNSET_RERANK_KEY"),
                                  (None, tmp_path / "empty", "empty"),
                                  (None, tmp_path / "missing", "missing"),
                                  ("RERANK_KEY", key_file, "both")]:
        with pytest.raises(ConfigError, match=named):
            read_api_key(env_name, path)


def test_sizes_take_k_and_m_suffixes() -> None:
    assert [parse_size(t) for t in ("5MB", "2K", "100", "1m")] == [5_000_000, 2000, 100,
                                                                    1_000_000]
    with pytest.raises(ValueError, match="not a size"):
        parse_size("five")


# --- partial judgements and parallel requests (in-process, a fake judge) -----------------

class KeywordJudge:
    """P(relevant) from how often a document says "rotate"; "flaky" fails as a server."""

    @staticmethod
    @slm_rerank.hookimpl
    def register_scorers(register: Callable[[Scorer], None]) -> None:
        async def score(request: ScoreRequest) -> AsyncIterator[DocumentScore]:
            for i, document in enumerate(request.documents):
                await asyncio.sleep(0.02)  # let parallel requests interleave on the loop
                if "flaky" in document.text:
                    raise TransientError("the judge's server went away", "http://judge")
                hits = document.text.lower().count("rotate")
                yield DocumentScore(i, min(0.2 + 0.3 * hits, 1.0), raw=float(hits))

        register(Scorer("keywords", "counts a word", score, needs_endpoint=False))


@pytest.fixture
def fake_api(in_process_api: Callable[..., tuple[str, int]]) -> Callable[..., str]:
    """serve-api in this process with the keyword judge; ``start(**options)`` -> its URL."""
    def start(**options: Any) -> str:
        settings = dataclasses.replace(Settings(), scorer="keywords", score_cache=False)
        host = Host.with_plugins(settings, KeywordJudge, slm_rerank_openai)
        return in_process_api(host, **options)[0]

    return start


def test_a_partial_judgement_is_marked_and_keeps_the_unjudged_in_input_order_below(
        fake_api: Callable[..., str]) -> None:
    url = fake_api()
    docs = ["rotate it", "flaky mirror", "rotate rotate", "billing"]

    response = httpx.post(url + "/v1/rerank", json={"query": "rotate", "documents": docs})

    assert response.status_code == 200, response.text
    body = response.json()
    assert response.headers[DEGRADED_HEADER] == "1/4 judged"
    assert body["degraded"]["unjudged_indices"] == [1, 2, 3]
    assert "went away" in body["degraded"]["reason"]
    assert body["meta"]["warnings"][0].startswith("degraded: 1 of 4 documents were judged")
    results = body["results"]
    assert [r["index"] for r in results] == [0, 1, 2, 3]
    assert "judged" not in results[0] and all(r["judged"] is False for r in results[1:])
    scores = [r["relevance_score"] for r in results]
    assert scores == sorted(scores, reverse=True) and len(set(scores)) == 4
    assert scores[1] < scores[0] and scores[-1] > 0


def test_with_no_partial_a_partial_judgement_is_a_503(fake_api: Callable[..., str]) -> None:
    url = fake_api(no_partial=True)

    response = httpx.post(url + "/v1/rerank",
                          json={"query": "rotate", "documents": ["rotate", "flaky"]})

    assert response.status_code == 503
    assert response.json()["message"].startswith("1 of 2 documents were not judged")


def test_parallel_requests_each_get_the_ranking_of_their_own_documents(
        fake_api: Callable[..., str]) -> None:
    url = fake_api(parallel=2)
    asks = [[f"doc {n}", "rotate " * (n % 3), f"rotate rotate {n}"] for n in range(6)]

    async def ask_all() -> list[httpx.Response]:
        async with httpx.AsyncClient(timeout=60) as client:
            return await asyncio.gather(*[
                client.post(url + "/v1/rerank", json={"query": "rotate", "documents": docs,
                                                      "return_documents": True})
                for docs in asks])

    responses = asyncio.run(ask_all())

    for docs, response in zip(asks, responses, strict=True):
        assert response.status_code == 200, response.text
        results = response.json()["results"]
        assert [r["document"]["text"] for r in results] == sorted(
            docs, key=lambda d: (-min(0.2 + 0.3 * d.count("rotate"), 1.0), docs.index(d)))


def test_a_result_with_no_verdict_at_all_is_refused_not_passed_off_as_a_ranking() -> None:
    result = DocumentsResult([RankedDocument("a", "0", 0, 1, None, None, "yesno"),
                              RankedDocument("b", "1", 1, 2, None, None, "yesno")],
                             degraded="the model server http://x did not answer")

    with pytest.raises(Exception, match="no document was judged: the model server") as caught:
        shape_response(RerankRequest("q", ["a", "b"]), result)

    assert getattr(caught.value, "status", None) == 503


def test_an_error_answered_before_the_body_is_read_does_not_poison_the_next_request(
        fake_api: Callable[..., str]) -> None:
    url = fake_api()

    with httpx.Client(timeout=10) as client:  # one keep-alive connection, if allowed
        missed = client.post(url + "/v1/embeddings", json={"input": "x" * 5000})
        health = client.get(url + "/health")

    assert missed.status_code == 404
    assert health.status_code == 200 and health.json() == {"status": "ok"}
