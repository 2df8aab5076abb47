"""The yesno scorer: contract, layouts, batching, answer-word ids, and recorded payloads."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import math
import time
from collections.abc import Callable, Iterator, Mapping, Sequence

import httpx
import pytest
import slm_rerank_yesno
from slm_rerank_yesno import ANSWER_IDS, score

from slm_rerank.errors import ConfigError, ContractError, TransientError
from slm_rerank.plugin_kit import ModelClient, NextToken, TokenChoice
from slm_rerank.registrations import (
    Document,
    DocumentScore,
    Endpoint,
    ScoreRequest,
)
from slm_rerank.testing import (
    SAMPLE_CHAT_PROFILE,
    SAMPLE_ENDPOINT,
    SAMPLE_QUERY,
    ScorerContract,
    score_sync,
)
from slm_rerank.testing.recordings import WIRE

# --- a stand-in for slm_rerank.plugin_kit.ModelClient ------------------------------------


def leaning(prompt: str) -> tuple[TokenChoice, ...]:
    """Yes for a prompt about retries, no otherwise."""
    if "retry" in prompt:
        return (TokenChoice("yes", -0.1, 9693), TokenChoice("no", -2.4, 2152),
                TokenChoice("The", -4.0, 651))
    return (TokenChoice("no", -0.2, 2152), TokenChoice("yes", -1.8, 9693),
            TokenChoice("The", -4.0, 651))


class FakeClient:
    """Answers every prompt with ``answer(prompt)``; ``calls`` records each request."""

    def __init__(self, answer: Callable[[str], tuple[TokenChoice, ...]] = leaning,
                 vocabulary: Mapping[str, list[int]] | None = None) -> None:
        self.answer = answer
        self.vocabulary = vocabulary  # None: the server cannot tokenize
        self.calls: list[tuple[str, list[str]]] = []
        self.tokenized: list[str] = []

    async def next_token(self, endpoint: Endpoint, prompts: Sequence[str], top_k: int = 20,
                         stop: Sequence[str] = ()) -> list[NextToken]:
        self.calls.append(("completion", list(prompts)))
        return [NextToken(self.answer(p), prompt_tokens=len(p.split())) for p in prompts]

    async def next_token_chat(self, endpoint: Endpoint,
                              conversations: Sequence[Sequence[Mapping[str, str]]],
                              top_k: int = 20) -> list[NextToken]:
        texts = ["\n".join(m["content"] for m in c) for c in conversations]
        self.calls.append(("chat", texts))
        return [NextToken(self.answer(t)) for t in texts]

    async def tokenize(self, endpoint: Endpoint, text: str) -> list[int] | None:
        self.tokenized.append(text)
        if self.vocabulary is None:
            return None
        return self.vocabulary.get(text, [0, 0])  # an unknown word: two tokens


@pytest.fixture(autouse=True)
def fresh_answer_ids() -> Iterator[None]:
    """Each test meets servers whose answer-word ids are not known yet."""
    ANSWER_IDS.clear()
    yield
    ANSWER_IDS.clear()


def request_for(*texts: str, endpoint: Endpoint = SAMPLE_ENDPOINT, client: object = None,
                **changes: object) -> ScoreRequest:
    documents = [Document.of(str(i), t) for i, t in enumerate(texts)]
    request = ScoreRequest(SAMPLE_QUERY, documents, profile=SAMPLE_CHAT_PROFILE,
                           endpoint=endpoint, client=client or FakeClient())
    return dataclasses.replace(request, **changes)


async def verdicts(request: ScoreRequest) -> list[DocumentScore]:
    return [v async for v in score(request)]


class TestYesnoScorer(ScorerContract):
    plugin = slm_rerank_yesno
    distribution = "slm-rerank-yesno"
    names = {"yesno"}

    profile, endpoint, make_client = SAMPLE_CHAT_PROFILE, SAMPLE_ENDPOINT, FakeClient


def test_it_needs_an_endpoint() -> None:
    assert slm_rerank_yesno.YESNO.needs_endpoint is True


def test_relevant_documents_score_above_irrelevant_ones() -> None:
    scores = asyncio.run(verdicts(request_for("def retry(): ...", "colour = 'red'")))
    by_index = {s.index: s for s in scores}
    assert by_index[0].probability > 0.5 > by_index[1].probability
    assert by_index[0].raw == pytest.approx(-0.1 - -2.4)
    assert by_index[0].probability == pytest.approx(1 / (1 + math.exp(-by_index[0].raw)))


def test_completion_endpoints_get_the_profiles_completion_layout() -> None:
    client = FakeClient()
    asyncio.run(verdicts(request_for("def retry(): ...", client=client)))
    assert client.calls == [("completion", [SAMPLE_CHAT_PROFILE.render_completion(
        "where are retries configured", "def retry(): ...")])]


def test_chat_endpoints_get_the_profiles_chat_messages() -> None:
    client = FakeClient()
    chat = Endpoint("http://127.0.0.1:8080", kind="openai-chat", model_id="m")
    asyncio.run(verdicts(request_for("def retry(): ...", endpoint=chat, client=client)))
    messages = SAMPLE_CHAT_PROFILE.render_chat(SAMPLE_QUERY, "def retry(): ...")
    assert client.calls == [("chat", ["\n".join(m["content"] for m in messages)])]


def test_a_chat_endpoint_with_a_profile_without_chat_layout_names_both() -> None:
    chat = Endpoint("http://127.0.0.1:8080", kind="openai-chat")
    base = dataclasses.replace(SAMPLE_CHAT_PROFILE, name="base-model", chat=())
    with pytest.raises(ConfigError, match=r"http://127.0.0.1:8080.*'base-model'"):
        asyncio.run(verdicts(request_for("x", endpoint=chat, profile=base)))


def test_without_a_profile_it_says_what_is_missing() -> None:
    with pytest.raises(ConfigError, match="without a model profile"):
        asyncio.run(verdicts(request_for("x", profile=None)))


def test_prompts_go_in_batches_of_the_servers_slots_and_verdicts_keep_their_index() -> None:
    client = FakeClient()
    two_slots = dataclasses.replace(SAMPLE_ENDPOINT, slots=2)
    texts = ["retry a", "b", "retry c", "d", "retry e"]
    scores = asyncio.run(verdicts(request_for(*texts, endpoint=two_slots, client=client)))
    assert [len(prompts) for _, prompts in client.calls] == [2, 2, 1]
    assert [s.index for s in scores] == [0, 1, 2, 3, 4]
    assert [s.probability > 0.5 for s in scores] == [True, False, True, False, True]


def test_a_batchs_verdicts_arrive_before_the_next_batch_is_asked() -> None:
    client = FakeClient()

    async def first_then_calls() -> tuple[DocumentScore, int]:
        stream = score(request_for("retry a", "b", client=client))
        first = await stream.__anext__()
        calls = len(client.calls)
        await stream.aclose()
        return first, calls

    first, calls = asyncio.run(first_then_calls())
    assert first.index == 0 and calls == 1


def test_a_deadline_keeps_the_batches_already_judged() -> None:
    class SlowSecondBatch(FakeClient):
        async def next_token(self, endpoint, prompts, top_k=20, stop=()):  # type: ignore[no-untyped-def]
            if self.calls:
                await asyncio.sleep(5)
            return await super().next_token(endpoint, prompts, top_k, stop)

    request = request_for("retry a", "b", client=SlowSecondBatch(),
                          deadline=time.monotonic() + 0.5)
    outcome = score_sync(slm_rerank_yesno.YESNO, request)
    assert sorted(outcome.scores) == [0] and "deadline" in (outcome.stopped or "")


def test_bounded_verdicts_say_which_side_was_bounded() -> None:
    def no_yes(prompt: str) -> tuple[TokenChoice, ...]:
        return (TokenChoice("no", -0.1, 2152), TokenChoice("If", -5.0, 2094))

    (verdict,) = asyncio.run(verdicts(request_for("x", client=FakeClient(no_yes))))
    assert verdict.bounded == "yes" and "upper bound" in (verdict.note or "")
    assert verdict.raw == pytest.approx(-4.9)


def test_answer_words_are_tokenized_once_per_server_and_model() -> None:
    client = FakeClient(vocabulary={"yes": [9693], "Yes": [8241], " yes": [5081],
                                    "no": [2152], "No": [3004], " no": [708]})
    asyncio.run(verdicts(request_for("a", client=client)))
    asyncio.run(verdicts(request_for("b", client=client)))
    assert client.tokenized == [*SAMPLE_CHAT_PROFILE.yes_words, *SAMPLE_CHAT_PROFILE.no_words]
    other = dataclasses.replace(SAMPLE_ENDPOINT, model_id="another-model.gguf")
    asyncio.run(verdicts(request_for("c", client=client, endpoint=other)))
    answer_words = SAMPLE_CHAT_PROFILE.yes_words + SAMPLE_CHAT_PROFILE.no_words
    assert len(client.tokenized) == 2 * len(answer_words)


def test_ids_from_the_tokenizer_decide_over_token_text() -> None:
    # The server's "yes" token has id 9693; a candidate spelled "yes" with another id
    # (a different token that prints alike) is not the answer word.
    vocabulary = {"yes": [9693], "Yes": [8241], " yes": [5081],
                  "no": [2152], "No": [3004], " no": [708]}

    def lookalike(prompt: str) -> tuple[TokenChoice, ...]:
        return (TokenChoice("yes", -0.5, 99999), TokenChoice("no", -1.0, 2152),
                TokenChoice("yes", -2.0, 9693))

    (verdict,) = asyncio.run(verdicts(request_for(
        "x", client=FakeClient(lookalike, vocabulary=vocabulary))))
    assert verdict.raw == pytest.approx(-2.0 - -1.0)


def test_a_server_answering_tokenize_oddly_is_matched_by_text() -> None:
    class OddTokenizer(FakeClient):
        async def tokenize(self, endpoint, text):  # type: ignore[no-untyped-def]
            raise ContractError("tokens that are not integer ids", endpoint.base_url)

    (verdict,) = asyncio.run(verdicts(request_for("retry", client=OddTokenizer())))
    assert verdict.probability > 0.5 and verdict.bounded is None


def test_a_failing_tokenize_is_not_remembered() -> None:
    class Down(FakeClient):
        async def tokenize(self, endpoint, text):  # type: ignore[no-untyped-def]
            raise TransientError("refused", endpoint.base_url)

    with pytest.raises(TransientError):
        asyncio.run(verdicts(request_for("x", client=Down())))
    assert ANSWER_IDS == {}


def test_fewer_answers_than_prompts_is_a_contract_error() -> None:
    class Short(FakeClient):
        async def next_token(self, endpoint, prompts, top_k=20, stop=()):  # type: ignore[no-untyped-def]
            return (await super().next_token(endpoint, prompts, top_k, stop))[:1]

    two_slots = dataclasses.replace(SAMPLE_ENDPOINT, slots=2)
    with pytest.raises(ContractError, match="answered 1 times for 2 prompts"):
        asyncio.run(verdicts(request_for("a", "b", endpoint=two_slots, client=Short())))


def test_an_answer_without_any_probability_mass_is_a_contract_error() -> None:
    def zeros(prompt: str) -> tuple[TokenChoice, ...]:
        return (TokenChoice("yes", -math.inf), TokenChoice("no", -math.inf))

    with pytest.raises(ContractError, match="no candidate with a nonzero probability"):
        asyncio.run(verdicts(request_for("x", client=FakeClient(zeros))))


def test_the_top_k_setting_is_what_the_server_is_asked_for() -> None:
    class Recording(FakeClient):
        async def next_token(self, endpoint, prompts, top_k=20, stop=()):  # type: ignore[no-untyped-def]
            self.top_k = top_k
            return await super().next_token(endpoint, prompts, top_k, stop)

    client = Recording()
    asyncio.run(verdicts(request_for("x", client=client, options={"top_k": 5})))
    assert client.top_k == 5


# --- through the real client, on payloads recorded from servers (testing.recordings) ---------


def serving(recordings: dict[str, str]) -> ModelClient:
    """A ModelClient whose server answers each path with a recorded payload (else 404)."""
    def handle(request: httpx.Request) -> httpx.Response:
        name = recordings.get(request.url.path)
        if name is None:
            return httpx.Response(404, json={"error": "not found"})
        return httpx.Response(200, json=json.loads((WIRE / name).read_text()))

    return ModelClient(http=httpx.AsyncClient(transport=httpx.MockTransport(handle)))


def test_a_recorded_vllm_answer_gives_one_verdict_per_prompt_summing_no_and_No() -> None:
    endpoint = Endpoint("http://vllm.test", kind="openai-completions",
                        model_id="Qwen/Qwen3-Reranker-0.6B", slots=2)
    client = serving({"/v1/completions": "vllm-v1-completions.json"})
    scores = asyncio.run(verdicts(request_for("def retry(): ...", "colour = 'red'",
                                              endpoint=endpoint, client=client)))
    assert [s.index for s in scores] == [0, 1]
    assert scores[0].raw == pytest.approx(-0.02 - -3.9)
    no = math.log(math.exp(-0.11) + math.exp(-4.5))  # "no" and "No" are both no-words
    assert scores[1].raw == pytest.approx(-2.25 - no)
    assert scores[0].bounded is None and scores[1].bounded is None


def test_a_recorded_gemma_answer_with_leading_spaces_matches_space_words() -> None:
    endpoint = Endpoint("http://lcp.test", kind="openai-completions",
                        model_id="gemma-3-270m-Q4_K_M.gguf")
    client = serving({"/v1/completions": "llama-cpp-python-v1-completions.json"})
    base = dataclasses.replace(SAMPLE_CHAT_PROFILE, yes_words=(" yes",), no_words=(" no",))
    (verdict,) = asyncio.run(verdicts(request_for("x", endpoint=endpoint, client=client,
                                                  profile=base)))
    assert verdict.raw == pytest.approx(-0.84 - -1.02)


def replaying(*names: str) -> ModelClient:
    """A ModelClient whose server replays recorded llama-server exchanges.

    A request is answered with the recorded response to the same path and, for
    ``/tokenize``, the same text; anything else is a 404.
    """
    recorded: dict[tuple[str, str | None], object] = {}
    for name in names:
        for exchange in json.loads((WIRE / name).read_text())["exchanges"]:
            content = exchange["request"].get("content")
            recorded.setdefault((exchange["path"], content), exchange["response"])

    def handle(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content or b"{}")
        key = (request.url.path, body.get("content") if request.url.path == "/tokenize" else None)
        if key not in recorded:
            return httpx.Response(404, json={"error": {"code": 404, "message": "not recorded"}})
        return httpx.Response(200, json=recorded[key])

    return ModelClient(http=httpx.AsyncClient(transport=httpx.MockTransport(handle)))


def test_recorded_llama_server_answers_are_matched_by_the_ids_it_tokenized() -> None:
    # Gemma 3 270M base on llama-server, two prompts in one array request, the answer
    # words tokenized by the same server (" yes" 11262, "yes" 4443, " no" 951, "no" 1904).
    endpoint = Endpoint("http://127.0.0.1:8033", kind="llama.cpp",
                        model_id="gemma-3-270m-q4_k_m.gguf", slots=2)
    client = replaying("llamacpp-completion-array.json", "llamacpp-tokenize.json")
    base = dataclasses.replace(SAMPLE_CHAT_PROFILE, yes_words=(" yes", "yes"),
                               no_words=(" no", "no"))
    scores = asyncio.run(verdicts(request_for("def connect(): ...", "colour = 'red'",
                                              endpoint=endpoint, client=client, profile=base)))
    key = (endpoint.base_url, endpoint.model_id, base.yes_words, base.no_words)
    assert ANSWER_IDS[key] is not None
    assert ANSWER_IDS[key].yes == {11262, 4443} and ANSWER_IDS[key].no == {951, 1904}
    top = {s.index: s for s in scores}
    recorded = json.loads((WIRE / "llamacpp-completion-array.json").read_text())
    for i, answer in enumerate(recorded["exchanges"][0]["response"]):
        lps = {c["token"]: c["logprob"]
               for c in answer["completion_probabilities"][0]["top_logprobs"]}
        assert top[i].raw == pytest.approx(lps[" yes"] - lps[" no"])
        assert top[i].bounded is None
