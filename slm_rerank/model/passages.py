"""The text a model reads of one chunk: its ``File:`` header, cut around its best lines,
and fitted, with the query, to the server's context.

Sizing here is by characters (``CHARS_PER_TOKEN``); ``model/prompt_fit.py`` then checks the
prompts that could still be over by their real token count, which needs the server.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from slm_rerank.registrations import Document, Endpoint, ModelProfile

if TYPE_CHECKING:
    from slm_rerank.lexical.rank import Ranked
    from slm_rerank.lexical.terms import QueryTerms

#: characters per token assumed when sizing prompts: code and identifiers tokenise densely
CHARS_PER_TOKEN = 3.0
#: tokens kept free in a request for the answer and the chat template's own tokens
RESERVED_TOKENS = 32
#: characters kept for the "File: path:lines (symbol)" and "Kind:" lines when fitting a context
HEADER_CHARS = 150
#: how a passage names its file's kind to the judge, by ``lexical.filetypes.path_kind``
KIND_WORDS = {"source": "source code", "test": "test code", "doc": "documentation",
              "changelog": "changelog", "other": "configuration or data"}


@dataclass(frozen=True)
class Passage:
    """One chunk as the model sees it."""

    path: str
    start_line: int
    end_line: int
    symbol: str | None
    #: the chunk's lines, already cut to the prompt budget
    code: str
    cut: bool = False
    #: the lexical stage's kind of the file (``lexical.filetypes.path_kind``), or None
    kind: str | None = None

    def document(self, index: int) -> Document:
        """The chunk as a scorer gets it: a ``File: path:lines (symbol)`` line, a ``Kind:``
        line when the file's kind is known, then its code; the metadata says where it is
        from, for the warnings that name it."""
        where = f"{self.path}:{self.start_line}-{self.end_line}"
        head = f"File: {where}" + (f" ({self.symbol})" if self.symbol else "")
        if self.kind in KIND_WORDS:
            head += f"\nKind: {KIND_WORDS[self.kind]}"
        return Document.of(str(index), f"{head}\n{self.code}", path=self.path,
                           start_line=self.start_line, end_line=self.end_line,
                           symbol=self.symbol, cut=self.cut)


def cut_lines(lines: Sequence[str], terms: Sequence[str], budget: int) -> tuple[str, bool]:
    """The chunk's text within ``budget`` characters, centred on its best-matching lines.

    A chunk's end is no better than its middle: the window is grown from the line with the
    most query terms, so the evidence that made the chunk a candidate is what the model
    reads.
    """
    text = "\n".join(lines)
    if len(text) <= budget:
        return text, False
    low = [line.lower() for line in lines]
    hits = [sum(term in line for term in terms) for line in low]
    best = max(range(len(lines)), key=lambda i: (hits[i], -i)) if any(hits) else 0
    lo = hi = best
    size = len(lines[best])
    grown = True
    while grown:
        grown = False
        if lo > 0 and size + len(lines[lo - 1]) + 1 <= budget:
            lo -= 1
            size += len(lines[lo]) + 1
            grown = True
        if hi + 1 < len(lines) and size + len(lines[hi + 1]) + 1 <= budget:
            hi += 1
            size += len(lines[hi]) + 1
            grown = True
    return "\n".join(lines[lo:hi + 1])[:budget], True


def head_passages(ranked: Ranked, chosen: list[int], terms: QueryTerms, budget: int
                  ) -> list[Passage]:
    """The chosen chunks (indices into ``ranked.chunks``) as the model will read them, each
    cut to ``budget`` characters (``prompt_chars``) around its best lines."""
    from slm_rerank.lexical.chunking import split_lines
    from slm_rerank.lexical.filetypes import path_kind
    from slm_rerank.report import display_path

    out = []
    literals = terms.literals()
    for i in chosen:
        item = ranked.chunks[i]
        lines = split_lines(ranked.texts[item.path])[item.chunk.start_line - 1:
                                                     item.chunk.end_line]
        code, cut = cut_lines(lines, literals, budget)
        out.append(Passage(display_path(item.path), item.chunk.start_line,
                           item.chunk.end_line, item.chunk.symbol, code, cut,
                           path_kind(item.path)))
    return out


# --- fitting the server's context -----------------------------------------------------------


def fit_query(query: str, endpoint: Endpoint | None, profile: ModelProfile | None,
              notes: list[str]) -> tuple[str, int | None]:
    """The query as one prompt may hold it, and the characters of the prompt left for the
    query and one document (None when the server reports no context).

    The query keeps at most half the room, its start first (a pasted issue leads with its
    title).
    """
    if endpoint is None or profile is None or not endpoint.context_tokens:
        return query, None
    room = int((endpoint.context_tokens - RESERVED_TOKENS) * CHARS_PER_TOKEN)
    room -= len(profile.render_completion("", ""))
    if len(query) <= room // 2:
        return query, room
    asked = query[:max(room // 2, 0)]
    notes.append(f"the query was cut to its first {len(asked)} characters to fit "
                 f"{endpoint.base_url}'s context of {endpoint.context_tokens} tokens")
    return asked, room


def fit_context(query: str, passages: Sequence[Passage], endpoint: Endpoint | None,
                profile: ModelProfile | None, notes: list[str]
                ) -> tuple[str, list[Passage]]:
    """The query and passages cut so that one prompt fits one request's context.

    Only when the server reports its context (llama.cpp: one slot's). The query keeps at
    most half the room, its start first (a pasted issue leads with its title); each chunk
    is cut again around its best-matching lines to what is left.
    """
    out = list(passages)
    asked, room = fit_query(query, endpoint, profile, notes)
    if room is None or endpoint is None:
        return asked, out
    budget = max(room - len(asked) - HEADER_CHARS, 0)
    terms = [w for w in query.lower().split() if len(w) > 2]
    cut = 0
    for i, p in enumerate(out):
        if len(p.code) > budget:
            code, _ = cut_lines(p.code.splitlines(), terms, budget)
            out[i] = dataclasses.replace(p, code=code, cut=True)
            cut += 1
    if cut:
        notes.append(f"{cut} chunks were cut to {budget} characters to fit "
                     f"{endpoint.base_url}'s context of {endpoint.context_tokens} tokens")
    return asked, out
