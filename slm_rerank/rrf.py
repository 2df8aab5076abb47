"""Reciprocal rank fusion: several ranked lists (BM25 hits, vector hits, ...) into one.

Each item scores ``sum(1 / (k + rank))`` over the lists that hold it (rank 1-based), after
Cormack, Clarke and Buettcher (SIGIR 2009), who found ``k = 60`` robust. Only ranks count,
so lists on incomparable scales (a BM25 score, a cosine similarity) fuse without
normalisation. An item is known by its id; the fused entry keeps the first object seen for
that id and, when the lists carry scores, the best upstream score per id.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

DEFAULT_K = 60


@dataclass
class Fused:
    """One item after fusion."""

    id: Hashable
    #: the first object seen with this id
    item: Any
    #: sum of 1 / (k + rank) over the lists that hold it
    score: float
    #: list index -> the item's 1-based rank in that list
    ranks: dict[int, int] = field(default_factory=dict)
    #: the best score an upstream list gave it, None when no list carried scores
    upstream_score: float | None = None


#: what names an item that has no id: its text, read as the documents API reads it
TEXT_FIELDS = ("text", "page_content", "content")


def _default_id(item: Any) -> Hashable:
    if isinstance(item, str):
        return item
    # An id of None is no id (LangChain documents carry id=None): items without one are
    # known by their text, never all merged into one item called None.
    for name in ("id", "doc_id", *TEXT_FIELDS):
        value = item.get(name) if isinstance(item, Mapping) else getattr(item, name, None)
        if value is not None:
            return value
    raise TypeError(f"cannot tell the id of {type(item).__name__} {item!r:.80}: give id=... "
                    "(a function from an item to its id), or items with an 'id'")


def fuse(rankings: Sequence[Iterable[Any]], k: float = DEFAULT_K,
         id: Callable[[Any], Hashable] | None = None,
         score: Callable[[Any], float | None] | None = None) -> list[Fused]:
    """The items of ``rankings`` (each best first) in fused order, best first.

    ``id(item)`` names an item across lists (default: a string is its own id; a dict's
    ``"id"``, ``"doc_id"`` or else its text (``"text"``, ``"page_content"``, ``"content"``);
    an object's attributes of those names). Ids that differ only in type (1 and "1") are
    an error, not two items. ``score(item)``, when
    given, reads an item's upstream score; the fused entry keeps the highest. An item that
    appears twice in one list counts at its best rank there. Ties keep first-seen order.
    """
    if isinstance(k, bool) or not (isinstance(k, (int, float)) and math.isfinite(k)
                                   and k >= 0):
        raise ValueError(f"k must be a finite number >= 0, not {k!r}")
    if isinstance(rankings, Mapping):
        raise TypeError("rankings is a mapping; give a list of rankings, e.g. "
                        "list(rankings.values())")
    key = id or _default_id
    fused: dict[Hashable, Fused] = {}
    # str(id) -> the id first seen: 1 from one retriever and "1" from another are the same
    # document to a reader, but not to a dict; fused apart, both would rank too low.
    spelled: dict[str, Hashable] = {}
    for list_index, ranking in enumerate(rankings):
        if isinstance(ranking, (str, bytes, Mapping)) or not isinstance(ranking, Iterable):
            raise TypeError(f"ranking {list_index} is a {type(ranking).__name__}, not a list "
                            "of items; fuse takes a list of rankings, each a list")
        for rank, item in enumerate(ranking, 1):
            name = key(item)
            try:
                entry = fused.get(name)
            except TypeError:
                raise TypeError(f"the id {name!r:.80} of ranking {list_index}'s item {rank} "
                                f"is a {type(name).__name__}, which cannot name an item; "
                                "give id=... returning a string or number") from None
            if entry is None:
                other = spelled.setdefault(str(name), name)
                if other is not name and other != name:
                    raise ValueError(
                        f"ids {other!r} ({type(other).__name__}) and {name!r} "
                        f"({type(name).__name__}) differ only in type, so they would be "
                        "fused as two items; give id=lambda item: str(...) to make the "
                        "lists agree")
                entry = fused[name] = Fused(name, item, 0.0)
            if list_index in entry.ranks:
                continue  # a duplicate within one list: its best (first) rank counts
            entry.ranks[list_index] = rank
            entry.score += 1.0 / (k + rank)
            if score is not None:
                value = score(item)
                # numbers.Real, not float: numpy's float32 (FAISS scores) is no float
                if value is not None and (isinstance(value, bool) or
                                          not isinstance(value, numbers.Real)):
                    raise TypeError(f"score() gave {value!r:.40} for ranking {list_index}'s "
                                    f"item {rank}; it must return a number or None")
                if value is not None and math.isfinite(value) and (
                        entry.upstream_score is None or value > entry.upstream_score):
                    entry.upstream_score = float(value)
    return sorted(fused.values(), key=lambda f: -f.score)
