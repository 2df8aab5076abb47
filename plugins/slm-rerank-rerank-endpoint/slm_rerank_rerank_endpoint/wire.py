"""The rerank APIs this scorer speaks: where to post, what to send, how to read the answer.

Every API takes a query and a list of document strings and answers one score per document,
naming it by its position in the list sent:

- llama.cpp ``/v1/rerank`` (aliases ``/rerank``, ``/v1/reranking``; the server needs a
  reranker GGUF and ``--reranking --embedding --pooling rank``): ``{model?, query,
  documents, top_n?}`` -> ``{model, object, usage, results: [{index, relevance_score}]}``,
  sorted best first. A cross-encoder with a classification head (bge, jina) scores raw
  logits; a Qwen3-Reranker GGUF scores probabilities.
- vLLM ``/v1/rerank`` (also ``/rerank``, ``/v2/rerank``; Jina and Cohere compatible):
  ``{model?, query, documents, top_n?}`` -> ``{id, model, usage, results: [{index,
  document: {text}, relevance_score}]}``; probabilities unless the server was told not to
  apply the activation.
- vLLM ``/score``: ``{model?, text_1: query, text_2: [documents]}`` -> ``{id, object,
  created, model, data: [{index, object: "score", score}], usage}``.
- Cohere ``/v2/rerank``: ``{model, query, documents, top_n?}`` -> ``{id, results: [{index,
  relevance_score}], meta}``; probabilities.
- Jina ``/v1/rerank``: ``{model, query, documents, top_n?, return_documents?}`` ->
  ``{model, usage, results: [{index, document: {text}, relevance_score}]}``.

``top_n`` is never sent, so a valid answer has exactly one result per document.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from slm_rerank.errors import ConfigError, ContractError
from slm_rerank.plugin_kit import excerpt, sigmoid

#: The values of the ``api`` option; "auto" picks one from the endpoint's URL.
API_NAMES = ("auto", "llama.cpp", "vllm-rerank", "vllm-score", "cohere", "jina")
#: The values of the ``scores`` option.
SCORE_MODES = ("auto", "logits", "probabilities")

_SELF_HOSTED = ("llama-server serves /v1/rerank only with a reranker model (a cross-encoder "
                "GGUF such as bge-reranker-v2-m3) and --reranking --embedding --pooling rank; "
                "vLLM serves it for a cross-encoder model; for another API set "
                "[plugins.rerank-endpoint] api and path")
_HOSTED = ("check [plugins.rerank-endpoint] model (one of the service's rerank models) and "
           "the api key (SLM_API_KEY)")


@dataclass(frozen=True)
class Api:
    """One rerank API's spelling of the same question."""

    name: str
    path: str
    #: the answer's list of results, and the key of each result's score
    results_key: str = "results"
    score_key: str = "relevance_score"
    #: the model asked when [plugins.rerank-endpoint] model is unset and the endpoint
    #: reports none (a hosted API needs one)
    default_model: str | None = None
    #: whether the endpoint's own model id is the model to ask (self-hosted servers)
    own_model: bool = True
    #: what to check when the server refuses the request
    hint: str = _SELF_HOSTED

    def body(self, query: str, documents: Sequence[str], model: str | None) -> dict[str, Any]:
        if self.name == "vllm-score":
            body: dict[str, Any] = {"text_1": query, "text_2": list(documents)}
        else:
            body = {"query": query, "documents": list(documents)}
        if self.name == "jina":
            body["return_documents"] = False  # Jina echoes every document by default
        if model:
            body["model"] = model
        return body


APIS = {
    "llama.cpp": Api("llama.cpp", "/v1/rerank"),
    "vllm-rerank": Api("vllm-rerank", "/v1/rerank"),
    "vllm-score": Api("vllm-score", "/score", results_key="data", score_key="score"),
    # Defaults as the services document them; [plugins.rerank-endpoint] model overrides.
    "cohere": Api("cohere", "/v2/rerank", default_model="rerank-v3.5", own_model=False,
                  hint=_HOSTED),
    "jina": Api("jina", "/v1/rerank", default_model="jina-reranker-v2-base-multilingual",
                own_model=False, hint=_HOSTED),
    # Every /v1/rerank above answers results[].relevance_score: auto reads that shape.
    "auto": Api("auto", "/v1/rerank"),
}


def choose_api(name: str, base_url: str) -> Api:
    """The API ``name`` names; "auto" is Cohere or Jina by their hosts, else ``/v1/rerank``."""
    if name not in APIS:
        raise ConfigError(f"[plugins.rerank-endpoint]: key 'api' must be one of "
                          f"{', '.join(API_NAMES)} (got {name!r})")
    if name != "auto":
        return APIS[name]
    host = (urlsplit(base_url).hostname or "").lower()
    if host == "api.cohere.com" or host == "api.cohere.ai":
        return APIS["cohere"]
    if host == "api.jina.ai":
        return APIS["jina"]
    return APIS["auto"]


def read_scores(answer: Any, api: Api, sent: int, where: str) -> list[float]:
    """The score of each document sent, in the order sent; ``ContractError`` otherwise.

    The contract: ``answer[api.results_key]`` is a list with one result per document sent;
    every result's ``index`` is an integer in range, and no index comes twice (a duplicate
    is refused even where the count and the set of indices look complete); every score is
    a finite number.
    """
    results = answer.get(api.results_key) if isinstance(answer, dict) else None
    if not isinstance(results, list):
        raise ContractError(f"rerank endpoint {where} answered without a "
                            f"'{api.results_key}' list: {excerpt(answer)}; is it a rerank "
                            "API? (set [plugins.rerank-endpoint] api)")
    scores: dict[int, float] = {}
    for position, result in enumerate(results):
        index = result.get("index") if isinstance(result, dict) else None
        if not isinstance(index, int) or isinstance(index, bool):
            raise ContractError(f"rerank endpoint {where}: result {position} has no integer "
                                f"'index': {excerpt(result)}")
        if not 0 <= index < sent:
            raise ContractError(f"rerank endpoint {where}: result {position} names document "
                                f"{index}, but {sent} were sent (indices 0-{sent - 1})")
        if index in scores:
            raise ContractError(f"rerank endpoint {where}: document {index} is scored twice "
                                "(each index must come exactly once)")
        score = result.get(api.score_key)
        if not isinstance(score, (int, float)) or isinstance(score, bool):
            raise ContractError(f"rerank endpoint {where}: document {index} has no numeric "
                                f"'{api.score_key}': {excerpt(result)}")
        if not math.isfinite(score):
            raise ContractError(f"rerank endpoint {where}: document {index} has the score "
                                f"{score!r}; a score is a finite number")
        scores[index] = float(score)
    if len(scores) != sent:
        missing = [i for i in range(sent) if i not in scores]
        raise ContractError(f"rerank endpoint {where} answered {len(results)} results for "
                            f"{sent} documents sent (no score for "
                            f"{', '.join(map(str, missing[:10]))}"
                            f"{', …' if len(missing) > 10 else ''})")
    return [scores[i] for i in range(sent)]


def to_probabilities(scores: Sequence[float], mode: str, where: str) -> tuple[list[float], bool]:
    """P(relevant) per score, and whether they were read as logits (squashed by a sigmoid).

    "logits" squashes every score; "probabilities" takes them as they are and refuses one
    outside [0, 1]; "auto" squashes all of one answer's scores when any falls outside
    [0, 1], else takes them as probabilities. Within one answer the order never changes.
    """
    if mode not in SCORE_MODES:
        raise ConfigError(f"[plugins.rerank-endpoint]: key 'scores' must be one of "
                          f"{', '.join(SCORE_MODES)} (got {mode!r})")
    outside = [s for s in scores if not 0.0 <= s <= 1.0]
    if mode == "probabilities" and outside:
        raise ContractError(f"rerank endpoint {where} gave the score {outside[0]!r}, but "
                            "[plugins.rerank-endpoint] scores = \"probabilities\" expects "
                            "[0, 1]; set scores to \"auto\" or \"logits\"")
    if mode == "logits" or (mode == "auto" and outside):
        return [sigmoid(s) for s in scores], True
    return list(scores), False

