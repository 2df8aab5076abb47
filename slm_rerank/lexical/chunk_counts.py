"""Where a literal is said in each chunk of a file: the file's text lower-cased with where
its lines start, each chunk's bounds in it, and a literal's count in each chunk, found with
one scan of the text (``scores.score_chunks`` asks them, a warm process keeps the counts)."""

from __future__ import annotations

from array import array
from bisect import bisect_left
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import repeat
from operator import sub

from slm_rerank.lexical.chunking import Chunk, line_starts


@dataclass(frozen=True)
class LoweredText:
    """A file's text lower-cased, and where its lines start: worked out once per file."""

    text: str
    #: offsets[i] is where line i + 1 starts; the last entry is the text's length (an
    #: array: 8 bytes a line, not an int object's 36, in a process that keeps it)
    offsets: Sequence[int]

    @classmethod
    def of(cls, text: str, starts: Sequence[int] | None = None) -> LoweredText:
        """``text`` lower-cased; ``starts``, where ``text``'s own lines start, are taken
        as they are when lower-casing kept every character one character (nearly always:
        a few, such as U+0130, become two)."""
        lowered = text.lower()
        if starts is not None and len(lowered) == len(text):
            return cls(lowered, starts)
        return cls(lowered, array("q", line_starts(lowered)))

    @property
    def line_count(self) -> int:
        """As ``len(split_lines(text))``: lower-casing neither adds nor removes newlines."""
        return len(self.offsets) - 1


def chunk_bounds(lowered: LoweredText, chunks: list[Chunk]
                 ) -> tuple[Sequence[int], Sequence[int]]:
    """Where each chunk starts and ends in ``lowered``'s text (as offsets into it)."""
    offsets = lowered.offsets
    last = len(offsets) - 1
    return (array("q", [offsets[min(chunk.start_line - 1, last)] for chunk in chunks]),
            array("q", [offsets[min(chunk.end_line, last)] for chunk in chunks]))


def counts_per_chunk(literal: str, text: str, starts: Sequence[int], ends: Sequence[int]
                     ) -> list[int]:
    """``text[start:end].count(literal)`` for each chunk, with one scan of ``text``.

    A literal without a line break is found inside one line, and ``str.count``'s scan
    (leftmost, without overlaps: ``aba`` is in ``ababa`` once) finds the same occurrences in
    a line whether it starts at that line or earlier. A chunk runs from a line start to a
    line start, so it holds the occurrences of the whole text that start in it. A literal
    with a line break (none that ``terms`` makes) is counted slice by slice.
    """
    found = text.find(literal)
    if found < 0:
        return [0] * len(starts)
    if literal.splitlines() != [literal]:
        return [text[start:end].count(literal) for start, end in zip(starts, ends, strict=True)]
    # str.find, as str.count scans: several times faster than a regular expression's scan
    at = []
    step = len(literal)
    while found >= 0:
        at.append(found)
        found = text.find(literal, found + step)
    return list(map(sub, map(bisect_left, repeat(at), ends),
                    map(bisect_left, repeat(at), starts)))
