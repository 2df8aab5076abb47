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
from collections.abc import Awaitable, Mapping, Sequence
from typing import Any, TypeVar

import httpx

from slm_rerank.errors import ConfigError, ContractError, RequestRejected, TransientError
from slm_rerank.model.answers import (
    ACCEPT_ENCODING,
    NextToken,
    NotJSON,
    TokenChoice,
    Unreadable,
    as_int,
    decode_json,
    endpoint_url,
    excerpt,
    from_completions,
    from_native,
    one_per_prompt,
    read_body,
    top_choices,
)
from slm_rerank.registrations import Endpoint

#: TokenChoice and NextToken live in answers.py; scorers import them from here.
__all__ = ["ModelClient", "NextToken", "TokenChoice"]

T = TypeVar("T")


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
            return [from_native(endpoint, "/completion", item)
                    for item in one_per_prompt(endpoint, "/completion", answer, len(prompts))]
        if endpoint.kind == "openai-completions":
            body = {"prompt": prompts[0] if len(prompts) == 1 else prompts, "max_tokens": 1,
                    "logprobs": top_k, "temperature": 0, **_model(endpoint)}
            answer = await self._post(endpoint, "/v1/completions", body)
            return from_completions(endpoint, answer, len(prompts))
        if endpoint.kind == "ollama":
            return await gather_all([self._ollama_generate(endpoint, p, top_k) for p in prompts])
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
        return await gather_all([self._chat(endpoint, c, top_k) for c in conversations])

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
            answer = await self._post(endpoint, path, body, missing_ok=True,
                                      remedy="raise the timeout")
            if answer is None:
                continue
            tokens = answer.get("tokens") if isinstance(answer, dict) else None
            if not isinstance(tokens, list):
                raise ContractError(f"{endpoint_url(endpoint, path)} answered without a 'tokens' "
                                    "list; is the endpoint's kind right?", endpoint.base_url)
            given = [t.get("id") if isinstance(t, dict) else t for t in tokens]
            ids = [i for i in given if isinstance(i, int)]
            if len(ids) != len(given):
                raise ContractError(f"{endpoint_url(endpoint, path)} gave tokens that are not "
                                    f"integer ids: {excerpt(tokens)}", endpoint.base_url)
            # An empty list for non-empty text is a server that ignored our field names
            # (llama.cpp reads "content", vLLM "prompt"): try the next spelling.
            if ids or not text:
                return ids
        return None

    async def generate(self, endpoint: Endpoint, prompt: str, max_tokens: int = 32,
                       stop: Sequence[str] = (), grammar: str | None = None) -> str:
        """The greedy (temperature 0) continuation of a raw prompt, at most ``max_tokens``.

        A short generation, for a caller that needs words rather than a verdict (query
        expansion). llama.cpp's ``/completion`` answers ``content``; ``/v1/completions``
        answers ``choices[0].text``. ``grammar`` (GBNF) constrains the continuation on
        llama.cpp, which samples only tokens the grammar allows; other kinds have no such
        field, so there it is not sent and the caller must read the answer as strictly.
        """
        stops = list(stop)
        if endpoint.kind == "llama.cpp":
            path = "/completion"
            body: dict[str, Any] = {"prompt": prompt, "n_predict": max_tokens,
                                    "temperature": 0, "cache_prompt": True, "stop": stops}
            if grammar is not None:
                body["grammar"] = grammar
            answer = await self._post(endpoint, path, body, remedy=_GENERATE_REMEDY)
            text = answer.get("content") if isinstance(answer, dict) else None
        elif endpoint.kind == "openai-completions":
            path = "/v1/completions"
            body = {"prompt": prompt, "max_tokens": max_tokens, "temperature": 0,
                    **({"stop": stops} if stops else {}), **_model(endpoint)}
            answer = await self._post(endpoint, path, body, remedy=_GENERATE_REMEDY)
            choices = answer.get("choices") if isinstance(answer, dict) else None
            first = choices[0] if isinstance(choices, list) and choices else None
            text = first.get("text") if isinstance(first, dict) else None
        else:
            raise ConfigError(f"endpoint {endpoint.base_url} (kind {endpoint.kind!r}) cannot "
                              "continue a raw prompt here; serve the model with llama.cpp or "
                              "an OpenAI-compatible /v1/completions endpoint")
        if not isinstance(text, str):
            raise ContractError(f"{endpoint_url(endpoint, path)} answered without generated "
                                f"text: {excerpt(answer)}; is the endpoint's kind right?",
                                endpoint.base_url)
        return text

    async def post_json(self, endpoint: Endpoint, path: str, body: Mapping[str, Any]) -> Any:
        """POST ``body`` as JSON to ``path`` below the endpoint; the decoded answer.

        For a scorer that speaks an API of its own (``/v1/rerank``, ``/score``). Faults are
        mapped as for every other request: refused, timeout and 5xx raise ``TransientError``;
        an answer that is not JSON, a 4xx and a 501 raise ``ContractError``. A 501 (Not
        Implemented: llama-server without ``--reranking``) is permanent, unlike other 5xx:
        the server does not offer the feature, and asking again will not change that. The
        endpoint's ``api_key`` is sent as a bearer token, and its slots bound concurrency.
        """
        return await self._post(endpoint, path, dict(body))

    # --- the requests --------------------------------------------------------------------

    async def _ollama_generate(self, endpoint: Endpoint, prompt: str, top_k: int) -> NextToken:
        path = "/api/generate"
        body = {"model": _ollama_model(endpoint), "prompt": prompt, "raw": True,
                "stream": False, "logprobs": True, "top_logprobs": top_k,
                "options": {"num_predict": 1, "temperature": 0}}
        answer = await self._post(endpoint, path, body)
        where = endpoint_url(endpoint, path)
        positions = answer.get("logprobs") if isinstance(answer, dict) else None
        if not isinstance(positions, list) or not positions:
            raise ContractError(f"{where} answered without logprobs; Ollama before 0.12.11 "
                                "returns none: upgrade Ollama", endpoint.base_url)
        return NextToken(top=top_choices(endpoint, where, positions[0]),
                         prompt_tokens=as_int(answer.get("prompt_eval_count")))

    async def _chat(self, endpoint: Endpoint, messages: Sequence[Mapping[str, str]],
                    top_k: int) -> NextToken:
        path = "/v1/chat/completions"
        body = {"messages": [dict(m) for m in messages], "logprobs": True,
                "top_logprobs": top_k, "max_tokens": 1, "temperature": 0, **_model(endpoint)}
        if endpoint.kind == "ollama":
            body["model"] = _ollama_model(endpoint)
        answer = await self._post(endpoint, path, body)
        return from_completions(endpoint, answer, 1, path=path)[0]

    async def _post(self, endpoint: Endpoint, path: str, body: dict[str, Any],
                    missing_ok: bool = False,
                    remedy: str = "raise the timeout or score fewer documents") -> Any:
        """POST ``body`` as JSON and return the decoded answer; faults become our errors.

        The request as a whole (connecting, sending, the answer's last byte) must end within
        ``self.timeout``: httpx's own timeout bounds each read, and a server that sends a
        byte now and then never trips it. A wait for a free slot is not counted here: the
        caller's deadline (``scoring.collect``) covers queueing. ``remedy`` ends the timeout
        message: what the caller can do about a slow answer.

        With ``missing_ok``, an answer saying the server has no such endpoint (404, 405) or
        does not take this spelling of the request (400, 422) gives None.
        """
        url = endpoint_url(endpoint, path)
        async with self._gate(endpoint):
            try:
                response = await asyncio.wait_for(self._send(endpoint, url, body),
                                                  self.timeout)
            except (asyncio.TimeoutError, httpx.TimeoutException) as exc:
                raise TransientError(f"model server {url} did not answer within "
                                     f"{self.timeout:g} s; {remedy}",
                                     endpoint.base_url) from exc
        status = response.status_code
        if missing_ok and status in (400, 404, 405, 422):
            return None
        if 300 <= status < 400:
            raise _redirect_error(endpoint, url, response)
        if status >= 400:
            raise _status_error(endpoint, url, response)
        try:
            return decode_json(response.content)
        except NotJSON as exc:
            raise ContractError(f"model server {url} answered {status} with a body that is "
                                f"{exc}: {excerpt(response.text)}; is the endpoint's "
                                "kind right?", endpoint.base_url) from None

    async def _send(self, endpoint: Endpoint, url: str, body: dict[str, Any]
                    ) -> httpx.Response:
        """One POST, its answer read to the end within ``MAX_ANSWER_BYTES``."""
        headers = {"Accept-Encoding": ACCEPT_ENCODING}
        if endpoint.api_key:
            headers["Authorization"] = f"Bearer {endpoint.api_key}"
        try:
            async with self.http.stream("POST", url, json=body, headers=headers,
                                        timeout=self.timeout) as streamed:
                # counted decoded, a step at a time: a gzip bomb meets the cap, in time
                content = await read_body(streamed, MAX_ANSWER_BYTES)
                if content is None:
                    raise ContractError(
                        f"model server {url} sent more than "
                        f"{MAX_ANSWER_BYTES // 1_000_000} MB for one request; a "
                        "yes/no answer is a few kilobytes: is this a model server?",
                        endpoint.base_url)
        except Unreadable as exc:
            raise ContractError(f"model server {url} sent {exc}; is this a model server?",
                                endpoint.base_url) from None
        except (httpx.InvalidURL, httpx.UnsupportedProtocol) as exc:
            raise ConfigError(f"endpoint URL {excerpt(url)} is not a usable http(s) URL: "
                              f"{excerpt(_reason(exc))}") from exc
        except httpx.ConnectError as exc:
            raise TransientError(f"model server {url} refused the connection or could "
                                 f"not be reached ({_reason(exc)}); is it running?",
                                 endpoint.base_url) from exc
        except httpx.TimeoutException:
            raise  # _post says how long it waited
        except httpx.HTTPError as exc:
            raise TransientError(f"model server {url} failed mid-request: "
                                 f"{_reason(exc)}", endpoint.base_url) from exc
        # read to the end, within the cap: a plain response from here on
        # (the bytes are already decoded: their content-encoding no longer applies)
        kept = {k: v for k, v in streamed.headers.items()
                if k.lower() not in ("content-encoding", "content-length")}
        return httpx.Response(streamed.status_code, headers=kept, content=content,
                              request=streamed.request)

    def _gate(self, endpoint: Endpoint) -> asyncio.Semaphore:
        gate = self._gates.get(endpoint.base_url)
        if gate is None:
            gate = self._gates[endpoint.base_url] = asyncio.Semaphore(endpoint.slots)
        return gate


#: what to do about a generation that took too long: it is one short answer, not a batch
_GENERATE_REMEDY = "raise the timeout or ask for fewer tokens"

#: The most one answer may hold; top-K logprobs of one token for a batch are kilobytes.
MAX_ANSWER_BYTES = 16_000_000

# --- errors --------------------------------------------------------------------------------


def _status_error(endpoint: Endpoint, url: str, response: httpx.Response) -> Exception:
    status = response.status_code
    said = _server_message(response)
    if status == 503 and "loading" in said.lower():
        return TransientError(f"model server {url} is still loading its model (503); try "
                              "again in a moment", endpoint.base_url)
    if status == 501:
        # Not Implemented: the server lacks the feature (llama-server started with
        # --embedding answers /completion so, and one without --reranking /v1/rerank);
        # asking again will not change that, so it is permanent, unlike other 5xx.
        return ContractError(f"model server {url} answered HTTP 501 (Not Implemented): "
                             f"{said}", endpoint.base_url)
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
    return RequestRejected(f"model server {url} rejected the request with HTTP {status}: "
                           f"{said}", endpoint.base_url)


def _redirect_error(endpoint: Endpoint, url: str, response: httpx.Response) -> Exception:
    """A 3xx is not an answer: following it would send our prompts (and the api_key) to
    wherever it points, and reading its body as a verdict would cache a made-up score."""
    location = response.headers.get("location")
    where = f" to {excerpt(location)}" if location else " (without a Location)"
    return ContractError(f"model server {url} answered HTTP {response.status_code}, a "
                         f"redirect{where}; redirects are not followed: give the server's "
                         "own URL (-e URL)", endpoint.base_url)


def _server_message(response: httpx.Response) -> str:
    """The error text a server gave (``{"error": {"message"}}``, ``{"error": "..."}``, the
    body), as one line of at most a few hundred characters with control characters escaped:
    it is quoted inside our own one-line error."""
    try:
        body = decode_json(response.content)
    except NotJSON:
        body = None
    error = body.get("error") if isinstance(body, dict) else None
    if isinstance(error, dict) and isinstance(error.get("message"), str):
        return excerpt(error["message"], SERVER_MESSAGE_CHARS)
    if isinstance(error, str):
        return excerpt(error, SERVER_MESSAGE_CHARS)
    return excerpt(response.text, SERVER_MESSAGE_CHARS)


#: how much of a server's error text an error message quotes
SERVER_MESSAGE_CHARS = 300


# --- small pieces --------------------------------------------------------------------------


async def gather_all(coroutines: list[Awaitable[T]]) -> list[T]:
    """Run concurrently, results in order; the first failure cancels the rest, so that no
    request outlives a failed batch (or a deadline). For scorers too."""
    tasks = [asyncio.ensure_future(c) for c in coroutines]
    try:
        return list(await asyncio.gather(*tasks))
    except BaseException:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise


def _model(endpoint: Endpoint) -> dict[str, str]:
    return {"model": endpoint.model_id} if endpoint.model_id else {}


def _ollama_model(endpoint: Endpoint) -> str:
    if not endpoint.model_id:
        raise ConfigError(f"endpoint {endpoint.base_url} is Ollama, which needs a model "
                          "name; set the endpoint's model (see `ollama list`)")
    return endpoint.model_id


def _reason(exc: Exception) -> str:
    return str(exc) or type(exc).__name__


