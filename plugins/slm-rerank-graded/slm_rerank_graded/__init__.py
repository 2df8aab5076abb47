"""Scorer ``graded``: the model grades each document 0..max; P(relevant) = grade / max.

One judgement per document, at temperature 0, in batches of ``batch`` concurrent
judgements (the client also keeps no more in flight than the server's slots). A judgement:

1. Ask for the top-K candidates of the answer's first token. When the likeliest is a
   space alone (a tokenizer that splits digits off, as Gemma's does), append it and ask
   again: the digits come one position later.
2. If the candidates spelling grades 0..max hold at least ``MIN_DIGIT_MASS`` of the
   probability, the grade is their expected value, renormalised over those candidates. A
   first digit that may begin a larger grade ("1" of "10") is followed one token further
   to split its probability between 1 and 10.
3. Otherwise generate a short answer (``ANSWER_TOKENS`` tokens, one line) and parse it
   strictly (``grades.parse_grade``): an answer that is no grade gives the document no
   verdict, never a zero.

``DocumentScore.raw`` is the grade (the integer read, or the expected value);
``probability`` is raw / max. A model that has never given a readable grade on a server
after ``FAILURES_BEFORE_ERROR`` answers is a configuration problem: a ``ContractError``
naming the server, the model and what it answered.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import slm_rerank
from slm_rerank.errors import ConfigError, ContractError
from slm_rerank.registrations import DocumentScore, Endpoint, PluginOption, Scorer, ScoreRequest
from slm_rerank_graded.grades import (
    GradeError,
    continuation,
    digit_mass,
    expected_grade,
    is_blank,
    needs_second_digit,
    parse_grade,
    token_text,
)
from slm_rerank_graded.prompts import (
    INSTRUCTION,
    PromptParts,
    default_prompt,
    prompt_builder,
    set_prompt_builder,
)

if TYPE_CHECKING:
    from slm_rerank.plugin_kit import ModelClient, NextToken

__all__ = ["GRADED", "PromptParts", "default_prompt", "score", "set_prompt_builder"]

DEFAULT_MAX_GRADE = 10
DEFAULT_BATCH = 5
DEFAULT_TOP_K = 20
#: the share of the answer position's probability the grade tokens must hold for their
#: expected value to be the verdict; below it the model is not answering with a number
#: there, and the generated text is read instead
MIN_DIGIT_MASS = 0.1
#: a first digit's share (of the grade tokens' mass) below which it is not followed to a
#: second digit: its split cannot move the expected value by more than max * this
MIN_PREFIX_SHARE = 0.02
#: tokens generated for the text fallback: room for "Score: 10/10"
ANSWER_TOKENS = 6
#: unreadable answers from one server and model, with none readable, before it is an error
FAILURES_BEFORE_ERROR = 3


@dataclass
class Readability:
    """What one server's model has answered so far in this process."""

    readable: int = 0
    unreadable: list[str] = field(default_factory=list)


#: (base URL, model id) -> how its answers have read; a model that follows the format once
#: is trusted to, and later unreadable answers are single documents without a verdict
READABILITY: dict[tuple[str, str], Readability] = {}


@dataclass(frozen=True)
class Judgement:
    """One document's outcome: a verdict, or why there is none; and the calls it took."""

    verdict: DocumentScore | None
    failure: GradeError | None = None
    calls: int = 0


def _settings(request: ScoreRequest) -> tuple[int, int, int, str, str | None]:
    options = request.options
    max_grade = int(options.get("max_grade", DEFAULT_MAX_GRADE))
    batch = int(options.get("batch", DEFAULT_BATCH))
    top_k = int(options.get("top_k", DEFAULT_TOP_K))
    if not 1 <= max_grade <= 100:
        raise ConfigError(f"[plugins.graded] max_grade is {max_grade}; it must be 1..100")
    if batch < 1:
        raise ConfigError(f"[plugins.graded] batch is {batch}; it must be at least 1")
    if top_k < 1:
        raise ConfigError(f"[plugins.graded] top_k is {top_k}; it must be at least 1")
    instruction = options.get("instruction") or INSTRUCTION
    return max_grade, batch, top_k, instruction.replace("{max}", str(max_grade)), \
        options.get("layout") or None


def _needs(request: ScoreRequest) -> tuple[Endpoint, ModelClient]:
    if request.endpoint is None or request.client is None:
        missing = "endpoint" if request.endpoint is None else "client"
        raise ConfigError(f"scorer 'graded' was called without a model {missing}; it needs "
                          "an endpoint (set endpoint or SLM_ENDPOINT)")
    if request.endpoint.kind == "openai-chat":
        raise ConfigError(f"endpoint {request.endpoint.base_url} is a chat endpoint; the "
                          "graded judge continues a raw prompt (it follows an answer digit "
                          "by digit): serve the model on a completion endpoint (llama.cpp "
                          "/completion or /v1/completions), or use --scorer yesno")
    return request.endpoint, request.client


async def _ask(client: ModelClient, endpoint: Endpoint, prompt: str, top_k: int) -> NextToken:
    answers = await client.next_token(endpoint, [prompt], top_k=top_k)
    if len(answers) != 1:
        raise ContractError(f"{endpoint.base_url} answered {len(answers)} times for one "
                            "prompt", endpoint.base_url)
    return answers[0]


async def judge(client: ModelClient, endpoint: Endpoint, prompt: str, index: int,
                max_grade: int, top_k: int) -> Judgement:
    """Grade one document (see the module docstring for the steps)."""
    answer = await _ask(client, endpoint, prompt, top_k)
    calls = 1
    top = answer.top
    position = prompt
    likeliest = max(top, key=lambda c: c.logprob, default=None)
    if likeliest is not None and is_blank(likeliest.token):
        position = prompt + token_text(likeliest.token)
        top = (await _ask(client, endpoint, position, top_k)).top
        calls += 1
    digits = digit_mass(top, max_grade)
    if digits.mass >= MIN_DIGIT_MASS:
        grades: dict[int, float] = {}
        for grade, p in digits.grades.items():
            if needs_second_digit(grade, max_grade) and p / digits.mass >= MIN_PREFIX_SHARE:
                after = await _ask(client, endpoint, position + digits.spelling[grade], top_k)
                calls += 1
                for longer, share in continuation(grade, after.top, max_grade).items():
                    grades[longer] = grades.get(longer, 0.0) + p * share
            else:
                grades[grade] = grades.get(grade, 0.0) + p
        if sum(grades.values()) > 0:
            value = expected_grade(grades)
            note = (f"expected grade {value:.2f} of {max_grade} from the logprobs of the "
                    f"grade tokens (they held {digits.mass:.0%} of the answer's probability; "
                    "renormalised over them)")
            return Judgement(DocumentScore(index, value / max_grade, value, note=note),
                             calls=calls)
    if endpoint.kind == "ollama":
        # Ollama is asked through /api/generate for logprobs only; no text to fall back on.
        return Judgement(None, GradeError(
            f"the grade tokens held {digits.mass:.0%} of the answer's probability, and "
            "Ollama gives no text fallback here", ""), calls)
    text = await client.generate(endpoint, prompt, max_tokens=ANSWER_TOKENS, stop=["\n"])
    calls += 1
    try:
        grade = parse_grade(text, max_grade)
    except GradeError as failure:
        return Judgement(None, failure, calls)
    note = (f"grade {grade} of {max_grade} read from the answer {text!r} (the grade tokens "
            f"held {digits.mass:.0%} of the answer's probability, too little to use)")
    return Judgement(DocumentScore(index, grade / max_grade, float(grade), note=note),
                     calls=calls)


def _tally(endpoint: Endpoint, judgements: list[Judgement]) -> None:
    """Count readable and unreadable answers; a model that never answers readably is an error."""
    key = (endpoint.base_url, endpoint.model_id or "")
    seen = READABILITY.setdefault(key, Readability())
    for j in judgements:
        if j.verdict is not None:
            seen.readable += 1
        elif j.failure is not None:
            seen.unreadable.append(str(j.failure))
    if not seen.readable and len(seen.unreadable) >= FAILURES_BEFORE_ERROR:
        model = endpoint.model_id or "the model"
        raise ContractError(
            f"{model} on {endpoint.base_url} gave no readable grade in "
            f"{len(seen.unreadable)} answers ({'; '.join(seen.unreadable[:3])}); it does not "
            "follow the graded judge's format: choose another judge (--scorer yesno) or a "
            "model that follows instructions, or change the prompt ([plugins.graded] "
            "instruction or layout)", endpoint.base_url)


async def score(request: ScoreRequest) -> AsyncIterator[DocumentScore]:
    """Grade each document; yield the verdicts of each batch as the batch returns.

    A document whose answer is no grade gets no verdict (the host keeps its lexical place).
    """
    # here, not at the top: loading the plugin must not cost a --fast search httpx
    from slm_rerank.plugin_kit import gather_all

    max_grade, size, top_k, instruction, layout = _settings(request)
    endpoint, client = _needs(request)
    build = prompt_builder()
    documents = list(request.documents)
    for start in range(0, len(documents), size):
        batch = documents[start:start + size]
        prompts = [build(PromptParts(request.query, d.text, max_grade, request.profile,
                                     instruction, layout)) for d in batch]
        judgements = await gather_all([judge(client, endpoint, prompt, start + i, max_grade, top_k)
                                 for i, prompt in enumerate(prompts)])
        _tally(endpoint, judgements)
        for j in judgements:
            if j.verdict is not None:
                yield j.verdict


GRADED = Scorer(
    name="graded",
    description="the model grades each document 0..max (10); P = expected grade / max",
    score=score,
    needs_endpoint=True,
    options=(
        PluginOption("max_grade", DEFAULT_MAX_GRADE, "the top grade (1..100)"),
        PluginOption("batch", DEFAULT_BATCH, "documents judged concurrently"),
        PluginOption("top_k", DEFAULT_TOP_K, "candidates asked for each answer token"),
        PluginOption("instruction", None,
                     "the instruction, {max} standing for the top grade (default: English, "
                     "kept in the model family's layout)"),
        PluginOption("layout", None,
                     "the whole prompt, with {instruction}, {query}, {document}, {max}, "
                     "{high} (default: the family's layout, or a two-shot one for base "
                     "models)"),
    ),
    per_document=True,
)


@slm_rerank.hookimpl
def register_scorers(register: Callable[[Scorer], None]) -> None:
    register(GRADED)
