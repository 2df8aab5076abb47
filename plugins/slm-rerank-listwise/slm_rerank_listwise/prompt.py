"""The listwise prompt: the query, then the candidates numbered from 0, then the answer cue.

An instruction-tuned profile (one with chat turns) keeps its own layout, so the model
family's chat template is what the model reads: the instruction is replaced by the
listwise one and the numbered candidates fill ``{document}``. A profile without a chat
layout is a base model, whose completion layout is a few-shot yes/no exchange: asked for a
ranking in it, the model would answer yes or no. It gets ``BASE_LAYOUT`` instead, with
one worked example of the answer form; so does a request without a profile.

Every prompt ends with ``[``: the answer is begun for the model, so it continues with
numbers rather than prose, and the reader puts the bracket back before parsing.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from slm_rerank.registrations import ModelProfile

INSTRUCTION = ("Rank the numbered candidates by how well each helps answer the query: it "
               "holds the answer, or the code or text the query is about. Answer with a "
               "JSON array of the candidate numbers, most relevant first, each number "
               "exactly once, on one line.")

# The example sits before the query, so it is part of the prefix every window shares.
BASE_LAYOUT = (
    "{instruction}\n\n"
    "Query: where is the log file rotated\n\n"
    "Candidate 0:\nFile: src/ui/colours.py:1-1\nCOLOURS = {\"red\": 1}\n\n"
    "Candidate 1:\nFile: src/log/rotate.py:4-5 (rotate)\ndef rotate(path):\n"
    "    os.rename(path, path + '.1')\n\n"
    "Candidate 2:\nFile: src/log/setup.py:1-2\nLOG_FILE = 'app.log'\n\n"
    "Ranking: [1, 2, 0]\n\n"
    "Query: {query}\n\n"
    "{document}\n\n"
    "Ranking:"
)

ANSWER_CUE = "["

#: characters per token assumed when sizing a prompt (code tokenises densely)
CHARS_PER_TOKEN = 3.0
#: tokens kept free for the chat template's own tokens and the server's rounding
RESERVED_TOKENS = 32
#: a candidate is never cut below this many characters (its "File:" line and a little)
MIN_CANDIDATE_CHARS = 80


def layout(profile: ModelProfile | None) -> ModelProfile:
    """The profile the prompt is rendered with: the listwise instruction in the right layout."""
    if profile is not None and profile.chat:
        return dataclasses.replace(profile, instruction=INSTRUCTION)
    base = ModelProfile("listwise-plain", "the listwise layout for base models",
                        instruction=INSTRUCTION, completion=BASE_LAYOUT, yes_words=(),
                        no_words=())
    return base


def candidates(texts: Sequence[str], chars: int) -> str:
    """The candidates numbered from 0, each cut to ``chars`` characters at a line's end."""
    return "\n\n".join(f"Candidate {i}:\n{cut(text, chars)}" for i, text in enumerate(texts))


def cut(text: str, chars: int) -> str:
    """``text`` within ``chars`` characters, whole lines where one fits, marked when cut."""
    text = text.strip("\n")
    if len(text) <= chars:
        return text
    head = text[:chars]
    if "\n" in head:
        head = head[:head.rindex("\n")]
    return head + "\n…"


def render(profile: ModelProfile | None, query: str, texts: Sequence[str], chars: int) -> str:
    """The whole prompt for one window, ending in the answer cue."""
    prompt = layout(profile).render_completion(query, candidates(texts, chars))
    return prompt + (ANSWER_CUE if prompt[-1:].isspace() else " " + ANSWER_CUE)


def budget(profile: ModelProfile | None, query: str, count: int, doc_chars: int,
           context_tokens: int | None, max_tokens: int,
           chars_per_token: float = CHARS_PER_TOKEN) -> tuple[str, int]:
    """The query and the characters each of ``count`` candidates may keep in one prompt.

    ``doc_chars`` caps a candidate; a server that reports its context (llama.cpp: one
    slot's) may lower that so the whole window fits: the query keeps at most a third of
    the room, its start first, and the candidates share the rest evenly.
    ``chars_per_token`` is the estimate, or what the server's tokenizer measured.
    """
    if not context_tokens or count <= 0:
        return query, doc_chars
    room = int((context_tokens - max_tokens - RESERVED_TOKENS) * chars_per_token)
    room -= len(render(profile, "", [""] * count, 0))
    asked = query if len(query) <= room // 3 else query[:max(room // 3, 0)]
    share = (room - len(asked)) // count
    return asked, max(MIN_CANDIDATE_CHARS, min(doc_chars, share))
