"""Ask a model server for the top-K logprobs of the next token, whatever server it is.

One ``ModelClient`` per run holds one pooled keep-alive ``httpx.AsyncClient`` and a
semaphore per server (``Endpoint.slots`` requests in flight at most). Answers are parsed by
key, not by server name: llama.cpp (current and legacy), vLLM, llama-cpp-python and Ollama
spell the same facts differently (see WIRE.md). Every fault leaves as ``TransientError``
(may pass: refused, timeout, 5xx, still loading) or ``ContractError`` (the answer cannot be
used), each naming the URL; no httpx, JSON or key error escapes.
"""

from __future__ import annotations

import asyncio
import json
import math
from collections.abc import Awaitable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import httpx

from slm_rerank.errors import ConfigError, ContractError, TransientError
from slm_rerank.registrations import Endpoint

T = TypeVar("T")


@dataclass(frozen=True)
class TokenChoice:
    """One candidate token and its natural-log probability."""

    #: the token's text as the server reports it (a leading space is part of it)
    token: str
    logprob: float
    id: int | None = None


@dataclass(frozen=True)
class NextToken:
    """The top-K candidates for the first generated token of one prompt."""

    top: tuple[TokenChoice, ...]
    #: tokens in the prompt (llama.cpp ``tokens_evaluated``, OpenAI ``usage.prompt_tokens``)
    prompt_tokens: int | None = None
    #: prompt tokens taken from the server's prompt cache (llama.cpp ``timings.cache_n``;
    #: not ``tokens_cached``, which counts the whole prompt held in the slot)
    cached_tokens: int | None = None


class ModelClient:
    """One pooled keep-alive HTTP client for a run; async, safe to share across tasks."""

    def __init__(self, timeout: float = 30.0, http: httpx.AsyncClient | None = None) -> None:
        self.timeout = timeout
        self._owns_http = http is None
        self.http = http if http is not None else httpx.AsyncClient(timeout=timeout)
        self._gates: dict[str, asyncio.Semaphore] = {}

    async def aclose(self) -> None:
        if self._owns_http:
            await self.http.aclose()

    async def __aenter__(self) -> ModelClient:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    # --- asking for the next token -------------------------------------------------------

    async def next_token(self, endpoint: Endpoint, prompts: Sequence[str], top_k: int = 20,
                         stop: Sequence[str] = ()) -> list[NextToken]:
        """The top-``top_k`` candidates for the next token of each raw prompt, in order.

        ``stop`` is accepted for callers that carry a profile's stop strings, but is not
        sent: one token is generated, so a stop string cannot shorten the answer, and
        llama.cpp drops the probabilities of a token that matched one.
        """
        del stop
        prompts = list(prompts)
        if not prompts:
            return []
        if endpoint.kind == "llama.cpp":
            body = {"prompt": prompts[0] if len(prompts) == 1 else prompts, "n_predict": 1,
                    "n_probs": top_k, "temperature": 0, "cache_prompt": True}
            answer = await self._post(endpoint, "/completion", body)
            return [_from_native(endpoint, "/completion", item)
                    for item in _one_per_prompt(endpoint, "/completion", answer, len(prompts))]
        if endpoint.kind == "openai-completions":
            body = {"prompt": prompts[0] if len(prompts) == 1 else prompts, "max_tokens": 1,
                    "logprobs": top_k, "temperature": 0, **_model(endpoint)}
            answer = await self._post(endpoint, "/v1/completions", body)
            return _from_completions(endpoint, answer, len(prompts))
        if endpoint.kind == "ollama":
            return await _all([self._ollama_generate(endpoint, p, top_k) for p in prompts])
        raise ConfigError(f"endpoint {endpoint.base_url} is a chat endpoint (kind "
                          f"{endpoint.kind!r}): it takes messages, not raw prompts; use a "
                          "profile with a chat layout, or set the endpoint's kind")

    async def next_token_chat(self, endpoint: Endpoint,
                              conversations: Sequence[Sequence[Mapping[str, str]]],
                              top_k: int = 20) -> list[NextToken]:
        """The top-``top_k`` candidates for the first answer token of each conversation.

        Real messages go to ``/v1/chat/completions`` (llama.cpp, vLLM and Ollama all serve
        it), one request per conversation, run concurrently up to the server's slots.
        """
        return await _all([self._chat(endpoint, c, top_k) for c in conversations])

    async def tokenize(self, endpoint: Endpoint, text: str) -> list[int] | None:
        """The token ids of ``text`` without special tokens, or None when the server can't.

        Tokenizing is an optimisation (matching answer tokens by id); callers fall back to
        matching token text, so a server without a tokenize endpoint gives None.
        """
        if endpoint.kind == "ollama":
            return None  # Ollama has no tokenize endpoint
        llama_cpp = ("/tokenize", {"content": text, "add_special": False})
        if endpoint.kind == "llama.cpp":
            attempts = [llama_cpp]
        else:  # whichever OpenAI-compatible server this is: vLLM, llama.cpp, llama-cpp-python
            attempts = [("/tokenize", {"prompt": text, "add_special_tokens": False,
                                       **_model(endpoint)}),
                        llama_cpp, ("/extras/tokenize", {"input": text})]
        for path, body in attempts:
            answer = await self._post(endpoint, path, body, missing_ok=True)
            if answer is None:
                continue
            tokens = answer.get("tokens") if isinstance(answer, dict) else None
            if not isinstance(tokens, list):
                raise ContractError(f"{_url(endpoint, path)} answered without a 'tokens' "
                                    "list; is the endpoint's kind right?", endpoint.base_url)
            ids = [t.get("id") if isinstance(t, dict) else t for t in tokens]
            if not all(isinstance(i, int) for i in ids):
                raise ContractError(f"{_url(endpoint, path)} gave tokens that are not "
                                    f"integer ids: {_excerpt(tokens)}", endpoint.base_url)
            # An empty list for non-empty text is a server that ignored our field names
            # (llama.cpp reads "content", vLLM "prompt"): try the next spelling.
            if ids or not text:
                return ids
        return None

    # --- the requests --------------------------------------------------------------------

    async def _ollama_generate(self, endpoint: Endpoint, prompt: str, top_k: int) -> NextToken:
        path = "/api/generate"
        body = {"model": _ollama_model(endpoint), "prompt": prompt, "raw": True,
                "stream": False, "logprobs": True, "top_logprobs": top_k,
                "options": {"num_predict": 1, "temperature": 0}}
        answer = await self._post(endpoint, path, body)
        where = _url(endpoint, path)
        positions = answer.get("logprobs") if isinstance(answer, dict) else None
        if not isinstance(positions, list) or not positions:
            raise ContractError(f"{where} answered without logprobs; Ollama before 0.12.11 "
                                "returns none: upgrade Ollama", endpoint.base_url)
        return NextToken(top=_choices(endpoint, where, positions[0]),
                         prompt_tokens=_int(answer.get("prompt_eval_count")))

    async def _chat(self, endpoint: Endpoint, messages: Sequence[Mapping[str, str]],
                    top_k: int) -> NextToken:
        path = "/v1/chat/completions"
        body = {"messages": [dict(m) for m in messages], "logprobs": True,
                "top_logprobs": top_k, "max_tokens": 1, "temperature": 0, **_model(endpoint)}
        if endpoint.kind == "ollama":
            body["model"] = _ollama_model(endpoint)
        answer = await self._post(endpoint, path, body)
        return _from_completions(endpoint, answer, 1, path=path)[0]

    async def _post(self, endpoint: Endpoint, path: str, body: dict[str, Any],
                    missing_ok: bool = False) -> Any:
        """POST ``body`` as JSON and return the decoded answer; faults become our errors.

        With ``missing_ok``, an answer saying the server has no such endpoint (404, 405) or
        does not take this spelling of the request (400, 422) gives None.
        """
        url = _url(endpoint, path)
        headers = {"Authorization": f"Bearer {endpoint.api_key}"} if endpoint.api_key else {}
        async with self._gate(endpoint):
            try:
                async with self.http.stream("POST", url, json=body, headers=headers,
                                            timeout=self.timeout) as streamed:
                    chunks, size = [], 0
                    async for chunk in streamed.aiter_bytes():
                        size += len(chunk)
                        if size > MAX_ANSWER_BYTES:
                            raise ContractError(
                                f"model server {url} sent more than "
                                f"{MAX_ANSWER_BYTES // 1_000_000} MB for one request; a "
                                "yes/no answer is a few kilobytes: is this a model server?",
                                endpoint.base_url)
                        chunks.append(chunk)
                # read to the end, within the cap: a plain response from here on
                # (the bytes are already decoded: their content-encoding no longer applies)
                kept = {k: v for k, v in streamed.headers.items()
                        if k.lower() not in ("content-encoding", "content-length")}
                response = httpx.Response(streamed.status_code, headers=kept,
                                          content=b"".join(chunks), request=streamed.request)
            except (httpx.InvalidURL, httpx.UnsupportedProtocol) as exc:
                raise ConfigError(f"endpoint URL {url} is not a usable http(s) URL: "
                                  f"{_reason(exc)}") from exc
            except httpx.ConnectError as exc:
                raise TransientError(f"model server {url} refused the connection or could "
                                     f"not be reached ({_reason(exc)}); is it running?",
                                     endpoint.base_url) from exc
            except httpx.TimeoutException as exc:
                raise TransientError(f"model server {url} did not answer within "
                                     f"{self.timeout:g} s; raise the timeout or score fewer "
                                     "documents", endpoint.base_url) from exc
            except httpx.HTTPError as exc:
                raise TransientError(f"model server {url} failed mid-request: "
                                     f"{_reason(exc)}", endpoint.base_url) from exc
        status = response.status_code
        if missing_ok and status in (400, 404, 405, 422):
            return None
        if status >= 400:
            raise _status_error(endpoint, url, response)
        try:
            return response.json()
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise ContractError(f"model server {url} answered {status} with a body that is "
                                f"not JSON: {_excerpt(response.text)}; is the endpoint's "
                                "kind right?", endpoint.base_url) from exc

    def _gate(self, endpoint: Endpoint) -> asyncio.Semaphore:
        gate = self._gates.get(endpoint.base_url)
        if gate is None:
            gate = self._gates[endpoint.base_url] = asyncio.Semaphore(endpoint.slots)
        return gate


#: The most one answer may hold; top-K logprobs of one token for a batch are kilobytes.
MAX_ANSWER_BYTES = 16_000_000


# --- reading answers -----------------------------------------------------------------------


def _one_per_prompt(endpoint: Endpoint, path: str, answer: Any, count: int) -> list[Any]:
    """The per-prompt objects of an answer: one object, or an array of them in order."""
    items = answer if isinstance(answer, list) else [answer]
    if len(items) != count:
        raise ContractError(f"{_url(endpoint, path)} answered {len(items)} results for "
                            f"{count} prompts; does this server take an array of prompts?",
                            endpoint.base_url)
    if all(isinstance(i, dict) and isinstance(i.get("index"), int) for i in items):
        _check_indices(endpoint, path, [i["index"] for i in items])
        items = sorted(items, key=lambda i: i["index"])  # llama.cpp tags array results
    return items


def _from_native(endpoint: Endpoint, path: str, item: Any) -> NextToken:
    """One llama.cpp ``/completion`` result (current, post-sampling or legacy shape)."""
    where = _url(endpoint, path)
    positions = item.get("completion_probabilities") if isinstance(item, dict) else None
    if not isinstance(positions, list) or not positions:
        raise ContractError(f"{where} answered without completion_probabilities; the server "
                            "ignored n_probs (is it llama.cpp's llama-server?)",
                            endpoint.base_url)
    timings = item.get("timings") if isinstance(item.get("timings"), dict) else {}
    return NextToken(top=_choices(endpoint, where, positions[0]),
                     prompt_tokens=_int(item.get("tokens_evaluated")),
                     cached_tokens=_int(timings.get("cache_n")))


def _from_completions(endpoint: Endpoint, answer: Any, count: int,
                      path: str = "/v1/completions") -> list[NextToken]:
    """An OpenAI-style answer: ``choices`` in the legacy or the chat logprobs shape.

    llama.cpp answers an array of prompts with an array of whole answers, vLLM with one
    answer holding a choice per prompt; both are read here.
    """
    where = _url(endpoint, path)
    answers = answer if isinstance(answer, list) else [answer]
    choices: list[tuple[Any, dict[str, Any]]] = []  # (choice, the answer it came in)
    for one in answers:
        listed = one.get("choices") if isinstance(one, dict) else None
        if not isinstance(listed, list):
            raise ContractError(f"{where} answered without a 'choices' list: "
                                f"{_excerpt(one)}", endpoint.base_url)
        choices.extend((c, one) for c in listed)
    if len(choices) != count:
        raise ContractError(f"{where} answered {len(choices)} choices for {count} prompts",
                            endpoint.base_url)
    if len(answers) == 1 and all(isinstance(c, dict) and isinstance(c.get("index"), int)
                                 for c, _ in choices):
        _check_indices(endpoint, path, [c["index"] for c, _ in choices])
        choices.sort(key=lambda pair: pair[0]["index"])
    results = []
    for choice, one in choices:
        logprobs = choice.get("logprobs") if isinstance(choice, dict) else None
        results.append(NextToken(top=_openai_top(endpoint, where, logprobs),
                                 **_usage(one, shared=len(choices) > len(answers))))
    return results


def _openai_top(endpoint: Endpoint, where: str, logprobs: Any) -> tuple[TokenChoice, ...]:
    if isinstance(logprobs, dict):
        content = logprobs.get("content")
        if isinstance(content, list) and content:  # chat shape (llama.cpp, chat endpoints)
            return _choices(endpoint, where, content[0])
        legacy = logprobs.get("top_logprobs")
        if isinstance(legacy, list) and legacy and isinstance(legacy[0], dict):
            # legacy OpenAI shape (vLLM, llama-cpp-python): {token: logprob}, unordered
            pairs = sorted(((str(t), _logprob(lp, endpoint, where))
                            for t, lp in legacy[0].items()), key=lambda kv: -kv[1])
            return tuple(TokenChoice(t, lp) for t, lp in pairs)
    raise ContractError(f"{where} answered without top logprobs for the first token "
                        f"(got logprobs={_excerpt(logprobs)}); the server ignores the "
                        "logprobs request (Ollama's /v1/completions drops them: use kind "
                        "'ollama')", endpoint.base_url)


def _choices(endpoint: Endpoint, where: str, position: Any) -> tuple[TokenChoice, ...]:
    """The candidates at one position: ``top_logprobs`` / ``top_probs`` / ``probs``."""
    listed = None
    if isinstance(position, dict):
        for key in ("top_logprobs", "top_probs", "probs"):
            if isinstance(position.get(key), list):
                listed = position[key]
                break
    if not listed:
        raise ContractError(f"{where} answered without top logprobs for the first token "
                            f"(got {_excerpt(position)})", endpoint.base_url)
    out = []
    for entry in listed:
        token = entry.get("token", entry.get("tok_str")) if isinstance(entry, dict) else None
        if not isinstance(token, str):
            raise ContractError(f"{where} listed a candidate without its token text: "
                                f"{_excerpt(entry)}", endpoint.base_url)
        if "logprob" in entry:
            logprob = _logprob(entry["logprob"], endpoint, where)
        elif "prob" in entry:  # post_sampling_probs and legacy builds give probabilities
            prob = _float(entry["prob"], endpoint, where)
            if not 0.0 <= prob <= 1.0 + _ROUNDING:
                raise ContractError(f"{where} gave a probability outside [0, 1]: "
                                    f"{_excerpt(entry)}", endpoint.base_url)
            logprob = math.log(prob) if prob > 0 else -math.inf
        else:
            raise ContractError(f"{where} listed a candidate without logprob or prob: "
                                f"{_excerpt(entry)}", endpoint.base_url)
        out.append(TokenChoice(token, logprob, _int(entry.get("id"))))
    return tuple(out)


def _usage(answer: dict[str, Any], shared: bool) -> dict[str, int | None]:
    """Prompt and cached token counts, unless one answer's usage covers several prompts."""
    if shared:
        return {}
    usage = answer.get("usage") if isinstance(answer.get("usage"), dict) else {}
    timings = answer.get("timings") if isinstance(answer.get("timings"), dict) else {}
    details = usage.get("prompt_tokens_details")
    cached = _int(timings.get("cache_n"))
    if cached is None and isinstance(details, dict):
        cached = _int(details.get("cached_tokens"))
    return {"prompt_tokens": _int(usage.get("prompt_tokens")), "cached_tokens": cached}


def _status_error(endpoint: Endpoint, url: str, response: httpx.Response) -> Exception:
    status = response.status_code
    said = _server_message(response)
    if status == 503 and "loading" in said.lower():
        return TransientError(f"model server {url} is still loading its model (503); try "
                              "again in a moment", endpoint.base_url)
    if status >= 500 or status in (408, 429):
        return TransientError(f"model server {url} failed with HTTP {status}: {said}",
                              endpoint.base_url)
    if status in (401, 403):
        hint = "set the endpoint's api_key" if not endpoint.api_key else "check its api_key"
        return ContractError(f"model server {url} refused us with HTTP {status} ({said}); "
                             f"{hint}", endpoint.base_url)
    if status in (404, 405):
        return ContractError(f"model server {url} has no such endpoint (HTTP {status}); is "
                             f"the endpoint's kind ({endpoint.kind}) right?", endpoint.base_url)
    return ContractError(f"model server {url} rejected the request with HTTP {status}: "
                         f"{said}", endpoint.base_url)


def _server_message(response: httpx.Response) -> str:
    """The error text a server gave: ``{"error": {"message"}}``, ``{"error": "..."}``, text."""
    try:
        error = response.json().get("error")
    except (ValueError, AttributeError):
        error = None
    if isinstance(error, dict) and isinstance(error.get("message"), str):
        return error["message"]
    if isinstance(error, str):
        return error
    return _excerpt(response.text)


# --- small pieces --------------------------------------------------------------------------


async def _all(coroutines: list[Awaitable[T]]) -> list[T]:
    """Run concurrently, results in order; the first failure cancels the rest."""
    tasks = [asyncio.ensure_future(c) for c in coroutines]
    try:
        return list(await asyncio.gather(*tasks))
    except BaseException:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise


def _url(endpoint: Endpoint, path: str) -> str:
    return endpoint.base_url.rstrip("/") + path


def _model(endpoint: Endpoint) -> dict[str, str]:
    return {"model": endpoint.model_id} if endpoint.model_id else {}


def _ollama_model(endpoint: Endpoint) -> str:
    if not endpoint.model_id:
        raise ConfigError(f"endpoint {endpoint.base_url} is Ollama, which needs a model "
                          "name; set the endpoint's model (see `ollama list`)")
    return endpoint.model_id


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _float(value: Any, endpoint: Endpoint, where: str) -> float:
    # NaN is refused here: Python's json reads a bare NaN, and a NaN candidate would be
    # dropped as "zero probability" downstream, turning a broken answer into a verdict.
    if isinstance(value, (int, float)) and not isinstance(value, bool) and value == value:
        return float(value)
    raise ContractError(f"{where} gave a log probability that is not a number: "
                        f"{_excerpt(value)}", endpoint.base_url)


#: how far above 0 a logprob (above 1 a probability) may be from float rounding alone
_ROUNDING = 1e-4


def _logprob(value: Any, endpoint: Endpoint, where: str) -> float:
    """A log probability: a number no greater than 0 (-inf, probability zero, is one)."""
    logprob = _float(value, endpoint, where)
    if logprob > _ROUNDING:
        raise ContractError(f"{where} gave a log probability above 0 ({logprob!r}): a "
                            "probability above 1, so the answer cannot be read",
                            endpoint.base_url)
    return min(logprob, 0.0)


def _check_indices(endpoint: Endpoint, path: str, indices: list[int]) -> None:
    """Indexed results must number the prompts 0..n-1, each once, or answers get swapped."""
    if sorted(indices) != list(range(len(indices))):
        raise ContractError(f"{_url(endpoint, path)} numbered its {len(indices)} results "
                            f"{_excerpt(indices)}, not 0..{len(indices) - 1} each once; "
                            "its answers cannot be matched to the prompts", endpoint.base_url)


def _reason(exc: Exception) -> str:
    return str(exc) or type(exc).__name__


def _excerpt(value: Any, limit: int = 160) -> str:
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit] + "…"
