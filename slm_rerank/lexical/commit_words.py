"""What the commits that changed a file said, as evidence for the learned ranker's
``messages`` feature: each commit message's words (``message_words``, read by
``history.py``'s one ``git log``) and how strongly the messages of a file's commits say a
query's terms, and which of them (``message_evidence``)."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

from slm_rerank.lexical.terms import STOP_WORDS, light

#: Words kept of one commit's message (the first ones: a subject and the start of its body)
MAX_MESSAGE_WORDS = 64

#: a message's words as the ranker compares them with a query's terms (their light forms)
_MESSAGE_WORD = re.compile(r"[a-z0-9_]+")

#: the count at which a word's weight for one file is half what it can reach
_SATURATION = 1.2


def message_words(message: str) -> frozenset[str]:
    """The words of a commit message a query's terms are matched against: lower case, three
    letters or more, no stop words or numbers, in their light (plural-free) form; at most
    ``MAX_MESSAGE_WORDS``, the first ones."""
    kept: dict[str, None] = {}
    for word in _MESSAGE_WORD.findall(message.lower()):
        if len(word) >= 3 and word not in STOP_WORDS and not word.isdigit():
            kept.setdefault(light(word))
            if len(kept) >= MAX_MESSAGE_WORDS:
                break
    return frozenset(kept)


def message_evidence(said: Sequence[tuple[frozenset[str], frozenset[str]]],
                     paths: list[str], words: set[str]
                     ) -> list[tuple[float, tuple[str, ...]]]:
    """For each of ``paths``, how strongly the messages of the commits in ``said`` (each
    commit's changed files and its message's words, as ``FileHistory.said`` holds them)
    that changed it say ``words`` (light forms), and which of ``words`` they say, the one
    adding most first: per word, how many of the file's commits say it, saturating
    (``n / (n + 1.2)``), weighted by how rare the word is among the commits that changed a
    file (``log(1 + commits / commits saying it)``)."""
    if not words or not said:
        return [(0.0, ())] * len(paths)
    wanted = set(paths)
    told: dict[str, dict[str, int]] = {}
    saying: dict[str, int] = {}
    counted = 0
    for changed, says in said:
        if not changed:
            continue  # an oversized commit, or none under the root
        counted += 1
        hit = says & words
        if not hit:
            continue
        for word in hit:
            saying[word] = saying.get(word, 0) + 1
        for path in changed & wanted:
            mine = told.setdefault(path, {})
            for word in hit:
                mine[word] = mine.get(word, 0) + 1
    rarity = {w: math.log(1.0 + counted / n) for w, n in saying.items()}
    out: list[tuple[float, tuple[str, ...]]] = []
    for path in paths:
        parts = {w: rarity[w] * n / (n + _SATURATION) for w, n in told.get(path, {}).items()}
        out.append((sum(parts.values()),
                    tuple(sorted(parts, key=lambda w: (-parts[w], w)))))
    return out
