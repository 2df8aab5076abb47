"""What a long-lived process keeps of one sliced file for the ranking, as the ranking asks
for it (``scores.score_chunks``); ``chunk_memory.SlicedMemo`` is what keeps it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol, TypeVar

#: a literal's count in each chunk of one file, for the chunks that hold it: chunk index ->
#: count (a chunk that is not a key holds none)
ChunkCounts = dict[int, int]
_Kept = TypeVar("_Kept")


class FileMemo(Protocol):
    """What a long-lived process keeps of one sliced file from one query to the next:
    ``item`` (a literal: its ``ChunkCounts``; a tuple: what it names), from ``compute``
    when not kept (``chunk_memory.SlicedMemo``, keyed by the file's sliced content)."""

    def __call__(self, item: str | tuple[str | int, ...],
                 compute: Callable[[], _Kept]) -> _Kept: ...
