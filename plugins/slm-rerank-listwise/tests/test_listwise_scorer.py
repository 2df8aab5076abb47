"""The listwise scorer: contract, prompts, windows, repairs, fallbacks, recorded payloads."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import re
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import httpx
import pytest
import slm_rerank_listwise
from slm_rerank_listwise import LISTWISE, prompt, score

from slm_rerank.errors import ConfigError, TransientError
from slm_rerank.plugin_kit import ModelClient
from slm_rerank.registrations import (
    Document,
    DocumentScore,
    Endpoint,
    ScoreRequest,
)
from slm_rerank.testing import (
    SAMPLE_BASE_PROFILE,
    SAMPLE_CHAT_PROFILE,
    SAMPLE_ENDPOINT,
    SAMPLE_QUERY,
    ScorerContract,
    score_sync,
)

FIXTURES = Path(__file__).resolve().parent / "fixtures"


# --- a stand-in for slm_rerank.plugin_kit.ModelClient ------------------------------------


def candidates_in(text: str) -> list[str]:
    """The candidates of a listwise prompt after its last "Query:", in the order sent."""
    asked = text[text.rindex("Query:"):]
    return re.split(r"\n*Candidate \d+:\n", asked)[1:]


def by_retry_count(text: str) -> str:
    """The answer of a consistent judge: more mentions of "retry" is better."""
    docs = candidates_in(text)
    order = sorted(range(len(docs)), key=lambda i: (-docs[i].count("retry"), i))
    return ", ".join(map(str, order)) + "]"  # the prompt already opened the array


class FakeClient:
    """Generates ``answer(prompt)``; ``calls`` records (prompt, max_tokens, stop)."""

    def __init__(self, answer: Callable[[str], str] = by_retry_count) -> None:
        self.answer = answer
        self.calls: list[tuple[str, int, tuple[str, ...]]] = []

    async def generate(self, endpoint: Endpoint, prompt: str, max_tokens: int = 32,
                       stop: Sequence[str] = ()) -> str:
        self.calls.append((prompt, max_tokens, tuple(stop)))
        return self.answer(prompt)

    async def tokenize(self, endpoint: Endpoint, text: str) -> list[int] | None:
        return None  # like a server that cannot tokenize: the estimate decides


class DenseTokenizer(FakeClient):
    """A server whose tokenizer makes one token of every two characters."""

    async def tokenize(self, endpoint: Endpoint, text: str) -> list[int] | None:
        return [0] * (len(text) // 2)


def answering(*answers: str) -> FakeClient:
    """A client giving ``answers`` in turn, one per window."""
    given = iter(answers)
    return FakeClient(lambda _: next(given))


def request_for(*texts: str, client: object = None, **changes: object) -> ScoreRequest:
    documents = [Document.of(str(i), t) for i, t in enumerate(texts)]
    request = ScoreRequest(SAMPLE_QUERY, documents, profile=SAMPLE_BASE_PROFILE,
                           endpoint=SAMPLE_ENDPOINT, client=client or FakeClient())
    return dataclasses.replace(request, **changes)


async def verdicts(request: ScoreRequest) -> list[DocumentScore]:
    return [v async for v in score(request)]


def ranked(scores: Sequence[DocumentScore] | dict[int, DocumentScore]) -> list[int]:
    values = scores.values() if isinstance(scores, dict) else scores
    return [s.index for s in sorted(values, key=lambda s: -s.probability)]


class TestListwiseScorer(ScorerContract):
    plugin = slm_rerank_listwise
    distribution = "slm-rerank-listwise"
    names = {"listwise"}

    profile, endpoint, make_client = SAMPLE_BASE_PROFILE, SAMPLE_ENDPOINT, FakeClient


def test_it_compares_documents_so_the_host_must_send_them_together() -> None:
    assert LISTWISE.per_document is False and LISTWISE.needs_endpoint is True
    assert {o.key for o in LISTWISE.options} == {"window", "step", "multiplier", "max_tokens",
                                                 "doc_chars"}


# --- the order and the probability --------------------------------------------------------


def test_the_models_order_becomes_falling_probabilities_with_the_rank_as_raw() -> None:
    client = answering("2, 0, 1]")
    scores = {s.index: s for s in asyncio.run(verdicts(request_for("a", "b", "c",
                                                                   client=client)))}
    assert ranked(scores) == [2, 0, 1]
    assert [scores[i].raw for i in (2, 0, 1)] == [0.0, 1.0, 2.0]
    assert [scores[i].probability for i in (2, 0, 1)] == pytest.approx([5 / 6, 1 / 2, 1 / 6])
    assert all(s.note is None for s in scores.values())


def test_a_strict_answer_is_one_call_for_a_list_within_the_window() -> None:
    client = FakeClient()
    asyncio.run(verdicts(request_for(*["x"] * 16, client=client)))
    assert len(client.calls) == 1


def test_a_long_list_is_ranked_in_sliding_windows_and_the_best_rises_to_the_top() -> None:
    texts = ["colour"] * 34 + ["retry retry retry"]  # the best one last
    client = FakeClient()
    options = {"window": 10, "step": 5}
    scores = asyncio.run(verdicts(request_for(*texts, client=client, options=options)))
    assert len(client.calls) == 1 + -(-(35 - 10) // 5)
    assert all(len(candidates_in(p)) <= 10 for p, _, _ in client.calls)
    assert ranked(scores)[0] == 34
    assert len(scores) == 35


# --- the prompt ----------------------------------------------------------------------------


def test_a_base_profile_gets_the_listwise_layout_with_numbered_candidates() -> None:
    client = FakeClient()
    asyncio.run(verdicts(request_for("def retry(): ...", "RED = 1", client=client)))
    ((sent, max_tokens, stop),) = client.calls
    assert sent == prompt.BASE_LAYOUT.replace("{instruction}", prompt.INSTRUCTION).replace(
        "{query}", SAMPLE_QUERY).replace(
        "{document}", "Candidate 0:\ndef retry(): ...\n\nCandidate 1:\nRED = 1") + " ["
    assert "Relevant:" not in sent  # the yes/no layout of a base profile is not used
    assert max_tokens == 4 * 2 + 8 and stop == ("\n",)


def test_an_instruction_tuned_profile_keeps_its_chat_template_and_stop() -> None:
    client = FakeClient()
    asyncio.run(verdicts(request_for("def retry(): ...", "RED = 1", client=client,
                                     profile=SAMPLE_CHAT_PROFILE)))
    ((sent, _, stop),) = client.calls
    assert sent.startswith("<user>" + prompt.INSTRUCTION + "\nQuery: " + SAMPLE_QUERY)
    assert sent.endswith("Candidate 1:\nRED = 1<end>\n<model>\n[")
    assert stop == ("\n", "<end>")


def test_without_a_profile_the_listwise_layout_is_used() -> None:
    client = FakeClient()
    asyncio.run(verdicts(request_for("a", "b", client=client, profile=None)))
    assert client.calls[0][0].startswith(prompt.INSTRUCTION)


def test_candidates_are_cut_to_doc_chars_at_a_line_end() -> None:
    client = FakeClient()
    long = "File: a.py:1-40\n" + "\n".join(f"line {i} retry" for i in range(40))
    asyncio.run(verdicts(request_for(long, "b", client=client, options={"doc_chars": 100})))
    first = candidates_in(client.calls[0][0])[0]
    assert first.startswith("File: a.py:1-40\nline 0") and first.endswith("\n…")
    assert len(first) <= 100 + 2


def test_a_window_is_cut_to_fit_the_servers_context_by_the_estimate() -> None:
    client = FakeClient()
    small = dataclasses.replace(SAMPLE_ENDPOINT, context_tokens=1024)
    texts = ["File: a.py\n" + "retry = 1\n" * 200] * 8
    asyncio.run(verdicts(request_for(*texts, client=client, endpoint=small)))
    ((sent, max_tokens, _),) = client.calls
    assert len(sent) / prompt.CHARS_PER_TOKEN + max_tokens <= 1024


def test_a_window_is_cut_again_when_the_servers_tokenizer_counts_more_tokens() -> None:
    client = DenseTokenizer()
    small = dataclasses.replace(SAMPLE_ENDPOINT, context_tokens=1024)
    texts = ["File: a.py\n" + "retry = 1\n" * 200] * 8
    asyncio.run(verdicts(request_for(*texts, client=client, endpoint=small)))
    ((sent, max_tokens, _),) = client.calls
    assert len(sent) // 2 + max_tokens + prompt.RESERVED_TOKENS <= 1024
    assert all(len(c) > prompt.MIN_CANDIDATE_CHARS for c in candidates_in(sent))


def test_the_max_tokens_setting_is_what_the_server_is_asked_for() -> None:
    client = FakeClient()
    asyncio.run(verdicts(request_for("a", "b", client=client, options={"max_tokens": 5})))
    assert client.calls[0][1] == 5


# --- repaired answers say so ---------------------------------------------------------------


@pytest.mark.parametrize(("answer", "order", "repair"), [
    ("2, 0, 1] because 2 retries", [2, 0, 1], "prose around the array dropped"),
    ("2, 0]", [2, 0, 1], "index 1 was missing: put last"),
    ("2, 0, 2, 1]", [2, 0, 1], "repeated index 2 dropped (first place kept)"),
    ("2, 9, 0, 1]", [2, 0, 1], "out-of-range index 9 dropped"),
    ("3, 1, 2]", [2, 0, 1], "1-based numbering shifted to 0-based"),
    ("2, 0, 1,]", [2, 0, 1], "trailing comma dropped"),
    ("2, 0, 1", [2, 0, 1], "missing closing bracket added"),
])
def test_a_repaired_answer_is_used_and_every_verdict_says_what_was_repaired(
        answer: str, order: list[int], repair: str) -> None:
    scores = asyncio.run(verdicts(request_for("a", "b", "c", client=answering(answer))))
    assert ranked(scores) == order
    assert {s.note for s in scores} == {f"listwise: repaired the answer: {repair}"}


# --- unusable answers and server faults keep the input order -------------------------------


@pytest.mark.parametrize(("answer", "problem"), [
    ("0, 1] or [1, 0, 2]", "the answer holds 2 arrays of numbers"),
    ("0]", "indices 1, 2 are missing"),
    ("0, 0, 1, 1]", "index 2 is missing and 0, 1 repeated"),
    ("0, 1, 7]", "index 2 is missing and 7 out of range (0-2)"),
    ("a, b, c]", "the element 'a' is not a candidate number"),
    ("Candidate 2 looks best.", "the answer holds no array of numbers"),
])
def test_an_unusable_answer_yields_nothing_and_the_host_degrades_to_the_input_order(
        answer: str, problem: str) -> None:
    outcome = score_sync(LISTWISE, request_for("a", "b", "c", client=answering(answer)))
    assert outcome.scores == {}
    assert outcome.fault == "transient"
    assert outcome.stopped is not None
    assert outcome.stopped.startswith(f"listwise: the answer was unusable ({problem}: ")
    assert outcome.stopped.endswith("; kept the input order")


def test_one_unusable_window_of_several_keeps_that_windows_order_and_says_so() -> None:
    # Windows of 3 sliding by 2 over 5: (2, 5) first, then (0, 3).
    client = answering("9, 9, 9]", "2, 1, 0]")
    outcome = score_sync(LISTWISE, request_for(*"abcde", client=client,
                                               options={"window": 3, "step": 2}))
    assert ranked(outcome.scores) == [2, 1, 0, 3, 4]  # 2..4 kept as sent, then 0..2 reversed
    assert outcome.fault == "transient"
    assert "window 1 of 2 was unusable" in (outcome.stopped or "")
    assert "those windows kept the order they were sent in" in (outcome.stopped or "")
    assert "window 1 of 2 was unusable" in (outcome.scores[4].note or "")
    assert outcome.scores[0].note is None


def test_every_window_unusable_yields_nothing() -> None:
    client = answering("nothing", "nothing")
    outcome = score_sync(LISTWISE, request_for(*"abcde", client=client,
                                               options={"window": 3, "step": 2}))
    assert outcome.scores == {} and outcome.fault == "transient"


def test_a_server_fault_is_a_transient_error_naming_the_server_and_the_fallback() -> None:
    class Down(FakeClient):
        async def generate(self, endpoint, prompt, max_tokens=32, stop=()):  # type: ignore[no-untyped-def]
            raise TransientError("model server refused the connection", endpoint.base_url)

    outcome = score_sync(LISTWISE, request_for("a", "b", client=Down()))
    assert outcome.scores == {} and outcome.fault == "transient"
    assert outcome.stopped == (f"listwise: {SAMPLE_ENDPOINT.base_url} failed on the answer: "
                               "model server refused the connection; kept the input order")


def test_a_deadline_before_the_last_window_keeps_nothing() -> None:
    class Slow(FakeClient):
        async def generate(self, endpoint, prompt, max_tokens=32, stop=()):  # type: ignore[no-untyped-def]
            await asyncio.sleep(5)
            return "0, 1]"

    request = request_for("a", "b", client=Slow(), deadline=time.monotonic() + 0.3)
    outcome = score_sync(LISTWISE, request)
    assert outcome.scores == {} and outcome.fault == "deadline"


# --- configuration --------------------------------------------------------------------------


def test_a_chat_endpoint_is_a_configuration_error_naming_it() -> None:
    chat = Endpoint("http://127.0.0.1:8080", kind="openai-chat")
    with pytest.raises(ConfigError, match=r"http://127.0.0.1:8080.*cannot continue a raw"):
        asyncio.run(verdicts(request_for("a", endpoint=chat)))


def test_without_an_endpoint_it_says_what_is_missing() -> None:
    with pytest.raises(ConfigError, match="without a model endpoint"):
        asyncio.run(verdicts(request_for("a", endpoint=None)))


@pytest.mark.parametrize(("options", "message"), [
    ({"window": 1}, "key 'window' must be an integer of at least 2"),
    ({"step": 0}, "key 'step' must be an integer of at least 1"),
    ({"window": 4, "step": 5}, r"key 'step' \(5\) is larger than 'window' \(4\)"),
    ({"doc_chars": 10}, "key 'doc_chars' must be an integer of at least 80"),
])
def test_settings_that_cannot_work_are_configuration_errors(options: dict[str, int],
                                                            message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        asyncio.run(verdicts(request_for("a", "b", options=options)))


# --- through the real client, on payloads recorded from llama-server ------------------------


def replaying(name: str, status: int = 200) -> ModelClient:
    """A ModelClient whose server answers each path with the fixture's recorded response."""
    recorded = {e["path"]: e["response"]
                for e in json.loads((FIXTURES / name).read_text())["exchanges"]}

    def handle(request: httpx.Request) -> httpx.Response:
        if request.url.path not in recorded:
            return httpx.Response(404, json={"error": {"code": 404, "message": "not recorded"}})
        return httpx.Response(status, json=recorded[request.url.path])

    return ModelClient(http=httpx.AsyncClient(transport=httpx.MockTransport(handle)))


def recorded_request(name: str, endpoint: Endpoint, client: ModelClient) -> ScoreRequest:
    fixture = json.loads((FIXTURES / name).read_text())
    documents = [Document.of(str(i), t) for i, t in enumerate(fixture["documents"])]
    return ScoreRequest(fixture["query"], documents, profile=None, endpoint=endpoint,
                        client=client)


def test_the_recorded_prompt_is_the_one_sent_now() -> None:
    # The recording is only evidence while the prompt it answered is still ours.
    fixture = json.loads((FIXTURES / "gemma-270m-listwise-completion.json").read_text())
    sent = prompt.render(None, fixture["query"], fixture["documents"], 600)
    assert fixture["exchanges"][0]["request"]["prompt"] == sent


@pytest.mark.parametrize("endpoint", [
    Endpoint("http://lcp.test", kind="llama.cpp", model_id="gemma-3-270m-q4_k_m.gguf"),
    Endpoint("http://lcp.test", kind="openai-completions", model_id="gemma-3-270m-q4_k_m.gguf"),
])
def test_a_recorded_gemma_base_answer_copying_the_example_is_repaired(
        endpoint: Endpoint) -> None:
    # Gemma 3 270M base answered "[1, 2, 0]" (its worked example) for four candidates.
    client = replaying("gemma-270m-listwise-completion.json")
    request = recorded_request("gemma-270m-listwise-completion.json", endpoint, client)
    outcome = score_sync(LISTWISE, request)
    assert outcome.stopped is None
    assert ranked(outcome.scores) == [1, 2, 0, 3]
    assert outcome.scores[3].note == "listwise: repaired the answer: index 3 was missing: put last"


def test_a_recorded_counting_answer_degrades_to_the_input_order() -> None:
    # Without the worked example the base model counts "1, 2, 3, ..." until n_predict.
    client = replaying("gemma-270m-listwise-counting.json")
    request = recorded_request("gemma-270m-listwise-counting.json", SAMPLE_ENDPOINT, client)
    outcome = score_sync(LISTWISE, request)
    assert outcome.scores == {} and outcome.fault == "transient"
    assert "index 0 is missing and 4, 5, 6, 7, 8 out of range (0-3)" in (outcome.stopped or "")


def test_an_http_error_answer_is_a_degraded_run_not_an_exception() -> None:
    # llama-server's answer to a prompt over the slot's context (HTTP 400).
    def handle(request: httpx.Request) -> httpx.Response:
        return httpx.Response(400, json={"error": {
            "code": 400, "type": "exceed_context_size_error",
            "message": "the request exceeds the available context size, try increasing it"}})

    client = ModelClient(http=httpx.AsyncClient(transport=httpx.MockTransport(handle)))
    outcome = score_sync(LISTWISE, request_for("a", "b", client=client))
    assert outcome.scores == {} and outcome.fault == "transient"
    assert "exceeds the available context size" in (outcome.stopped or "")
    assert (outcome.stopped or "").endswith("kept the input order")


def test_a_timeout_is_a_degraded_run_not_an_exception() -> None:
    def handle(request: httpx.Request) -> httpx.Response:
        raise httpx.ReadTimeout("timed out", request=request)

    client = ModelClient(timeout=1.0, http=httpx.AsyncClient(
        transport=httpx.MockTransport(handle)))
    outcome = score_sync(LISTWISE, request_for("a", "b", client=client))
    assert outcome.scores == {} and outcome.fault == "transient"
    assert "did not answer within 1 s" in (outcome.stopped or "")
