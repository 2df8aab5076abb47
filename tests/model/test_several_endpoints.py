"""One query's chunks spread over several servers of one model, and what happens when one fails.

The dispatcher (``scoring.spread``) is specified first with a scorer that needs no server;
then fakes of vLLM answer with its documented payloads; two real llama-servers, one
killed mid-run, are in tests/live/model/test_several_endpoints.py.

The vLLM payloads: ``tests/fixtures/wire/vllm-v1-models.json``, ``vllm-tokenize.json`` and
``vllm-v1-completions.json`` (WIRE.md). A ``prompt`` list gets one choice per prompt, in
order, each with its ``index``, and ``logprobs`` in the legacy OpenAI shape:
``text_offset``, ``token_logprobs``, ``tokens``, ``top_logprobs`` (a list of ``{token:
logprob}`` with K or K+1 keys) — vLLM's ``CompletionLogProbs`` and
``CompletionResponseChoice`` in ``vllm/entrypoints/openai/protocol.py``, and its tests
``tests/entrypoints/openai/completion/test_completion.py`` (``test_prompt_logprobs_completion``
sends a two-prompt list and reads ``choices[0]`` and ``choices[1]``; ``test_some_logprobs``
checks ``5 <= len(top_logprobs[0]) <= 6`` for ``logprobs=5``).
"""

from __future__ import annotations

import asyncio
import copy
import dataclasses
import json
import threading
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
import slm_rerank_openai
from model_helpers import PASSAGES, judged
from pytest_httpserver import HTTPServer
from werkzeug import Request, Response

import slm_rerank
from slm_rerank.config import Settings
from slm_rerank.errors import ContractError, TransientError
from slm_rerank.host import Host
from slm_rerank.model.scoring import spread
from slm_rerank.model.session import ModelSession
from slm_rerank.model.stage import judge
from slm_rerank.registrations import (
    Document,
    DocumentScore,
    Endpoint,
    Scorer,
    ScoreRequest,
)

WIRE = Path(__file__).resolve().parent.parent / "fixtures" / "wire"


def wire(name: str) -> Any:
    return copy.deepcopy(json.loads((WIRE / name).read_text(encoding="utf-8")))


# --- the dispatcher, with a scorer that needs no server -------------------------------------


class Bench:
    """A scorer whose answers take a moment; it counts what each server has in flight."""

    def __init__(self, fail: dict[str, int] | None = None, delay: float = 0.01) -> None:
        #: url -> the batch (counted from 1) at which that server fails, transiently
        self.fail = fail or {}
        self.delay = delay
        self.in_flight: dict[str, int] = {}
        self.most: dict[str, int] = {}
        self.batches: list[tuple[str, list[str]]] = []

    async def score(self, request: ScoreRequest) -> AsyncIterator[DocumentScore]:
        assert request.endpoint is not None
        url = request.endpoint.base_url
        self.batches.append((url, [d.id for d in request.documents]))
        self.in_flight[url] = self.in_flight.get(url, 0) + len(request.documents)
        self.most[url] = max(self.most.get(url, 0), self.in_flight[url])
        try:
            await asyncio.sleep(self.delay)
            nth = sum(1 for u, _ in self.batches if u == url)
            for i, _ in enumerate(request.documents):
                if nth >= self.fail.get(url, 10**9) and i == 1:
                    raise TransientError(f"model server {url} failed with HTTP 503: boom", url)
                yield DocumentScore(i, 0.5)
        finally:
            self.in_flight[url] -= len(request.documents)

    def scorer(self) -> Scorer:
        return Scorer(name="bench", description="test", score=self.score)


def documents(n: int) -> list[Document]:
    return [Document.of(str(i), f"chunk {i}") for i in range(n)]


def run_spread(bench: Bench, endpoints: list[Endpoint], n: int) -> Any:
    request = ScoreRequest(query="q", documents=documents(n))
    return asyncio.run(spread(bench.scorer(), request, endpoints))


def test_no_server_has_more_documents_in_flight_than_its_slots() -> None:
    bench = Bench()
    endpoints = [Endpoint("http://a", slots=3), Endpoint("http://b", slots=1),
                 Endpoint("http://c", slots=2)]

    outcome = run_spread(bench, endpoints, 40)

    assert sorted(outcome.scores) == list(range(40)) and outcome.stopped is None
    assert all(bench.most[e.base_url] <= e.slots for e in endpoints)
    assert sum(u.scored for u in outcome.uses) == 40
    assert all(u.scored > 0 for u in outcome.uses)


def test_the_next_batch_goes_to_the_server_with_the_most_free_slots() -> None:
    bench = Bench()

    run_spread(bench, [Endpoint("http://a", slots=1), Endpoint("http://b", slots=3)], 4)

    # b has three free slots against a's one, and takes its share of the queue (2 of 4);
    # then both have one free: the tie goes to the one listed first.
    assert bench.batches[:3] == [("http://b", ["0", "1"]), ("http://a", ["2"]),
                                 ("http://b", ["3"])]


def test_verdicts_keep_the_index_of_their_document_in_the_whole_request() -> None:
    seen: list[int] = []

    async def score(request: ScoreRequest) -> AsyncIterator[DocumentScore]:
        for i, doc in enumerate(request.documents):
            yield DocumentScore(i, int(doc.id) / 100)

    request = ScoreRequest(query="q", documents=documents(9))
    outcome = asyncio.run(spread(Scorer("echo", "test", score), request,
                                 [Endpoint("http://a", slots=2), Endpoint("http://b", slots=2)],
                                 lambda v: seen.append(v.index)))

    assert {i: v.probability for i, v in outcome.scores.items()} == {
        i: i / 100 for i in range(9)}
    assert sorted(seen) == list(range(9))


def test_a_server_that_fails_hands_its_unjudged_documents_to_the_others() -> None:
    bench = Bench(fail={"http://b": 2})

    outcome = run_spread(bench, [Endpoint("http://a", slots=2),
                                 Endpoint("http://b", slots=2)], 12)

    assert sorted(outcome.scores) == list(range(12)) and outcome.stopped is None
    a, b = outcome.uses
    assert b.failed and "HTTP 503" in b.failed and a.failed is None
    assert b.scored == 3  # its first batch of 2, then 1 of its second
    assert a.scored == 9
    assert outcome.notes == [f"endpoint http://b failed after 3 verdicts ({b.failed}); "
                             "carried on with http://a"]
    assert [url for url, _ in bench.batches].count("http://b") == 2  # none after it failed


def test_only_when_every_server_fails_does_the_run_stop_early_naming_each() -> None:
    bench = Bench(fail={"http://a": 1, "http://b": 1})

    outcome = run_spread(bench, [Endpoint("http://a", slots=2),
                                 Endpoint("http://b", slots=2)], 8)

    assert len(outcome.scores) == 2  # one verdict from each before it failed
    assert outcome.fault == "transient"
    assert outcome.stopped.startswith("all 2 model servers failed: http://a after 1 verdicts")
    assert "http://b after 1 verdicts" in outcome.stopped


def test_one_server_that_fails_stops_the_run_with_its_own_message() -> None:
    bench = Bench(fail={"http://a": 2})

    outcome = run_spread(bench, [Endpoint("http://a", slots=2)], 8)

    assert len(outcome.scores) == 3
    assert outcome.stopped == "model server http://a failed with HTTP 503: boom"
    assert outcome.notes == []


def test_a_contract_error_from_one_server_surfaces_and_cancels_the_rest() -> None:
    cancelled = threading.Event()

    async def score(request: ScoreRequest) -> AsyncIterator[DocumentScore]:
        assert request.endpoint is not None
        if request.endpoint.base_url == "http://b":
            raise ContractError("http://b answered without choices", "http://b")
        try:
            await asyncio.sleep(5)
        except asyncio.CancelledError:
            cancelled.set()
            raise
        yield DocumentScore(0, 0.5)

    request = ScoreRequest(query="q", documents=documents(4))
    with pytest.raises(ContractError, match="http://b answered without choices"):
        asyncio.run(spread(Scorer("x", "test", score), request,
                           [Endpoint("http://a", slots=1), Endpoint("http://b", slots=1)]))
    assert cancelled.is_set()


# --- fakes of vLLM ---------------------------------------------------------------------------

MODEL = "Qwen/Qwen3-Reranker-0.6B"


class FakeVllm:
    """A vLLM OpenAI-compatible server on ``server``: documented payloads, a ``prompt`` list
    answered choice by choice ("yes" for documents that mention retries, else "no")."""

    def __init__(self, server: HTTPServer, model: str = MODEL,
                 fail_after: int | None = None, broken: bool = False) -> None:
        self.server = server
        self.prompts: list[list[str]] = []  # the prompt list of each completion request
        self.fail_after = fail_after
        self.broken = broken
        models = wire("vllm-v1-models.json")
        models["data"][0]["id"] = models["data"][0]["root"] = model
        server.expect_request("/v1/models").respond_with_json(models)
        server.expect_request("/props").respond_with_data("Not Found", status=404)
        server.expect_request("/api/version").respond_with_data("Not Found", status=404)
        server.expect_request("/tokenize").respond_with_json(wire("vllm-tokenize.json"))
        server.expect_request("/v1/completions", method="POST").respond_with_handler(
            self.complete)

    @property
    def url(self) -> str:
        return self.server.url_for("/").rstrip("/")

    def complete(self, request: Request) -> Response:
        body = request.get_json()
        prompts = body["prompt"] if isinstance(body["prompt"], list) else [body["prompt"]]
        if self.fail_after is not None and len(self.prompts) >= self.fail_after:
            return Response(json.dumps({"object": "error", "message": "engine dead",
                                        "type": "InternalServerError", "code": 500}),
                            status=500, content_type="application/json")
        self.prompts.append(prompts)
        template = wire("vllm-v1-completions.json")
        if self.broken:
            template.pop("choices")
            return Response(json.dumps(template), content_type="application/json")
        yes, no = template["choices"]
        template["choices"] = []
        for i, prompt in enumerate(prompts):
            document = prompt.rsplit("<Document>:", 1)[-1]
            choice = copy.deepcopy(yes if "retry" in document else no)
            choice["index"] = i
            template["choices"].append(choice)
        return Response(json.dumps(template), content_type="application/json")


def test_two_vllm_servers_share_the_chunks_in_batched_prompt_lists(
        tmp_path: Path, servers: Callable[[], HTTPServer]) -> None:
    a, b = FakeVllm(servers()), FakeVllm(servers())

    judgement = judged(tmp_path, [a.url, b.url], concurrency=2)

    assert judgement.degraded is None
    assert sorted(judgement.scores) == list(range(8))
    # each verdict belongs to its own chunk, whichever server judged it
    assert all((judgement.scores[i].probability > 0.5) == (i % 2 == 0) for i in range(8))
    assert a.prompts and b.prompts
    assert max(len(p) for p in a.prompts + b.prompts) == 2  # a list, at most the slots
    assert sum(len(p) for p in a.prompts + b.prompts) == 8
    assert [(u.url, u.scored) for u in judgement.uses] == [
        (a.url, sum(len(p) for p in a.prompts)), (b.url, sum(len(p) for p in b.prompts))]
    assert [e.base_url for e in judgement.endpoints] == [a.url, b.url]
    assert any(n.startswith(f"endpoints {a.url}, {b.url} from -e") or
               n.startswith(f"endpoints {a.url}, {b.url} from flag") for n in judgement.notes)
    assert any(n.startswith("verdicts by endpoint: ") for n in judgement.notes)


def test_a_vllm_server_failing_mid_run_leaves_the_rest_to_the_other(
        tmp_path: Path, servers: Callable[[], HTTPServer]) -> None:
    a, b = FakeVllm(servers()), FakeVllm(servers(), fail_after=1)

    judgement = judged(tmp_path, [a.url, b.url], concurrency=1)

    assert judgement.degraded is None
    assert sorted(judgement.scores) == list(range(8))
    assert all((judgement.scores[i].probability > 0.5) == (i % 2 == 0) for i in range(8))
    used_a, used_b = judgement.uses
    assert (used_b.scored, used_a.scored) == (1, 7)
    assert used_b.failed is not None and "HTTP 500" in used_b.failed
    assert any(n.startswith(f"endpoint {b.url} failed after 1 verdicts") and
               n.endswith(f"carried on with {a.url}") for n in judgement.notes)


def test_a_listed_server_that_is_down_from_the_start_is_left_out_with_a_note(
        tmp_path: Path, servers: Callable[[], HTTPServer]) -> None:
    a = FakeVllm(servers())
    dead = servers()
    dead_url = dead.url_for("/").rstrip("/")
    dead.stop()

    judgement = judged(tmp_path, [dead_url, a.url], concurrency=2)

    assert judgement.degraded is None and sorted(judgement.scores) == list(range(8))
    assert [e.base_url for e in judgement.endpoints] == [a.url]
    assert any(n.startswith(f"endpoint {dead_url} (from -e") or
               n.startswith(f"endpoint {dead_url} (from flag") for n in judgement.notes)
    assert any("did not answer (refused); carried on without it" in n
               for n in judgement.notes)


def test_when_no_listed_server_answers_the_query_degrades_naming_each(
        tmp_path: Path, servers: Callable[[], HTTPServer]) -> None:
    urls = []
    for _ in range(2):
        server = servers()
        urls.append(server.url_for("/").rstrip("/"))
        server.stop()

    judgement = judged(tmp_path, urls)

    assert judgement.scores == {}
    assert judgement.degraded is not None
    assert judgement.degraded.startswith("none of the 2 model servers")
    assert all(f"{url} refused" in judgement.degraded for url in urls)


def test_a_server_of_another_model_is_left_out_so_one_model_judges_every_chunk(
        tmp_path: Path, servers: Callable[[], HTTPServer]) -> None:
    a, other = FakeVllm(servers()), FakeVllm(servers(), model="Qwen/Qwen3-Reranker-4B")

    judgement = judged(tmp_path, [a.url, other.url], concurrency=2)

    assert sorted(judgement.scores) == list(range(8))
    assert other.prompts == []
    assert any(f"endpoint {other.url} serves 'Qwen/Qwen3-Reranker-4B', not '{MODEL}'" in n
               for n in judgement.notes)


def test_a_session_looks_for_the_servers_again_after_one_failed_mid_run(
        tmp_path: Path, servers: Callable[[], HTTPServer]) -> None:
    a, b = FakeVllm(servers()), FakeVllm(servers(), fail_after=1)
    host = Host.from_environment(start=tmp_path, flags={
        "endpoints": [a.url, b.url], "score_cache": False, "concurrency": 1})
    host.model_session = ModelSession()
    try:
        for _ in range(2):
            judge("where are retries configured", PASSAGES, host, host.settings, None)
    finally:
        host.model_session.close()

    probes = [r for r, _ in b.server.log if r.path == "/v1/models"]
    assert len(probes) == 2  # not trusted from the first query: it failed there


def test_a_broken_answer_from_one_server_is_an_error_not_a_load_to_shed(
        tmp_path: Path, servers: Callable[[], HTTPServer]) -> None:
    a, b = FakeVllm(servers()), FakeVllm(servers(), broken=True)

    with pytest.raises(ContractError, match=b.url):
        judged(tmp_path, [a.url, b.url], concurrency=1)


# --- two real llama-servers ------------------------------------------------------------------


class AllAtOnce:
    """A scorer plugin that compares documents (``per_document=False``), as a listwise
    judge does: it records how many documents each request held."""

    requests: list[int] = []

    @staticmethod
    @slm_rerank.hookimpl
    def register_scorers(register: Callable[[Scorer], None]) -> None:
        async def score(request: ScoreRequest) -> AsyncIterator[DocumentScore]:
            AllAtOnce.requests.append(len(request.documents))
            for i, document in enumerate(request.documents):
                yield DocumentScore(i, 0.9 if "retry" in document.text else 0.1)

        register(Scorer("all-at-once", "judges every document together", score,
                        per_document=False))


def test_a_scorer_that_compares_documents_gets_them_all_in_one_request_uncached(
        tmp_path: Path, servers: Callable[[], HTTPServer]) -> None:
    a, b = FakeVllm(servers()), FakeVllm(servers())
    AllAtOnce.requests = []
    settings = dataclasses.replace(Settings(), endpoints=[a.url, b.url], scorer="all-at-once",
                                   score_cache=True)
    host = Host.with_plugins(settings, AllAtOnce, slm_rerank_openai)
    cache = tmp_path / "cache"

    first = judge("where are retries configured", PASSAGES, host, settings, cache)
    again = judge("where are retries configured", PASSAGES, host, settings, cache)

    assert AllAtOnce.requests == [8, 8]  # one request each time: not split, not cached
    assert again.cache_hits == 0
    assert sorted(first.scores) == list(range(8))
    assert all((first.scores[i].probability > 0.5) == (i % 2 == 0) for i in range(8))
