"""Reading a model server's answer: the top-K candidates of one token, by key.

llama.cpp (current, post-sampling and legacy shapes), vLLM, llama-cpp-python and Ollama
spell the same facts differently (WIRE.md); these functions accept every spelling and
refuse, as a ``ContractError`` naming the URL, an answer that does not hold what was asked
for: a missing field, a NaN or positive log probability, results that cannot be matched to
their prompts.
"""

from __future__ import annotations

import json
import math
import zlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from slm_rerank.errors import ContractError
from slm_rerank.registrations import Endpoint
from slm_rerank.report import visible


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


def one_per_prompt(endpoint: Endpoint, path: str, answer: Any, count: int) -> list[Any]:
    """The per-prompt objects of an answer: one object, or an array of them in order."""
    items = answer if isinstance(answer, list) else [answer]
    if len(items) != count:
        raise ContractError(f"{endpoint_url(endpoint, path)} answered {len(items)} results for "
                            f"{count} prompts; does this server take an array of prompts?",
                            endpoint.base_url)
    if all(isinstance(i, dict) and isinstance(i.get("index"), int) for i in items):
        _check_indices(endpoint, path, [i["index"] for i in items])
        items = sorted(items, key=lambda i: i["index"])  # llama.cpp tags array results
    return items


def from_native(endpoint: Endpoint, path: str, item: Any) -> NextToken:
    """One llama.cpp ``/completion`` result (current, post-sampling or legacy shape)."""
    where = endpoint_url(endpoint, path)
    positions = item.get("completion_probabilities") if isinstance(item, dict) else None
    if not isinstance(positions, list) or not positions:
        raise ContractError(f"{where} answered without completion_probabilities; the server "
                            "ignored n_probs (is it llama.cpp's llama-server?)",
                            endpoint.base_url)
    timings = item.get("timings") if isinstance(item.get("timings"), dict) else {}
    return NextToken(top=top_choices(endpoint, where, positions[0]),
                     prompt_tokens=as_int(item.get("tokens_evaluated")),
                     cached_tokens=as_int(timings.get("cache_n")))


def from_completions(endpoint: Endpoint, answer: Any, count: int,
                      path: str = "/v1/completions") -> list[NextToken]:
    """An OpenAI-style answer: ``choices`` in the legacy or the chat logprobs shape.

    llama.cpp answers an array of prompts with an array of whole answers, vLLM with one
    answer holding a choice per prompt; both are read here.
    """
    where = endpoint_url(endpoint, path)
    answers = answer if isinstance(answer, list) else [answer]
    choices: list[tuple[Any, dict[str, Any]]] = []  # (choice, the answer it came in)
    for one in answers:
        listed = one.get("choices") if isinstance(one, dict) else None
        if not isinstance(listed, list):
            raise ContractError(f"{where} answered without a 'choices' list: "
                                f"{excerpt(one)}", endpoint.base_url)
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
            return top_choices(endpoint, where, content[0])
        legacy = logprobs.get("top_logprobs")
        if isinstance(legacy, list) and legacy and isinstance(legacy[0], dict):
            # legacy OpenAI shape (vLLM, llama-cpp-python): {token: logprob}, unordered
            pairs = sorted(((str(t), _logprob(lp, endpoint, where))
                            for t, lp in legacy[0].items()), key=lambda kv: -kv[1])
            return tuple(TokenChoice(t, lp) for t, lp in pairs)
    raise ContractError(f"{where} answered without top logprobs for the first token "
                        f"(got logprobs={excerpt(logprobs)}); the server ignores the "
                        "logprobs request (Ollama's /v1/completions drops them: use kind "
                        "'ollama')", endpoint.base_url)


def top_choices(endpoint: Endpoint, where: str, position: Any) -> tuple[TokenChoice, ...]:
    """The candidates at one position: ``top_logprobs`` / ``top_probs`` / ``probs``."""
    listed = None
    if isinstance(position, dict):
        for key in ("top_logprobs", "top_probs", "probs"):
            if isinstance(position.get(key), list):
                listed = position[key]
                break
    if not listed:
        raise ContractError(f"{where} answered without top logprobs for the first token "
                            f"(got {excerpt(position)})", endpoint.base_url)
    out = []
    for entry in listed:
        token = entry.get("token", entry.get("tok_str")) if isinstance(entry, dict) else None
        if not isinstance(token, str):
            raise ContractError(f"{where} listed a candidate without its token text: "
                                f"{excerpt(entry)}", endpoint.base_url)
        if "logprob" in entry:
            logprob = _logprob(entry["logprob"], endpoint, where)
        elif "prob" in entry:  # post_sampling_probs and legacy builds give probabilities
            prob = _float(entry["prob"], endpoint, where)
            if not 0.0 <= prob <= 1.0 + _ROUNDING:
                raise ContractError(f"{where} gave a probability outside [0, 1]: "
                                    f"{excerpt(entry)}", endpoint.base_url)
            logprob = math.log(prob) if prob > 0 else -math.inf
        else:
            raise ContractError(f"{where} listed a candidate without logprob or prob: "
                                f"{excerpt(entry)}", endpoint.base_url)
        out.append(TokenChoice(token, logprob, as_int(entry.get("id"))))
    return tuple(out)


def _usage(answer: dict[str, Any], shared: bool) -> dict[str, int | None]:
    """Prompt and cached token counts, unless one answer's usage covers several prompts."""
    if shared:
        return {}
    usage, timings = answer.get("usage"), answer.get("timings")
    if not isinstance(usage, dict):
        usage = {}
    if not isinstance(timings, dict):
        timings = {}
    details = usage.get("prompt_tokens_details")
    cached = as_int(timings.get("cache_n"))
    if cached is None and isinstance(details, dict):
        cached = as_int(details.get("cached_tokens"))
    return {"prompt_tokens": as_int(usage.get("prompt_tokens")), "cached_tokens": cached}


def endpoint_url(endpoint: Endpoint, path: str) -> str:
    return endpoint.base_url.rstrip("/") + path


#: the content codings a body may come in; asked for as Accept-Encoding, the rest refused
ACCEPT_ENCODING = "gzip, deflate"
#: decoded bytes one decompression step may produce before the loop gets a turn: a gzip
#: bomb expands 64 KB read from the network to 64 MB, a quarter second of work done in one
#: call, which no deadline could interrupt and which the size cap would only see after it
_DECODE_STEP = 1 << 20


class Unreadable(ValueError):
    """A body in a content coding we did not ask for, or that does not decompress."""


async def read_body(response: Any, cap: int) -> bytes | None:
    """An httpx streamed response's body decoded, or None past ``cap`` decoded bytes (see
    ``read_capped``); Unreadable for a coding not asked for or a body that won't inflate."""
    if response.is_stream_consumed:  # built in memory (a mock transport): decoded already
        content: bytes = response.content
        return content if len(content) <= cap else None
    return await read_capped(response.aiter_raw(), response.headers.get("content-encoding"),
                             cap)


async def read_capped(raw: AsyncIterator[bytes], coding: str | None, cap: int
                      ) -> bytes | None:
    """The body of ``raw`` (the bytes as sent) decoded, or None once more than ``cap``
    DECODED bytes have come; ``coding`` is its Content-Encoding header.

    Decoding runs here, a bounded step at a time with a turn for the event loop between
    steps, so the cap counts what the body expands to and a deadline still fires while a
    small compressed body expands to a gigabyte.
    """
    import asyncio  # here, not at the top: plugins import this module on a --fast search

    inflater = _inflater(coding)
    body = bytearray()
    async for chunk in raw:
        if inflater is None:
            body += chunk
            if len(body) > cap:
                return None
            continue
        pending, full = chunk, True
        while pending or full:
            limit = min(_DECODE_STEP, cap + 1 - len(body))
            try:
                out = inflater.decompress(pending, limit)
            except zlib.error as exc:
                if body or coding is None or coding.strip().lower() != "deflate":
                    raise Unreadable(f"a {coding} body that does not decompress "
                                     f"({exc})") from None
                # "deflate" as sent is sometimes raw deflate, without its zlib header
                inflater = zlib.decompressobj(-zlib.MAX_WBITS)
                out = inflater.decompress(pending, limit)
            body += out
            if len(body) > cap:
                return None
            pending, full = inflater.unconsumed_tail, len(out) == limit
            await asyncio.sleep(0)
    return bytes(body)


def _inflater(coding: str | None) -> Any:
    """A zlib decompressor for ``coding``, None for a body sent as it is."""
    name = (coding or "identity").strip().lower()
    if name == "identity":
        return None
    if name in ("gzip", "x-gzip"):
        return zlib.decompressobj(16 + zlib.MAX_WBITS)
    if name == "deflate":
        return zlib.decompressobj()
    raise Unreadable(f"a body in content coding {excerpt(name, 40)}, which was not asked "
                     f"for (only {ACCEPT_ENCODING})")


class NotJSON(ValueError):
    """A body that cannot be read as JSON; ``str()`` says why, in a few words."""


def decode_json(content: bytes) -> Any:
    """A server's body as JSON, or ``NotJSON`` saying why not: the one place answers are
    decoded, by the probes and the client alike.

    Besides malformed or undecodable text, Python's json refuses (with other exceptions than
    JSONDecodeError) nesting deeper than the interpreter's recursion limit (RecursionError)
    and an integer of more than 4300 digits (a plain ValueError); either would otherwise end
    a search in a traceback, though it only says the listener is not a usable model server.
    """
    try:
        return json.loads(content)
    except RecursionError:
        raise NotJSON("JSON nested too deep to read") from None
    except (json.JSONDecodeError, UnicodeDecodeError):  # the body, quoted, says more
        raise NotJSON("not JSON") from None
    except ValueError as exc:  # the integer digit limit, in particular
        raise NotJSON(f"JSON that cannot be read ({excerpt(str(exc), 80)})") from None


def as_int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _float(value: Any, endpoint: Endpoint, where: str) -> float:
    # NaN is refused here: Python's json reads a bare NaN, and a NaN candidate would be
    # dropped as "zero probability" downstream, turning a broken answer into a verdict.
    if isinstance(value, (int, float)) and not isinstance(value, bool) and value == value:
        return float(value)
    raise ContractError(f"{where} gave a log probability that is not a number: "
                        f"{excerpt(value)}", endpoint.base_url)


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
        raise ContractError(f"{endpoint_url(endpoint, path)} numbered its {len(indices)} results "
                            f"{excerpt(indices)}, not 0..{len(indices) - 1} each once; "
                            "its answers cannot be matched to the prompts", endpoint.base_url)


def excerpt(value: Any, limit: int = 160) -> str:
    """``value`` (text, or anything as JSON) as one short line to quote in an error: runs of
    whitespace, newlines too, are one space, and other control characters are shown as
    ``\\xNN``, so a server's text can neither split our one-line error nor drive a
    terminal."""
    if isinstance(value, str):
        text = value
    else:
        try:
            text = json.dumps(value, default=str)
        except (ValueError, RecursionError):  # nested nearly as deep as json can read
            text = f"(a {type(value).__name__} nested too deep to show)"
    text = " ".join(text.split())
    text = text if len(text) <= limit else text[:limit] + "…"
    return visible(text)
