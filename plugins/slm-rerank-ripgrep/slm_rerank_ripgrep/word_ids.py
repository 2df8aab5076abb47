"""A word's id by its spelling, for the word index (issue 30: a worker within 64 MB).

The index keeps each word's spelling once, as a line of one text (``word_index._Tree``). A
dict from spelling to id would keep every spelling a second time as its key, and an int
object for each id: 7.6 MiB of sympy's 18 MiB index. This table keeps only the ids, four
bytes a slot in one ``array``, at most half of the slots used, and finds a spelling by its
hash, comparing it with the spellings of the ids in its way (open addressing, probing the
next slot). It lives in one process, so Python's per-process ``hash`` is stable for it.
"""

from __future__ import annotations

from array import array
from collections.abc import Callable

#: slots of a new table (a power of two)
_FIRST_SLOTS = 16
_EMPTY = -1


def _empty(size: int) -> array[int]:
    return array("i", [_EMPTY]) * size


class WordIds:
    """Spelling -> word id. Each call is given what gives an id's spelling back (the
    tree's text and tail, or a function): the table holds no reference to the tree, so a
    tree no longer kept is freed at once, and its watch closed with it."""

    __slots__ = ("_slots", "_mask", "_count")

    def __init__(self) -> None:
        self._slots = _empty(_FIRST_SLOTS)
        self._mask = _FIRST_SLOTS - 1
        self._count = 0

    def __len__(self) -> int:
        return self._count

    def nbytes(self) -> int:
        """The bytes its slots take."""
        return len(self._slots) * self._slots.itemsize

    def get(self, spelling: bytes, text: bytearray, starts: array[int],
            tail: list[bytes]) -> int:
        """The id of ``spelling``, or -1; an id's spelling is the line of ``text`` that
        ``starts`` says (without its newline), or past them, its place in ``tail`` (as
        ``word_index._Tree`` keeps them: this is the loop of every word a build posts)."""
        slots, mask = self._slots, self._mask
        lines = len(starts) - 1
        at = hash(spelling) & mask
        while True:
            wid = slots[at]
            if wid == _EMPTY:
                return wid
            if wid < lines:
                if text[starts[wid]:starts[wid + 1] - 1] == spelling:
                    return wid
            elif tail[wid - lines] == spelling:
                return wid
            at = (at + 1) & mask

    def add(self, spelling: bytes, wid: int, spelling_of: Callable[[int], bytes]) -> None:
        """Record ``wid`` as the id of ``spelling``, which the table does not hold and
        ``spelling_of(wid)`` already gives."""
        slots, mask = self._slots, self._mask
        at = hash(spelling) & mask
        while slots[at] != _EMPTY:
            at = (at + 1) & mask
        slots[at] = wid
        self._count += 1
        if 2 * self._count > mask:
            self._grow(spelling_of)

    def _grow(self, spelling_of: Callable[[int], bytes]) -> None:
        old = self._slots
        size = 2 * len(old)
        slots, mask = _empty(size), size - 1
        for wid in old:
            if wid != _EMPTY:
                at = hash(spelling_of(wid)) & mask
                while slots[at] != _EMPTY:
                    at = (at + 1) & mask
                slots[at] = wid
        self._slots, self._mask = slots, mask
