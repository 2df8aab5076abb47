"""Scorer ``listwise``: the model orders the candidates itself, in one prompt per window.

One prompt holds the query and up to ``window`` candidates numbered from 0; the model
answers a JSON array of their numbers, best first (``answer.parse_ranking`` reads it
strictly and repairs only what has one reading). Longer lists are ranked in sliding
windows from the back to the front (``windows.plan``). The final rank r of n becomes
P = (n - r - 0.5) / n, with ``raw`` = r (``windows.probability`` says why).

Faults, as the host sees them:

- an answer that cannot be used keeps its window in the order it was sent; when no
  window's answer was usable nothing is yielded, so every candidate keeps the lexical
  order, and a ``TransientError`` gives the reason (the host reports it as degraded);
  when some were, every verdict is yielded, then the error names the windows kept as sent;
- a timeout, a refused connection or an error answer from the server (HTTP 400 for a
  prompt over the context, 5xx) yields nothing and raises ``TransientError``: the
  candidates keep the lexical order, and the caller never sees another exception;
- no endpoint, client or usable endpoint kind is a ``ConfigError``, before any request.

Nothing is yielded before the last window is ranked: a window can move any candidate, so
an early verdict could be wrong. A deadline that passes first keeps the lexical order.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Mapping
from typing import TYPE_CHECKING, Any

import slm_rerank
from slm_rerank.errors import ConfigError, ContractError, TransientError
from slm_rerank.registrations import (
    DocumentScore,
    Endpoint,
    PluginOption,
    Scorer,
    ScoreRequest,
)
from slm_rerank_listwise import prompt, windows
from slm_rerank_listwise.answer import Ranking, parse_ranking

if TYPE_CHECKING:
    from slm_rerank.plugin_kit import ModelClient

DEFAULT_WINDOW = 20
DEFAULT_STEP = 10
DEFAULT_DOC_CHARS = 600
#: answer tokens per candidate when ``max_tokens`` is 0: "12, " is up to 4 tokens
TOKENS_PER_CANDIDATE = 4

OPTIONS = (
    PluginOption("window", DEFAULT_WINDOW,
                 "candidates in one prompt; a longer list is ranked in sliding windows"),
    PluginOption("step", DEFAULT_STEP,
                 "how far each window slides towards the front (window - step candidates "
                 "overlap, and that many of the best reach the top from anywhere)"),
    PluginOption("multiplier", 0,
                 "judge top_k x multiplier candidates of the lexical head (at most "
                 "--rerank-top); 0 judges the whole head. Read by the host"),
    PluginOption("max_tokens", 0,
                 f"answer tokens per prompt; 0: {TOKENS_PER_CANDIDATE} per candidate + 8"),
    PluginOption("doc_chars", DEFAULT_DOC_CHARS,
                 "characters of each candidate in the prompt (fewer when the server's "
                 "context would not hold the window)"),
)


def _int_option(options: Mapping[str, Any], key: str, default: int, least: int) -> int:
    value = options.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
        raise ConfigError(f"[plugins.listwise]: key '{key}' must be an integer of at least "
                          f"{least} (got {value!r})")
    return value


def _needs(request: ScoreRequest) -> tuple[Endpoint, ModelClient]:
    if request.endpoint is None or request.client is None:
        missing = " or ".join(name for name, value in (("endpoint", request.endpoint),
                                                        ("client", request.client))
                              if value is None)
        raise ConfigError(f"scorer 'listwise' was called without a model {missing}; it needs "
                          "an endpoint (set endpoint or SLM_ENDPOINT)")
    if request.endpoint.kind not in ("llama.cpp", "openai-completions"):
        raise ConfigError(f"endpoint {request.endpoint.base_url} (kind "
                          f"{request.endpoint.kind!r}) cannot continue a raw prompt, which the "
                          "listwise scorer needs; serve the model with llama.cpp or an "
                          "OpenAI-compatible /v1/completions endpoint, or use --scorer yesno")
    return request.endpoint, request.client


#: times a window's prompt is measured and cut again before it is sent as it is
FIT_ATTEMPTS = 3


async def _fitted(client: ModelClient, endpoint: Endpoint, request: ScoreRequest,
                  texts: list[str], doc_chars: int, max_tokens: int) -> str:
    """The window's prompt, its candidates cut so that it fits the server's context.

    Sized first by an estimate of characters per token; when the server reports its
    context and can tokenize, the prompt is measured, and cut again by the measured ratio
    while it is over (dense code runs nearer 2.5 characters a token than 3).
    """
    ratio = prompt.CHARS_PER_TOKEN
    limit = endpoint.context_tokens
    for _ in range(FIT_ATTEMPTS):
        query, chars = prompt.budget(request.profile, request.query, len(texts), doc_chars,
                                     limit, max_tokens, ratio)
        text = prompt.render(request.profile, query, texts, chars)
        if not limit:
            return text
        try:
            tokens = await client.tokenize(endpoint, text)
        except ContractError:
            return text  # a server that tokenizes oddly: the estimate has to do
        if not tokens or len(tokens) + max_tokens + prompt.RESERVED_TOKENS <= limit:
            return text
        ratio = min(ratio, len(text) / len(tokens)) * 0.95
    return text


def _note(repairs: list[str], kept: list[str]) -> str | None:
    parts = [f"listwise: repaired the answer: {r}" for r in repairs]
    parts += [f"listwise: {k}; kept the input order there" for k in kept]
    return "; ".join(parts) or None


async def score(request: ScoreRequest) -> AsyncIterator[DocumentScore]:
    """Rank every document of the request in sliding windows, then yield one verdict each."""
    endpoint, client = _needs(request)
    size = _int_option(request.options, "window", DEFAULT_WINDOW, 2)
    step = _int_option(request.options, "step", DEFAULT_STEP, 1)
    if step > size:
        raise ConfigError(f"[plugins.listwise]: key 'step' ({step}) is larger than 'window' "
                          f"({size}): candidates between windows would never be judged")
    doc_chars = _int_option(request.options, "doc_chars", DEFAULT_DOC_CHARS,
                            prompt.MIN_CANDIDATE_CHARS)
    asked_tokens = _int_option(request.options, "max_tokens", 0, 0)
    texts = [d.text for d in request.documents]
    n = len(texts)
    order = list(range(n))
    windows_ranked = windows.plan(n, size, step)
    notes: dict[int, tuple[list[str], list[str]]] = {i: ([], []) for i in range(n)}
    unusable: list[str] = []
    stops = ("\n", *(request.profile.stop if request.profile and request.profile.chat else ()))
    for k, (start, end) in enumerate(windows_ranked, 1):
        where = (f"window {k} of {len(windows_ranked)}" if len(windows_ranked) > 1
                 else "the answer")
        members = order[start:end]
        count = len(members)
        max_tokens = asked_tokens or TOKENS_PER_CANDIDATE * count + 8
        try:
            text = await _fitted(client, endpoint, request, [texts[i] for i in members],
                                 doc_chars, max_tokens)
            answer = await client.generate(endpoint, text, max_tokens=max_tokens, stop=stops)
        except (TransientError, ContractError) as exc:
            # An error answer is an API error like a timeout: the caller gets the lexical
            # order and the reason, never an exception of ours.
            raise TransientError(f"listwise: {endpoint.base_url} failed on {where}: {exc}; "
                                 "kept the input order", endpoint.base_url) from exc
        ranking: Ranking = parse_ranking(prompt.ANSWER_CUE + answer, count)
        if ranking.order is None:
            said = prompt.ANSWER_CUE + answer.strip()
            why = f"{where} was unusable ({ranking.problem}: {said[:80]!r})"
            unusable.append(why)
            for i in members:
                notes[i][1].append(why)
            continue
        for i in members:
            notes[i][0].extend(f"{r} ({where})" if len(windows_ranked) > 1 else r
                               for r in ranking.repairs)
        windows.reorder(order, start, end, ranking.order)
    if unusable and len(unusable) == len(windows_ranked):
        raise TransientError(f"listwise: {'; '.join(unusable)}; kept the input order",
                             endpoint.base_url)
    for rank, index in enumerate(order):
        repairs, kept = notes[index]
        yield DocumentScore(index, windows.probability(rank, n), float(rank),
                            note=_note(repairs, kept))
    if unusable:
        raise TransientError(f"listwise: {'; '.join(unusable)}; those windows kept the order "
                             "they were sent in", endpoint.base_url)


LISTWISE = Scorer(
    name="listwise",
    description=("the model orders the candidates in one prompt (sliding windows over long "
                 "lists); P from the final rank"),
    score=score,
    needs_endpoint=True,
    options=OPTIONS,
    per_document=False,
)


@slm_rerank.hookimpl
def register_scorers(register: Callable[[Scorer], None]) -> None:
    register(LISTWISE)
