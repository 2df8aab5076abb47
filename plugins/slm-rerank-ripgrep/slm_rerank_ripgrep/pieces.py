"""Which words of the word index hold a term, found by the term's rarest three letters
(issue 30).

The index keeps every word's case-folded spelling as a line of one text (``word_index``):
looking a term up by ``str.find`` over it reads about 1 MB for sympy, 0.5-1 ms a term and
up to 11 ms for a short one, paid by every query that brings a term not asked before.
``Pieces`` holds, for each three letters, the lines whose spelling has them, all in one
``array`` (4 bytes a piece of a line, 3.2 MB for sympy) with where each three letters'
lines start: a term's lines are then those of its rarest three letters that hold it.

A spelling is made of ``a-z 0-9 _`` only (rg's ``-i`` folds the long s and the Kelvin
sign to ``s`` and ``k``), 37 letters: three of them are a number under 38 ** 3, the slot
of their lines. The pieces are built by ``PieceBuild``, a step at a time within a deadline,
as idle work after the index's build (lines joined into the text later are looked up by
``str.find``, as before); a query never waits for them.
"""

from __future__ import annotations

import time
from array import array
from bisect import bisect_right
from collections.abc import Callable
from dataclasses import dataclass
from itertools import accumulate

from slm_rerank_ripgrep import mapped
from slm_rerank_ripgrep.mapped import Numbers

LETTERS = "abcdefghijklmnopqrstuvwxyz0123456789_"
#: the number of any other character (none is in a spelling, or in a term looked up)
_OTHER = len(LETTERS)
_BASE = _OTHER + 1
SLOTS = _BASE ** 3
_CODES = bytes(LETTERS.index(chr(b)) if chr(b) in LETTERS else _OTHER for b in range(256))
#: lines read between two looks at the clock (about 1 ms on sympy)
_CHUNK_LINES = 256
#: pieces put in place in one pass over the lines when they go to a file (4 bytes each):
#: 2 MiB, held between two windows of idle work when a window ends inside a range, and a
#: query arriving then stacks on it (issue 30: 4 MiB was the ten copies' peak; each pass
#: more is 0.3-0.7 s of idle work there)
RANGE_PIECES = 1 << 19


def _slot(term: str, at: int) -> int:
    """The slot of the three letters of ``term`` at ``at`` (each one of ``LETTERS``)."""
    codes = _CODES
    first, second, third = (codes[ord(ch)] for ch in term[at:at + 3])
    return (first * _BASE + second) * _BASE + third


@dataclass
class Pieces:
    """The three-letter pieces of the spellings of lines ``0 .. lines - 1``."""

    lines: int
    #: where each slot's lines start in ``ids`` (one past the last slot: their number)
    offsets: array[int]
    #: an array, or a view of a mapped file once a build ended (``_Tree.map_out``)
    ids: Numbers

    def nbytes(self) -> int:
        return 4 * (len(self.offsets) + len(self.ids))

    def holding(self, term: str, text: bytes | bytearray, starts: array[int]) -> array[int]:
        """The lines (under ``lines``, in order) whose spelling holds ``term``, a term of
        three letters or more; ``text`` and ``starts`` as ``word_index._Tree`` keeps them."""
        if any(ord(ch) > 255 or _CODES[ord(ch)] == _OTHER for ch in term):
            return array("I")  # a character no spelling has
        needle = term.encode("latin-1")
        offsets = self.offsets
        slots = [_slot(term, at) for at in range(len(term) - 2)]
        rarest = min(slots, key=lambda slot: offsets[slot + 1] - offsets[slot])
        return array("I", (line for line in self.ids[offsets[rarest]:offsets[rarest + 1]]
                           if needle in text[starts[line]:starts[line + 1] - 1]))


class PieceBuild:
    """``Pieces`` of the lines joined into ``text`` so far, built over as many ``step``s as
    it takes: each slot's lines counted, then put in their slots. Each line's three-letter
    pieces are worked out in both passes: keeping them between the two would save 0.15 s on
    sympy and hold 3 MB more while they are built.

    With ``to_file``, pieces of ``mapped.MAP_FROM`` bytes or more go straight to a file the
    process maps (``mapped.Appender``), ``RANGE_PIECES`` at a time: the slots are put in
    ranges, each the lines of a pass over every line, so the build never holds more than
    a range of them (sympy with its images: 2 MiB, not 13; its lines are read seven
    times). When the file cannot be made, written or mapped, they are made in
    memory in one pass, as without it, and ``unmapped`` says why."""

    def __init__(self, text: bytes | bytearray, starts: array[int],
                 to_file: bool = False) -> None:
        self.lines = len(starts) - 1
        #: read below ``lines`` only: later joins append past it. A line is translated to
        #: its letters' numbers as it is read (3 % slower than one copy of the text
        #: translated first, which was 4 MiB held through the build for ten copies of sympy)
        self.text, self.starts = text, starts
        self.counts = array("I", [0]) * (SLOTS + 1)
        #: every line counted (``counts`` then holds where each slot's lines start)
        self.counted = False
        #: the pieces of slots ``low`` .. ``high - 1`` (from the ``base``-th piece on)
        self.ids: array[int] | None = None
        self.low = self.high = self.base = 0
        self.fill: array[int] | None = None
        self.at = 0
        self.to_file = to_file
        self.out: mapped.Appender | None = None
        #: why the pieces were made in memory although asked to go to a file
        self.unmapped = ""

    def nbytes(self) -> int:
        """What it holds; once counted, with the pieces it makes then (``sized``)."""
        made = 4 * (self.counts[SLOTS] + SLOTS + 1) if self.counted else 0
        return 4 * len(self.counts) + made

    def sized(self) -> bool:
        """Whether every line is counted and the pieces not yet made: what they will take
        is in ``nbytes``, for a bound to be checked on before they take it."""
        return self.counted and self.ids is None

    def step(self, by: float, clock: Callable[[], float] = time.monotonic) -> Pieces | None:
        """Go on until ``by`` (on ``clock``; a chunk of lines at least); the pieces once
        every line is in. It stops once every line is counted (``sized``), whatever the
        time: the next step makes the pieces."""
        while True:
            if self.ids is None:
                if self.counted:
                    self._range(0)
                else:
                    self._count()
                    if self.counted:
                        return None
            elif self.at < self.lines:
                self._place()
            if self.ids is not None and self.at >= self.lines:
                done = self._range_done()
                if done is not None:
                    return done
            if clock() > by:
                return None

    def _range(self, low: int) -> None:
        """Start putting the pieces of the slots from ``low`` on in place: as many slots
        as ``RANGE_PIECES`` hold when they go to a file, else all."""
        counts = self.counts
        if low == 0:
            self.fill = array("I", counts)
            if self.to_file and counts[SLOTS] and 4 * counts[SLOTS] >= mapped.MAP_FROM:
                try:
                    self.out = mapped.Appender()
                except OSError as exc:
                    self._in_memory(mapped.no_file(exc))
                    return
        high = SLOTS
        if self.out is not None:
            high = max(low + 1, bisect_right(counts, counts[low] + RANGE_PIECES, low) - 1)
            high = min(high, SLOTS)
        self.low, self.high, self.base = low, high, counts[low]
        self.ids = None  # the range written: not held beside the next one (twice a range)
        self.ids = array("I", [0]) * (counts[high] - counts[low])
        self.at = 0

    def _in_memory(self, why: str) -> None:
        """Make the pieces in memory from the start, in one pass: the file failed."""
        self.unmapped = why
        self.out, self.to_file = None, False
        self._range(0)

    def _range_done(self) -> Pieces | None:
        """The pieces, once the last range is placed; else the next range started."""
        assert self.ids is not None
        out = self.out
        if out is None:
            self.fill = None
            return Pieces(self.lines, self.counts, self.ids)
        try:
            out.append(self.ids)  # no other reference: ``_range`` lets it go
            if self.high < SLOTS:
                self._range(self.high)
                return None
            view = out.finish()
        except OSError as exc:
            self._in_memory(mapped.unwritten(exc))
            return None
        self.fill, self.out = None, None
        return Pieces(self.lines, self.counts, view)

    def _slots(self, line: int) -> set[int]:
        starts = self.starts
        spelling = self.text[starts[line]:starts[line + 1] - 1].translate(_CODES)
        return {(a * _BASE + b) * _BASE + c
                for a, b, c in zip(spelling, spelling[1:], spelling[2:], strict=False)}

    def _count(self) -> None:
        counts, slots_of = self.counts, self._slots
        end = min(self.at + _CHUNK_LINES, self.lines)
        for line in range(self.at, end):
            for slot in slots_of(line):
                counts[slot + 1] += 1
        self.at = end
        if end == self.lines:  # counted: where each slot's lines start
            self.counts = array("I", accumulate(counts))
            self.counted = True
            self.at = 0

    def _place(self) -> None:
        ids, fill, slots_of = self.ids, self.fill, self._slots
        assert ids is not None and fill is not None
        low, high, base = self.low, self.high, self.base
        end = min(self.at + _CHUNK_LINES, self.lines)
        if low == 0 and high == SLOTS:
            for line in range(self.at, end):
                for slot in slots_of(line):
                    ids[fill[slot]] = line
                    fill[slot] += 1
        else:
            for line in range(self.at, end):
                for slot in slots_of(line):
                    if low <= slot < high:
                        ids[fill[slot] - base] = line
                        fill[slot] += 1
        self.at = end
