"""`slm-rerank serve-api`: a Cohere/Jina-shaped POST /v1/rerank, called with a real client.

Most tests start the command as a real subprocess on a free port (never 8033-8040, the
ports queries scan) and call it with httpx; the model-backed ones, pointed at the real
llama-server, are in tests/live/servers/test_rerank_api.py. A judge that fails part-way
cannot be timed against a real server, so the partial-answer and concurrency tests run the
same server in-process with a fake judge.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
import slm_rerank_openai
from search_fixtures import free_port
from serve_api_fixtures import DOCS, KEY, QUERY, ApiServer, post

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
