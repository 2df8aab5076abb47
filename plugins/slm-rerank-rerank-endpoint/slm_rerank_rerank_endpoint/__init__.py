"""Scorer ``rerank-endpoint``: a cross-encoder behind a rerank API scores every document.

One request carries the query and the first ``pool`` documents (the head in lexical
order) to the endpoint's rerank API (``wire`` lists the APIs and their shapes); the answer
gives one score per document. Scores outside [0, 1] are logits and are squashed with a
sigmoid (``scores`` option). Documents beyond the pool are not sent: each gets a
probability strictly below the lowest one sent (half of it), so one comparable order
comes out of one call.

Faults, as the host sees them:

- an answer that breaks the contract (not JSON, no results list, a count that differs
  from the documents sent, an index out of range or twice, a score that is not a finite
  number) and a refusal (4xx; 501 from a llama-server without ``--reranking``) raise
  ``ContractError``: a one-line error naming the endpoint and what to fix;
- a timeout, a refused connection or a 5xx raises ``TransientError``: nothing was
  yielded, so the documents keep their lexical order and the run says it degraded;
- a bad option, or no endpoint or client, is a ``ConfigError`` before any request.

``per_document`` is False: the demotion below the lowest score and the "auto" reading of
scores look at the whole answer, and a rerank API is built to take every document in one
request (spread over slots, a hosted API would be asked once per chunk). So the host sends
every document in one request to one server, and does not cache the verdicts.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any

import slm_rerank
from slm_rerank.errors import ConfigError, ContractError
from slm_rerank.plugin_kit import endpoint_url
from slm_rerank.registrations import DocumentScore, PluginOption, Scorer, ScoreRequest
from slm_rerank_rerank_endpoint.wire import (
    API_NAMES,
    SCORE_MODES,
    choose_api,
    read_scores,
    to_probabilities,
)

DEFAULT_POOL = 64
#: the least probability a document sent keeps when some were not sent, so that theirs
#: (half the lowest sent) is still a positive number below it
FLOOR = 1e-12

OPTIONS = (
    PluginOption("api", "auto",
                 f"which rerank API: {', '.join(API_NAMES)}; auto: Cohere or Jina by their "
                 "host, else /v1/rerank (llama.cpp, vLLM, and other Jina/Cohere-shaped APIs)"),
    PluginOption("path", None,
                 "the API's path below the endpoint URL (unset: the API's own, e.g. "
                 "/v1/rerank, /score, /v2/rerank)"),
    PluginOption("model", None,
                 "the model to ask (unset: the model the server reports; for Cohere "
                 "rerank-v3.5, for Jina jina-reranker-v2-base-multilingual)"),
    PluginOption("scores", "auto",
                 f"what the API's scores are: {', '.join(SCORE_MODES)}; auto squashes an "
                 "answer's scores with a sigmoid when any lies outside [0, 1]"),
    PluginOption("pool", DEFAULT_POOL,
                 "documents sent in the one request; the rest rank below the lowest sent"),
)


def _text_option(options: Mapping[str, Any], key: str, default: str | None) -> str | None:
    value = options.get(key, default)
    if value is not None and (not isinstance(value, str) or not value.strip()):
        raise ConfigError(f"[plugins.rerank-endpoint]: key '{key}' must be a non-empty "
                          f"string (got {value!r})")
    return value


def _pool(options: Mapping[str, Any]) -> int:
    value = options.get("pool", DEFAULT_POOL)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(f"[plugins.rerank-endpoint]: key 'pool' must be an integer of at "
                          f"least 1 (got {value!r})")
    return value


async def score(request: ScoreRequest) -> AsyncIterator[DocumentScore]:
    """Every document's P(relevant) from one call to the endpoint's rerank API."""
    options = request.options
    api = choose_api(_text_option(options, "api", "auto") or "auto",
                     request.endpoint.base_url if request.endpoint else "")
    path = _text_option(options, "path", None) or api.path
    if not path.startswith("/"):
        raise ConfigError(f"[plugins.rerank-endpoint]: key 'path' must start with '/' "
                          f"(got {path!r})")
    mode = _text_option(options, "scores", "auto") or "auto"
    pool = _pool(options)
    if not request.documents:
        return
    endpoint, client = request.endpoint, request.client
    if endpoint is None or client is None:
        raise ConfigError("scorer 'rerank-endpoint' was called without a model endpoint or "
                          "client; it needs a rerank server (-e URL)")
    model = _text_option(options, "model", None)
    if model is None:
        model = (endpoint.model_id if api.own_model else None) or api.default_model
    sent = request.documents[:pool]
    where = endpoint_url(endpoint, path)
    # Each distinct text is sent once: a server may score the same text differently by its
    # place in the batch (llama-server with --pooling rank did), and one text, one score.
    distinct = list(dict.fromkeys(d.text for d in sent))
    try:
        answer = await client.post_json(endpoint, path,
                                        api.body(request.query, distinct, model))
    except ContractError as exc:
        raise ContractError(f"{exc}; {api.hint}", endpoint.base_url) from exc
    by_text = dict(zip(distinct, read_scores(answer, api, len(distinct), where), strict=True))
    raw = [by_text[d.text] for d in sent]
    probabilities, squashed = to_probabilities(raw, mode, where)
    note = "a logit, squashed with a sigmoid" if squashed else None
    unsent = len(request.documents) - len(sent)
    if unsent:
        probabilities = [max(p, FLOOR) for p in probabilities]
    for i, (p, r) in enumerate(zip(probabilities, raw, strict=True)):
        yield DocumentScore(i, p, raw=r, note=note)
    demoted = min(probabilities) / 2 if unsent else 0.0
    for i in range(len(sent), len(request.documents)):
        yield DocumentScore(i, demoted, note=f"not sent: beyond the pool of {pool}")


RERANK_ENDPOINT = Scorer(
    name="rerank-endpoint",
    description=("a cross-encoder behind a rerank API (llama.cpp or vLLM /v1/rerank, vLLM "
                 "/score, Cohere, Jina) scores every document in one call"),
    score=score,
    needs_endpoint=True,
    options=OPTIONS,
    per_document=False,
)


@slm_rerank.hookimpl
def register_scorers(register: Callable[[Scorer], None]) -> None:
    register(RERANK_ENDPOINT)
