"""Prompts checked against the server's context by their real token count.

``passages.fit_context`` sizes prompts by characters (``CHARS_PER_TOKEN``); that holds for
code and prose, not for emoji, CJK Extension B or long hex, whose prompts overflow a small
slot and are refused with HTTP 400. ``measure`` counts the tokens of the prompts that could
be over (with the server's ``/tokenize``, at most once each) and shortens them until they
fit; the prompts that cannot be over by their UTF-8 length cost nothing.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from slm_rerank.errors import ContractError, TransientError
from slm_rerank.model.passages import RESERVED_TOKENS, cut_lines
from slm_rerank.registrations import Document, Endpoint, ModelProfile

if TYPE_CHECKING:
    from slm_rerank.model.client import ModelClient


#: times a prompt over the context is measured and cut again before the last, sure cut
MEASURE_ATTEMPTS = 3


@dataclass(frozen=True)
class Measured:
    """The query and documents after their tokens were counted, and what changed."""

    query: str
    documents: list[Document]
    #: for the notes: what was shortened, or why nothing could be measured
    notes: list[str] = field(default_factory=list)
    #: documents that were cut to fit (their new text replaces the old in ``documents``)
    shortened: int = 0


def _utf8(text: str) -> int:
    return len(text.encode("utf-8", "surrogatepass"))


def _shorter(document: Document, chars: int, terms: Sequence[str]) -> Document:
    """``document`` cut to ``chars`` characters around its best lines; a code chunk keeps its
    ``File:`` line, which says where the text is from."""
    text, head = document.text, ""
    if document.metadata.get("path") is not None and "\n" in text:
        first, text = text.split("\n", 1)
        head, chars = first + "\n", chars - len(first) - 1
    code, _ = cut_lines(text.splitlines(), terms, max(chars, 0))
    return Document.of(document.id, head + code, **{**document.metadata, "cut": True})


def _within_bytes(text: str, limit: int) -> str:
    """The longest start of ``text`` whose UTF-8 form has at most ``limit`` bytes."""
    return text.encode("utf-8", "surrogatepass")[:max(limit, 0)].decode("utf-8", "ignore")


async def measure(client: ModelClient, endpoint: Endpoint | None, profile: ModelProfile | None,
                  query: str, documents: Sequence[Document]) -> Measured:
    """The query and documents, each prompt checked against the server's context by its
    real token count and shortened until it fits.

    Sizing by characters (``fit_context``) assumes 3 characters a token; emoji, CJK
    Extension B and long hex run far denser (CJK Extension B: 4 tokens a character on
    Gemma), and one prompt over a slot's context is refused with HTTP 400. A token never
    holds less than one byte of its text, so a prompt of fewer UTF-8 bytes than the context
    cannot overflow and costs nothing here: only the others are tokenized, once each (plus
    the prompt around the document, once), and each is cut by its measured density until
    it fits; after ``MEASURE_ATTEMPTS`` it is cut to as many bytes as it may have tokens,
    which always fits. A server that cannot tokenize (Ollama) leaves the estimate as it is.
    """
    out = list(documents)
    if endpoint is None or not endpoint.context_tokens:
        return Measured(query, out)
    limit = endpoint.context_tokens - RESERVED_TOKENS

    def around(asked: str) -> str:  # the prompt with an empty document: the fixed part
        return profile.render_completion(asked, "") if profile is not None else asked

    # the bound above also holds for the parts: +1 for a tokenizer's leading-space token
    if all(_utf8(around(query)) + _utf8(d.text) + 1 <= limit for d in out):
        return Measured(query, out)
    fixed = await client.tokenize(endpoint, around(query))
    if fixed is None:
        return Measured(query, out, [f"{endpoint.base_url} cannot count tokens (no tokenize "
                                     "endpoint): prompts were sized by characters only"])
    notes: list[str] = []
    asked = query
    for _ in range(MEASURE_ATTEMPTS):
        if len(fixed) <= limit // 2 or not asked:
            break
        # a dense query (pasted emoji, CJK) holds at most half the context, as by characters
        asked = asked[:int(len(asked) * (limit // 2) / len(fixed) * 0.9)]
        fixed = await client.tokenize(endpoint, around(asked)) or []
    if asked != query:
        notes.append(f"the query was cut to its first {len(asked)} characters: its tokens "
                     f"did not fit half of {endpoint.base_url}'s context of "
                     f"{endpoint.context_tokens} tokens")
    room = limit - len(fixed)
    terms = [w for w in query.lower().split() if len(w) > 2]
    from slm_rerank.model.client import gather_all

    async def fitted(document: Document) -> tuple[Document, bool]:
        if _utf8(document.text) + 1 <= room:
            return document, False
        tokens = await client.tokenize(endpoint, document.text)
        if tokens is None or len(tokens) <= room:
            return document, False
        for _ in range(MEASURE_ATTEMPTS):
            # the measured characters per token, with a margin: a cut changes the density
            chars = int(len(document.text) * room / max(len(tokens), 1) * 0.9)
            document = _shorter(document, chars, terms)
            tokens = await client.tokenize(endpoint, document.text) or []
            if len(tokens) <= room:
                return document, True
        sure = _within_bytes(document.text, room - 1)
        return Document.of(document.id, sure, **{**document.metadata, "cut": True}), True

    results = await gather_all([fitted(d) for d in out])
    shortened = sum(cut for _, cut in results)
    if shortened:
        notes.append(f"{shortened} of {len(out)} documents were shortened after counting "
                     f"their tokens: at {room} tokens each, their prompts fit "
                     f"{endpoint.base_url}'s context of {endpoint.context_tokens} tokens "
                     "(dense text such as emoji, CJK or hex runs under 3 characters a token)")
    return Measured(asked, [d for d, _ in results], notes, shortened)


async def measured_within(client: ModelClient, endpoint: Endpoint | None,
                    profile: ModelProfile | None, query: str, documents: list[Document],
                    deadline: float) -> Measured:
    """``measure`` within the run's deadline; a fault there leaves the estimate as it is
    (the scoring that follows meets the same server, and reports it)."""
    try:
        return await asyncio.wait_for(measure(client, endpoint, profile, query, documents),
                                      max(deadline - time.monotonic(), 0.001))
    except (TransientError, ContractError, asyncio.TimeoutError) as exc:
        why = "the deadline passed" if isinstance(exc, asyncio.TimeoutError) else str(exc)
        return Measured(query, documents, [f"prompts were sized by characters only: counting "
                                           f"their tokens failed ({why})"])
