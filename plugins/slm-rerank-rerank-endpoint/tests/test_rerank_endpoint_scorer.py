"""The rerank-endpoint scorer: contract, each API's payload, the score rule, the pool, faults.

Payloads live in tests/fixtures: the llama.cpp ones recorded from the real llama-server
built here (``recorded_from`` in each file), the vLLM, Cohere and Jina ones written from
their documentation (``documented_at`` in each file names the pages). They are served by
pytest-httpserver to the real ``ModelClient``, so the whole path from request to verdict
is exercised.
"""

from __future__ import annotations

import asyncio
import json
import math
import socket
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
import slm_rerank_rerank_endpoint
from pytest_httpserver import HTTPServer
from slm_rerank_rerank_endpoint import RERANK_ENDPOINT
from slm_rerank_rerank_endpoint.wire import choose_api
from werkzeug import Request, Response

from slm_rerank.errors import ConfigError, ContractError
from slm_rerank.plugin_kit import ModelClient, sigmoid
from slm_rerank.registrations import Document, Endpoint, ScoreRequest
from slm_rerank.testing import ScoreOutcome, ScorerContract, collect

FIXTURES = Path(__file__).resolve().parent / "fixtures"
QUERY = "where are retries configured"
DOCS = ["def retry(): ...", "colour = 1", "RETRIES = 3  # how often a request is retried"]


def fixture(name: str) -> dict[str, Any]:
    return json.loads((FIXTURES / name).read_text(encoding="utf-8"))


def base(httpserver: HTTPServer) -> str:
    return httpserver.url_for("/").rstrip("/")


def judge(endpoint: Endpoint, documents: Sequence[str] = DOCS,
          options: Mapping[str, Any] | None = None, timeout: float = 5.0) -> ScoreOutcome:
    """Run the scorer as the host does (``collect``), with a real client."""
    async def main() -> ScoreOutcome:
        async with ModelClient(timeout=timeout) as client:
            request = ScoreRequest(QUERY, [Document.of(str(i), t) for i, t in
                                           enumerate(documents)],
                                   endpoint=endpoint, options=options or {}, client=client)
            return await collect(RERANK_ENDPOINT, request)
    return asyncio.run(main())


def serve(httpserver: HTTPServer, name: str) -> dict[str, Any]:
    """Answer the fixture's request path with its response; the fixture."""
    recorded = fixture(name)
    httpserver.expect_request(recorded["request"]["path"], method="POST").respond_with_json(
        recorded["response"]["body"], status=recorded["response"]["status"])
    return recorded


def sent_body(httpserver: HTTPServer) -> dict[str, Any]:
    [(request, _)] = httpserver.log
    return json.loads(request.get_data())


def probabilities(outcome: ScoreOutcome) -> list[float]:
    return [outcome.scores[i].probability for i in sorted(outcome.scores)]


# --- the shared contract ----------------------------------------------------------------------


class CountingClient:
    """A stand-in rerank server: the score of a document is how often it says "retr"."""

    async def post_json(self, endpoint: Endpoint, path: str, body: Mapping[str, Any]) -> Any:
        return {"results": [{"index": i, "relevance_score": doc.count("retr") - 0.5}
                            for i, doc in enumerate(body["documents"])]}


class TestRerankEndpointContract(ScorerContract):
    plugin = slm_rerank_rerank_endpoint
    distribution = "slm-rerank-rerank-endpoint"
    names = {"rerank-endpoint"}

    endpoint, make_client = Endpoint("http://127.0.0.1:8033"), CountingClient


def test_it_asks_for_every_document_in_one_request_and_is_never_cached():
    # per_document=False: the host sends the whole head in one request to one server
    assert RERANK_ENDPOINT.per_document is False and RERANK_ENDPOINT.needs_endpoint


# --- each API's payload -----------------------------------------------------------------------


def test_llama_cpp_logits_recorded_from_a_real_server_are_squashed_by_index(
        httpserver: HTTPServer):
    """A real llama-server (--reranking --embedding --pooling rank) answers raw scores,
    best first rather than in document order."""
    recorded = serve(httpserver, "llamacpp-rerank-pooling-rank.json")
    raw = {r["index"]: r["relevance_score"] for r in recorded["response"]["body"]["results"]}

    outcome = judge(Endpoint(base(httpserver), "llama.cpp", "gemma-3-270m-q4_k_m.gguf"))

    assert outcome.stopped is None
    assert sent_body(httpserver) == recorded["request"]["body"]  # model id, query, documents
    for i in range(3):
        assert outcome.scores[i].raw == raw[i]
        assert outcome.scores[i].probability == pytest.approx(sigmoid(raw[i]))
        assert outcome.scores[i].note == "a logit, squashed with a sigmoid"


def test_vllm_rerank_probabilities_are_kept_as_they_are(httpserver: HTTPServer):
    """vLLM /v1/rerank as documented (results carry the document's text)."""
    recorded = serve(httpserver, "vllm-rerank-documented.json")

    outcome = judge(Endpoint(base(httpserver), "openai-completions", "BAAI/bge-reranker-v2-m3"),
                    options={"api": "vllm-rerank"})

    assert sent_body(httpserver) == recorded["request"]["body"]
    assert probabilities(outcome) == [0.4187, 0.0009, 0.9213]
    assert all(v.note is None for v in outcome.scores.values())


def test_vllm_score_sends_text_pairs_and_reads_data(httpserver: HTTPServer):
    """vLLM /score as documented: text_1 is the query, text_2 the documents."""
    recorded = serve(httpserver, "vllm-score-documented.json")

    outcome = judge(Endpoint(base(httpserver), "openai-completions", "BAAI/bge-reranker-v2-m3"),
                    options={"api": "vllm-score"})

    assert sent_body(httpserver) == recorded["request"]["body"]
    assert probabilities(outcome) == [0.4187, 0.0009, 0.9213]


def test_cohere_v2_gets_its_default_model_and_the_api_key(httpserver: HTTPServer):
    """Cohere /v2/rerank as documented; the model the endpoint reports is not a rerank
    model of Cohere's, so the documented default is asked."""
    recorded = fixture("cohere-v2-rerank-documented.json")
    httpserver.expect_request("/v2/rerank", headers={"Authorization": "Bearer k3y"}
                              ).respond_with_json(recorded["response"]["body"])

    outcome = judge(Endpoint(base(httpserver), "openai-completions", "command-r",
                             api_key="k3y"), options={"api": "cohere"})

    assert sent_body(httpserver) == recorded["request"]["body"]
    assert probabilities(outcome) == [0.7867691, 0.0000134, 0.9990564]


def test_jina_asks_without_echoed_documents_and_honours_the_model_option(
        httpserver: HTTPServer):
    """Jina /v1/rerank as documented; return_documents false keeps the answer small."""
    recorded = serve(httpserver, "jina-rerank-documented.json")

    outcome = judge(Endpoint(base(httpserver), "openai-completions", None),
                    options={"api": "jina", "model": "jina-reranker-v2-base-multilingual"})

    assert sent_body(httpserver) == recorded["request"]["body"]
    assert outcome.scores[2].probability == pytest.approx(0.8783142566680908)


def test_the_path_option_replaces_the_apis_own(httpserver: HTTPServer):
    recorded = fixture("vllm-rerank-documented.json")
    httpserver.expect_request("/v2/rerank").respond_with_json(recorded["response"]["body"])

    outcome = judge(Endpoint(base(httpserver)), options={"path": "/v2/rerank"})

    assert len(outcome.scores) == 3


@pytest.mark.parametrize(("url", "api", "path"), [
    ("https://api.jina.ai", "jina", "/v1/rerank"),
    ("https://api.cohere.com", "cohere", "/v2/rerank"),
    ("http://127.0.0.1:8033", "auto", "/v1/rerank"),
])
def test_auto_knows_the_hosted_apis_by_their_host(url: str, api: str, path: str):
    chosen = choose_api("auto", url)

    assert (chosen.name, chosen.path) == (api, path)


# --- the score rule ---------------------------------------------------------------------------


def answering(httpserver: HTTPServer, scores: Sequence[float]) -> Endpoint:
    httpserver.expect_request("/v1/rerank").respond_with_json(
        {"results": [{"index": i, "relevance_score": s} for i, s in enumerate(scores)]})
    return Endpoint(base(httpserver))


def test_one_score_outside_0_1_makes_the_whole_answer_logits(httpserver: HTTPServer):
    outcome = judge(answering(httpserver, [0.2, 1.7, -0.4]))

    assert probabilities(outcome) == [sigmoid(0.2), sigmoid(1.7), sigmoid(-0.4)]


def test_scores_logits_squashes_even_scores_inside_0_1(httpserver: HTTPServer):
    outcome = judge(answering(httpserver, [0.2, 0.9, 0.5]), options={"scores": "logits"})

    assert probabilities(outcome) == [sigmoid(0.2), sigmoid(0.9), sigmoid(0.5)]


def test_scores_probabilities_refuses_a_score_outside_0_1(httpserver: HTTPServer):
    with pytest.raises(ContractError, match=r"gave the score 4\.2.*scores = \"probabilities\""):
        judge(answering(httpserver, [0.2, 4.2, 0.5]), options={"scores": "probabilities"})


# --- the pool ---------------------------------------------------------------------------------


def test_documents_beyond_the_pool_are_not_sent_and_rank_below_the_lowest_sent(
        httpserver: HTTPServer):
    endpoint = answering(httpserver, [0.8, 0.3])

    outcome = judge(endpoint, documents=[*DOCS, "RETRY = True"], options={"pool": 2})

    assert sent_body(httpserver)["documents"] == DOCS[:2]
    assert outcome.stopped is None and sorted(outcome.scores) == [0, 1, 2, 3]
    for i in (2, 3):
        assert 0.0 < outcome.scores[i].probability < 0.3
        assert outcome.scores[i].raw is None
        assert outcome.scores[i].note == "not sent: beyond the pool of 2"


def test_a_sent_score_of_zero_still_leaves_room_below_it(httpserver: HTTPServer):
    outcome = judge(answering(httpserver, [0.0, 0.6]), documents=DOCS, options={"pool": 2})

    lowest_sent = min(outcome.scores[0].probability, outcome.scores[1].probability)
    assert 0.0 < outcome.scores[2].probability < lowest_sent


# --- answers that break the contract ----------------------------------------------------------

BROKEN = {
    "fewer results than documents": (
        '{"results": [{"index": 0, "relevance_score": 0.1}, '
        '{"index": 1, "relevance_score": 0.2}]}',
        r"2 results for 3 documents sent \(no score for 2\)"),
    "a duplicate index although the count matches": (
        '{"results": [{"index": 0, "relevance_score": 0.1}, {"index": 0, "relevance_score": 0.2},'
        ' {"index": 2, "relevance_score": 0.3}]}', "document 0 is scored twice"),
    "a duplicate index although every document is covered": (
        '{"results": [{"index": 0, "relevance_score": 0.1}, {"index": 1, "relevance_score": 0.2},'
        ' {"index": 2, "relevance_score": 0.3}, {"index": 2, "relevance_score": 0.3}]}',
        "document 2 is scored twice"),
    "an index out of range": (
        '{"results": [{"index": 0, "relevance_score": 0.1}, {"index": 1, "relevance_score": 0.2},'
        ' {"index": 3, "relevance_score": 0.3}]}', r"names document 3, but 3 were sent"),
    "a negative index": (
        '{"results": [{"index": -1, "relevance_score": 0.1}]}', "names document -1"),
    "an index that is not an integer": (
        '{"results": [{"index": "0", "relevance_score": 0.1}]}', "no integer 'index'"),
    "an index that is a boolean": (
        '{"results": [{"index": true, "relevance_score": 0.1}]}', "no integer 'index'"),
    "a result without an index": (
        '{"results": [{"relevance_score": 0.1}]}', "no integer 'index'"),
    "a score that is NaN": (
        '{"results": [{"index": 0, "relevance_score": NaN}]}', "the score nan"),
    "a score that is infinite": (
        '{"results": [{"index": 0, "relevance_score": Infinity}]}', "the score inf"),
    "a score that is a string": (
        '{"results": [{"index": 0, "relevance_score": "0.9"}]}', "no numeric 'relevance_score'"),
    "a score that is null": (
        '{"results": [{"index": 0, "relevance_score": null}]}', "no numeric 'relevance_score'"),
    "a result without a score": (
        '{"results": [{"index": 0}]}', "no numeric 'relevance_score'"),
    "no results key": ('{"data": [{"index": 0, "score": 0.5}]}', "without a 'results' list"),
    "results that are not a list": ('{"results": {"0": 0.5}}', "without a 'results' list"),
    "a bare list (the TEI shape)": ('[{"index": 0, "score": 0.5}]', "without a 'results' list"),
    "a body that is not JSON": ("<html><body>Bad gateway</body></html>", "not JSON"),
}


@pytest.mark.parametrize(("body", "says"), BROKEN.values(), ids=BROKEN.keys())
def test_a_broken_answer_is_a_one_line_contract_error_naming_the_endpoint(
        httpserver: HTTPServer, body: str, says: str):
    httpserver.expect_request("/v1/rerank").respond_with_data(
        body, content_type="application/json")

    with pytest.raises(ContractError, match=says) as caught:
        judge(Endpoint(base(httpserver)))

    assert f"{base(httpserver)}/v1/rerank" in str(caught.value)
    assert "\n" not in str(caught.value)


def test_a_llama_server_without_reranking_says_what_it_needs(httpserver: HTTPServer):
    """The 501 a real llama-server started without --reranking answers."""
    serve(httpserver, "llamacpp-rerank-not-enabled.json")

    with pytest.raises(ContractError) as caught:
        judge(Endpoint(base(httpserver), "llama.cpp", "gemma-3-270m-q4_k_m.gguf"))

    said = str(caught.value)
    assert "HTTP 501" in said and "reranker model" in said
    assert "--reranking --embedding --pooling rank" in said


def test_a_hosted_api_refusing_the_model_says_to_check_model_and_key(httpserver: HTTPServer):
    httpserver.expect_request("/v1/rerank").respond_with_json(
        {"detail": "model 'x' is not a reranker"}, status=422)

    with pytest.raises(ContractError, match="HTTP 422.*model.*SLM_API_KEY"):
        judge(Endpoint(base(httpserver)), options={"api": "jina", "model": "x"})


# --- faults that pass -------------------------------------------------------------------------


def test_a_server_error_degrades_without_verdicts(httpserver: HTTPServer):
    httpserver.expect_request("/v1/rerank").respond_with_json(
        {"error": {"code": 500, "message": "llama_decode failed"}}, status=500)

    outcome = judge(Endpoint(base(httpserver)))

    assert outcome.fault == "transient" and outcome.scores == {}
    assert "HTTP 500" in (outcome.stopped or "")


def test_a_refused_connection_degrades():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]

    outcome = judge(Endpoint(f"http://127.0.0.1:{port}"))

    assert outcome.fault == "transient" and "refused" in (outcome.stopped or "")


def test_a_timeout_degrades(httpserver: HTTPServer):
    def slow(request: Request) -> Response:
        time.sleep(0.5)
        return Response('{"results": []}')

    httpserver.expect_request("/v1/rerank").respond_with_handler(slow)

    outcome = judge(Endpoint(base(httpserver)), timeout=0.1)

    assert outcome.fault == "transient" and "did not answer" in (outcome.stopped or "")


# --- settings ---------------------------------------------------------------------------------


@pytest.mark.parametrize(("options", "says"), [
    ({"api": "tei"}, "key 'api' must be one of"),
    ({"scores": "raw"}, "key 'scores' must be one of"),
    ({"pool": 0}, "key 'pool' must be an integer of at least 1"),
    ({"path": "v1/rerank"}, "key 'path' must start with '/'"),
])
def test_a_bad_setting_is_a_config_error_naming_the_key(httpserver: HTTPServer,
                                                        options: dict[str, Any], says: str):
    endpoint = answering(httpserver, [0.1, 0.2, 0.3])

    with pytest.raises(ConfigError, match=says):
        judge(endpoint, options=options)


def test_no_documents_means_no_request(httpserver: HTTPServer):
    outcome = judge(Endpoint(base(httpserver)), documents=[])

    assert outcome.scores == {} and httpserver.log == []


def test_probabilities_are_finite_in_0_1_for_extreme_logits(httpserver: HTTPServer):
    outcome = judge(answering(httpserver, [-1e6, 1e6, 0.0]))  # llama.cpp: -1e6 = no embedding

    assert all(math.isfinite(p) and 0.0 <= p <= 1.0 for p in probabilities(outcome))


def test_identical_texts_are_sent_once_and_share_one_score(httpserver: HTTPServer):
    endpoint = answering(httpserver, [0.9, 0.1])

    outcome = judge(endpoint, ["def retry(): ...", "colour = 'red'", "def retry(): ..."])

    assert sent_body(httpserver)["documents"] == ["def retry(): ...", "colour = 'red'"]
    assert probabilities(outcome) == [0.9, 0.1, 0.9]
