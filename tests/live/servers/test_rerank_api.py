"""`slm-rerank serve-api` pointed at the real llama-server, called with httpx as a client
would: rankings, the shapes LangChain and LlamaIndex send, a model server killed mid-run."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
from serve_api_fixtures import DOCS, KEY, QUERY, ApiServer, post

from slm_rerank.servers.rerank_api import DEGRADED_HEADER


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
