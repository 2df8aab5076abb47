"""The graded scorer: contract, prompts, the logprob and text paths, failures, payloads."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import math
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import httpx
import pytest
import slm_rerank_graded
from pytest_httpserver import HTTPServer
from slm_rerank_graded import (
    GRADED,
    READABILITY,
    PromptParts,
    default_prompt,
    score,
    set_prompt_builder,
)
from slm_rerank_graded.prompts import FEW_SHOT

from slm_rerank.errors import ConfigError, ContractError, TransientError
from slm_rerank.plugin_kit import ModelClient, NextToken, TokenChoice
from slm_rerank.registrations import (
    Document,
    DocumentScore,
    Endpoint,
    ModelProfile,
    ScoreRequest,
)
from slm_rerank.testing import (
    SAMPLE_BASE_PROFILE,
    SAMPLE_CHAT_PROFILE,
    SAMPLE_ENDPOINT,
    SAMPLE_QUERY,
    Host,
    ScorerContract,
    Settings,
)

FIXTURES = Path(__file__).resolve().parent / "fixtures"


def p(x: float) -> float:
    return math.log(x)


def judged(prompt: str) -> str:
    """The document a prompt asks about: what follows its last "Document"."""
    return prompt.rsplit("Document", 1)[-1]


def digits_for(prompt: str) -> tuple[TokenChoice, ...]:
    """8 for a document about retries, 2 otherwise; most mass on the digit."""
    if "retry" in judged(prompt):
        return (TokenChoice("8", p(0.7)), TokenChoice("7", p(0.2)), TokenChoice("\n", p(0.1)))
    return (TokenChoice("2", p(0.6)), TokenChoice("0", p(0.3)), TokenChoice("\n", p(0.1)))


class FakeClient:
    """Answers next_token with ``answer(prompt)`` and generate with ``text(prompt)``."""

    def __init__(self, answer: Callable[[str], tuple[TokenChoice, ...]] = digits_for,
                 text: Callable[[str], str] = lambda prompt: "5") -> None:
        self.answer = answer
        self.text = text
        self.calls: list[tuple[str, str]] = []  # (kind, prompt)
        self.in_flight = 0
        self.most_in_flight = 0

    async def next_token(self, endpoint: Endpoint, prompts: Sequence[str], top_k: int = 20,
                         stop: Sequence[str] = ()) -> list[NextToken]:
        self.calls.extend(("next_token", prompt) for prompt in prompts)
        self.in_flight += 1
        self.most_in_flight = max(self.most_in_flight, self.in_flight)
        await asyncio.sleep(0)  # let the other documents of the batch start
        self.in_flight -= 1
        return [NextToken(self.answer(prompt)) for prompt in prompts]

    async def generate(self, endpoint: Endpoint, prompt: str, max_tokens: int = 32,
                       stop: Sequence[str] = ()) -> str:
        self.calls.append(("generate", prompt))
        return self.text(prompt)


@pytest.fixture(autouse=True)
def fresh_state() -> Iterator[None]:
    """Each test meets servers it has not read answers from, with the default prompt."""
    READABILITY.clear()
    set_prompt_builder(None)
    yield
    READABILITY.clear()
    set_prompt_builder(None)


def request_for(*texts: str, client: object = None, **changes: Any) -> ScoreRequest:
    documents = [Document.of(str(i), t) for i, t in enumerate(texts)]
    request = ScoreRequest(SAMPLE_QUERY, documents, profile=SAMPLE_BASE_PROFILE,
                           endpoint=SAMPLE_ENDPOINT, client=client or FakeClient())
    return dataclasses.replace(request, **changes)


def verdicts(request: ScoreRequest) -> list[DocumentScore]:
    async def run() -> list[DocumentScore]:
        return [v async for v in score(request)]
    return asyncio.run(run())


class TestGradedScorer(ScorerContract):
    plugin = slm_rerank_graded
    distribution = "slm-rerank-graded"
    names = {"graded"}

    profile, endpoint, make_client = SAMPLE_BASE_PROFILE, SAMPLE_ENDPOINT, FakeClient


def test_each_document_is_judged_alone_so_verdicts_may_be_cached() -> None:
    assert GRADED.per_document is True and GRADED.needs_endpoint is True


def test_its_settings_have_the_documented_defaults() -> None:
    host = Host.with_plugins(Settings(), slm_rerank_graded)
    assert host.options_for("graded") == {"max_grade": 10, "batch": 5, "top_k": 20,
                                          "instruction": None, "layout": None}


# --- the logprob path ----------------------------------------------------------------------


def test_the_grade_is_the_expected_value_over_the_digit_tokens_and_p_is_it_over_max() -> None:
    first, second = verdicts(request_for("def retry(): ...", "colour = 'red'"))
    assert first.raw == pytest.approx((8 * 0.7 + 7 * 0.2) / 0.9)
    assert first.probability == pytest.approx(first.raw / 10)
    assert second.raw == pytest.approx((2 * 0.6 + 0 * 0.3) / 0.9)
    assert "90%" in (first.note or "") and "logprobs" in (first.note or "")


def test_a_space_alone_as_the_likeliest_token_is_appended_and_the_next_position_read() -> None:
    # Gemma answers "Score:" with " " and then the digit (recorded: see the fixtures).
    def spaced(prompt: str) -> tuple[TokenChoice, ...]:
        if prompt.endswith("Score:"):
            return (TokenChoice(" ", p(0.97)), TokenChoice("\n", p(0.01)))
        return (TokenChoice("6", p(0.9)), TokenChoice("\n", p(0.1)))

    client = FakeClient(spaced)
    (verdict,) = verdicts(request_for("x", client=client))
    assert verdict.raw == pytest.approx(6.0)
    assert [prompt[-8:] for _, prompt in client.calls] == ["x\nScore:", "\nScore: "]


def test_a_first_1_is_followed_one_token_to_split_it_between_1_and_10() -> None:
    def one_or_ten(prompt: str) -> tuple[TokenChoice, ...]:
        if prompt.endswith("Score:"):
            return (TokenChoice("1", p(0.8)), TokenChoice("5", p(0.2)))
        return (TokenChoice("0", p(0.75)), TokenChoice("\n", p(0.25)))  # after "1"

    client = FakeClient(one_or_ten)
    (verdict,) = verdicts(request_for("x", client=client))
    # P(10) = 0.8 * 0.75, P(1) = 0.8 * 0.25, P(5) = 0.2
    assert verdict.raw == pytest.approx(10 * 0.6 + 1 * 0.2 + 5 * 0.2)
    assert client.calls[-1] == ("next_token", client.calls[0][1] + "1")


def test_with_a_maximum_below_10_no_digit_is_followed() -> None:
    def one(prompt: str) -> tuple[TokenChoice, ...]:
        return (TokenChoice("1", p(0.9)), TokenChoice("\n", p(0.1)))

    client = FakeClient(one)
    (verdict,) = verdicts(request_for("x", client=client, options={"max_grade": 5}))
    assert verdict.raw == pytest.approx(1.0) and verdict.probability == pytest.approx(0.2)
    assert len(client.calls) == 1


# --- the text path -------------------------------------------------------------------------


def no_digits(prompt: str) -> tuple[TokenChoice, ...]:
    return (TokenChoice("The", p(0.6)), TokenChoice("7", p(0.05)), TokenChoice("\n", p(0.3)))


def test_with_too_little_digit_mass_the_short_generated_answer_is_parsed() -> None:
    client = FakeClient(no_digits, text=lambda prompt: " 7/10")
    (verdict,) = verdicts(request_for("x", client=client))
    assert verdict.raw == 7 and verdict.probability == pytest.approx(0.7)
    assert "read from the answer ' 7/10'" in (verdict.note or "")
    assert [kind for kind, _ in client.calls] == ["next_token", "generate"]


@pytest.mark.parametrize("answer", [
    "The document", "", "-3", "7.5", "12", "3/5", "The document is about retries, 3 of them",
])
def test_a_malformed_answer_gives_that_document_no_verdict_not_a_zero(answer: str) -> None:
    def text(prompt: str) -> str:
        return answer if "bad" in judged(prompt) else "6"

    client = FakeClient(no_digits, text=text)
    scores = verdicts(request_for("good a", "bad", "good b", client=client))
    assert [s.index for s in scores] == [0, 2]
    assert all(s.raw == 6 for s in scores)


def test_a_model_that_never_gives_a_readable_grade_is_a_one_line_contract_error() -> None:
    client = FakeClient(no_digits, text=lambda prompt: "Rate how relevant the Document is")
    with pytest.raises(ContractError) as caught:
        verdicts(request_for("a", "b", "c", client=client))
    message = str(caught.value)
    assert "test-model.gguf on http://127.0.0.1:8033 gave no readable grade in 3 answers" in message
    assert "no integer" in message and "--scorer yesno" in message and "\n" not in message


def test_unreadable_answers_are_counted_across_requests_to_one_server() -> None:
    client = FakeClient(no_digits, text=lambda prompt: "no idea")
    for text in ("a", "b"):
        assert verdicts(request_for(text, client=client)) == []  # one or two: notes
    with pytest.raises(ContractError, match="no readable grade in 3 answers"):
        verdicts(request_for("c", client=client))


def test_once_a_model_has_answered_readably_later_failures_stay_single_documents() -> None:
    client = FakeClient(no_digits, text=lambda prompt: "7")
    assert len(verdicts(request_for("a", client=client))) == 1
    client.text = lambda prompt: "no idea"
    assert verdicts(request_for("b", "c", "d", "e", client=client)) == []


def test_ollama_answers_without_digits_get_no_verdict_since_it_has_no_text_fallback() -> None:
    client = FakeClient(no_digits)
    ollama = Endpoint("http://127.0.0.1:11434", kind="ollama", model_id="gemma3:270m")
    assert verdicts(request_for("a", client=client, endpoint=ollama)) == []
    assert [kind for kind, _ in client.calls] == ["next_token"]


# --- prompts -------------------------------------------------------------------------------


def test_a_base_model_gets_the_two_shot_graded_layout_not_its_yes_no_examples() -> None:
    client = FakeClient()
    verdicts(request_for("def retry(): ...", client=client))
    prompt = client.calls[0][1]
    assert prompt.startswith("Rate how relevant the Document is to the Query, from 0 "
                             "(unrelated) to 10")
    assert "Score: 9\n" in prompt and "Score: 0\n" in prompt and "Relevant:" not in prompt
    assert prompt.endswith(f"Query: {SAMPLE_QUERY}\nDocument:\ndef retry(): ...\nScore:")


def test_an_instruction_tuned_family_keeps_its_layout_with_the_graded_instruction() -> None:
    client = FakeClient()
    verdicts(request_for("def retry(): ...", client=client, profile=SAMPLE_CHAT_PROFILE))
    assert client.calls[0][1] == (
        "<user>Rate how relevant the Document is to the Query, from 0 (unrelated) to 10 (it "
        "holds the answer, or the code or text the Query is about). Answer with the number "
        f"only.\nQuery: {SAMPLE_QUERY}\nDocument: def retry(): ...<end>\n<model>\n")


def test_without_a_profile_the_two_shot_layout_is_used() -> None:
    client = FakeClient()
    verdicts(request_for("x", client=client, profile=None))
    assert client.calls[0][1].endswith("Document:\nx\nScore:")


def test_a_localised_instruction_from_config_goes_into_the_familys_layout() -> None:
    german = ("Bewerte, wie relevant das Dokument für die Anfrage ist, von 0 (gar nicht) bis "
              "{max} (es enthält die Antwort). Antworte nur mit der Zahl.")
    client = FakeClient()
    verdicts(request_for("x", client=client, profile=SAMPLE_CHAT_PROFILE,
                         options={"instruction": german, "max_grade": 5}))
    assert client.calls[0][1].startswith(
        "<user>Bewerte, wie relevant das Dokument für die Anfrage ist, von 0 (gar nicht) bis 5 "
        "(es enthält die Antwort). Antworte nur mit der Zahl.\nQuery: ")


def test_a_localised_layout_from_config_replaces_the_whole_prompt_in_one_pass() -> None:
    layout = ("{instruction}\n\nAnfrage: {query}\nDokument:\n{document}\nNote (0-{max}):")
    client = FakeClient()
    verdicts(request_for("d = {'document': 1}  # {query}", client=client,
                         options={"instruction": "Bewerte von 0 bis {max}.", "layout": layout}))
    assert client.calls[0][1] == (
        f"Bewerte von 0 bis 10.\n\nAnfrage: {SAMPLE_QUERY}\nDokument:\n"
        "d = {'document': 1}  # {query}\nNote (0-10):")


def test_a_prompt_builder_set_from_python_builds_every_prompt() -> None:
    seen: list[PromptParts] = []

    def french(parts: PromptParts) -> str:
        seen.append(parts)
        return (f"Note de 0 à {parts.max_grade} la pertinence du document pour la requête."
                f"\nRequête : {parts.query}\nDocument :\n{parts.document}\nNote :")

    set_prompt_builder(french)
    client = FakeClient()
    verdicts(request_for("def retry(): ...", client=client))
    assert client.calls[0][1].startswith("Note de 0 à 10 la pertinence")
    assert seen[0].profile is SAMPLE_BASE_PROFILE and seen[0].document == "def retry(): ..."
    set_prompt_builder(None)
    assert default_prompt(seen[0]).endswith("\nScore:")


def test_the_few_shot_examples_grade_on_the_configured_scale() -> None:
    parts = PromptParts(SAMPLE_QUERY, "x", 5, None, "Rate 0..5.")
    assert "Score: 4\n" in default_prompt(parts) and FEW_SHOT.count("{high}") == 1


# --- batches, settings, faults --------------------------------------------------------------


def test_documents_are_judged_in_batches_of_the_batch_setting_and_keep_their_index() -> None:
    client = FakeClient()
    texts = ["retry a", "b", "retry c", "d", "retry e"]
    scores = verdicts(request_for(*texts, client=client, options={"batch": 2}))
    assert [s.index for s in scores] == [0, 1, 2, 3, 4]
    assert [s.raw > 5 for s in scores] == [True, False, True, False, True]
    assert client.most_in_flight == 2


def test_the_default_batch_is_five_concurrent_judgements() -> None:
    client = FakeClient()
    verdicts(request_for(*[f"d{i}" for i in range(7)], client=client))
    assert client.most_in_flight == 5


@pytest.mark.parametrize(("options", "key"), [
    ({"max_grade": 0}, "max_grade"), ({"max_grade": 101}, "max_grade"),
    ({"batch": 0}, "batch"), ({"top_k": 0}, "top_k"),
])
def test_a_setting_out_of_range_is_a_config_error_naming_it(options: dict[str, int],
                                                            key: str) -> None:
    with pytest.raises(ConfigError, match=rf"\[plugins.graded\] {key}"):
        verdicts(request_for("x", options=options))


def test_a_chat_endpoint_is_a_config_error_naming_it() -> None:
    chat = Endpoint("http://127.0.0.1:8080", kind="openai-chat")
    with pytest.raises(ConfigError, match=r"http://127.0.0.1:8080 is a chat endpoint"):
        verdicts(request_for("x", endpoint=chat))


def test_without_an_endpoint_it_says_what_is_missing() -> None:
    with pytest.raises(ConfigError, match="without a model endpoint"):
        verdicts(request_for("x", endpoint=None))


def test_a_transient_fault_ends_the_run_and_cancels_the_rest_of_the_batch() -> None:
    class Failing(FakeClient):
        async def next_token(self, endpoint, prompts, top_k=20, stop=()):  # type: ignore[no-untyped-def]
            if "b" in judged(prompts[0]):
                raise TransientError("refused", endpoint.base_url)
            await asyncio.sleep(5)
            return await super().next_token(endpoint, prompts, top_k, stop)

    with pytest.raises(TransientError):
        verdicts(request_for("a", "b", client=Failing()))


# --- through the real client, on payloads recorded from llama-server ----------------------


def replaying(name: str) -> tuple[ModelClient, dict[str, Any]]:
    """A ModelClient whose server answers each recorded request body with its response."""
    recording = json.loads((FIXTURES / name).read_text())
    answers = {json.dumps(e["request"], sort_keys=True): e["response"]
               for e in recording["exchanges"]}

    def handle(request: httpx.Request) -> httpx.Response:
        body = json.dumps(json.loads(request.content), sort_keys=True)
        if body not in answers:
            return httpx.Response(404, json={"error": {"code": 404, "message": "not recorded"}})
        return httpx.Response(200, json=answers[body])

    client = ModelClient(http=httpx.AsyncClient(transport=httpx.MockTransport(handle)))
    return client, recording


def recorded_request(recording: dict[str, Any], client: ModelClient,
                     profile: ModelProfile) -> ScoreRequest:
    endpoint = Endpoint("http://127.0.0.1:8071", kind="llama.cpp",
                        model_id=recording["recorded_with"]["model"], slots=2)
    return ScoreRequest(recording["query"], [Document.of(str(i), t) for i, t in
                                             enumerate(recording["documents"])],
                        profile=profile, endpoint=endpoint, client=client,
                        options={"batch": 2})


def test_recorded_gemma_answers_give_expected_grades_through_the_space_and_the_1_of_10(
        ) -> None:
    from slm_rerank_gemma import GEMMA_BASE

    client, recording = replaying("llamacpp-graded-logprobs.json")
    scores = verdicts(recorded_request(recording, client, GEMMA_BASE))
    # first position " ", then the digits, then what follows "1": three calls a document
    paths = [e["request"]["prompt"][-8:] for e in recording["exchanges"]]
    assert sum(p.endswith("Score:") for p in paths) == 2
    assert sum(p.endswith("Score: ") for p in paths) == 2
    assert sum(p.endswith("Score: 1") for p in paths) == 2
    assert [round(s.raw or 0, 6) for s in scores] == [
        round(v["raw"], 6) for v in recording["verdicts"]]
    relevant, unrelated = scores
    assert relevant.raw > unrelated.raw  # the retry loop above the colour constants

    # and by hand from the recorded candidates, for the first document
    tops = {e["request"]["prompt"]: e["response"]["completion_probabilities"][0]["top_logprobs"]
            for e in recording["exchanges"]}
    prompt = next(k for k in tops if k.endswith("backoff(attempt))\nScore: "))
    digits = {int(t["token"]): math.exp(t["logprob"]) for t in tops[prompt]
              if t["token"].strip().isdigit()}
    after = {t["token"]: math.exp(t["logprob"]) for t in tops[prompt + "1"]}
    to_ten = after["0"] / sum(after.values())
    by_grade = dict(digits)
    by_grade[1] = digits[1] * (1 - to_ten - sum(v for k, v in after.items()
                                                 if k[:1].isdigit() and k != "0")
                               / sum(after.values()))
    by_grade[10] = digits[1] * to_ten
    assert relevant.raw == pytest.approx(sum(g * q for g, q in by_grade.items())
                                         / sum(by_grade.values()))


def test_recorded_gemma_text_answers_one_unreadable_one_read_strictly() -> None:
    # The base model in an instruction-tuned chat turn: no digits at the answer position;
    # it generated "Rate how relevant the Document is" (no integer: no verdict) and
    # "Page: 1" (the first integer of a short answer: grade 1, by the rule).
    from slm_rerank_gemma import GEMMA

    client, recording = replaying("llamacpp-graded-text.json")
    generated = [e["response"]["content"] for e in recording["exchanges"]
                 if e["request"]["n_predict"] > 1]
    assert sorted(generated) == ["Page: 1", "Rate how relevant the Document is"]
    (verdict,) = verdicts(recorded_request(recording, client, GEMMA))
    assert verdict.index == 1 and verdict.raw == 1 and "'Page: 1'" in (verdict.note or "")


# --- documented payloads of servers not run here (pytest-httpserver) ------------------------


def vllm_choice(index: int, top: dict[str, float], text: str) -> dict[str, Any]:
    """One choice of vLLM's /v1/completions answer with ``logprobs: N``.

    The shape of the OpenAI legacy Completions API ("logprobs": {"tokens", "token_logprobs",
    "top_logprobs": [{token: logprob}], "text_offset"}), which vLLM implements in
    vllm/entrypoints/openai/protocol.py (CompletionResponse, CompletionLogProbs); the same
    shape as slm_rerank/testing/wire/vllm-v1-completions.json.
    """
    return {"index": index, "text": text, "finish_reason": "length", "stop_reason": None,
            "prompt_logprobs": None,
            "logprobs": {"text_offset": [0], "token_logprobs": [max(top.values())],
                         "tokens": [max(top, key=top.get)], "top_logprobs": [top]}}


def vllm_answer(*choices: dict[str, Any]) -> dict[str, Any]:
    return {"id": "cmpl-graded", "object": "text_completion", "created": 1764500000,
            "model": "Qwen/Qwen2.5-1.5B-Instruct", "choices": list(choices),
            "usage": {"prompt_tokens": 120, "total_tokens": 121, "completion_tokens": 1}}


def test_a_vllm_answer_with_leading_space_digit_tokens_gives_the_expected_grade(
        httpserver: HTTPServer) -> None:
    # Byte-level BPE (Qwen) spells " 8" with the space inside the token.
    httpserver.expect_request("/v1/completions", method="POST").respond_with_json(
        vllm_answer(vllm_choice(0, {" 8": -0.2, " 7": -2.0, " 9": -3.0, " The": -4.0}, " 8")))
    endpoint = Endpoint(httpserver.url_for("/").rstrip("/"), kind="openai-completions",
                        model_id="Qwen/Qwen2.5-1.5B-Instruct")
    client = ModelClient(timeout=5)
    (verdict,) = verdicts(request_for("def retry(): ...", client=client, endpoint=endpoint))
    probs = {8: math.exp(-0.2), 7: math.exp(-2.0), 9: math.exp(-3.0)}
    assert verdict.raw == pytest.approx(sum(g * q for g, q in probs.items())
                                        / sum(probs.values()))
    sent = json.loads(httpserver.log[0][0].data)
    assert sent["logprobs"] == 20 and sent["max_tokens"] == 1 and sent["temperature"] == 0


def test_a_vllm_answer_without_digits_falls_back_to_its_generated_text(
        httpserver: HTTPServer) -> None:
    httpserver.expect_ordered_request("/v1/completions", method="POST").respond_with_json(
        vllm_answer(vllm_choice(0, {" The": -0.3, " This": -1.5}, " The")))
    generated = vllm_answer({"index": 0, "text": " 7/10", "finish_reason": "stop",
                             "stop_reason": "\n", "logprobs": None, "prompt_logprobs": None})
    httpserver.expect_ordered_request("/v1/completions", method="POST").respond_with_json(
        generated)
    endpoint = Endpoint(httpserver.url_for("/").rstrip("/"), kind="openai-completions",
                        model_id="Qwen/Qwen2.5-1.5B-Instruct")
    (verdict,) = verdicts(request_for("x", client=ModelClient(timeout=5), endpoint=endpoint))
    assert verdict.raw == 7
    second = json.loads(httpserver.log[1][0].data)
    assert second["max_tokens"] == 6 and second["stop"] == ["\n"]
