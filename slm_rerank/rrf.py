"""Reciprocal rank fusion: several ranked lists (BM25 hits, vector hits, ...) into one.

Each item scores ``sum(1 / (k + rank))`` over the lists that hold it (rank 1-based), after
Cormack, Clarke and Buettcher (SIGIR 2009), who found ``k = 60`` robust. Only ranks count,
so lists on incomparable scales (a BM25 score, a cosine similarity) fuse without
normalisation. An item is known by its id; the fused entry keeps the first object seen for
that id and, when the lists carry scores, the best upstream score per id.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Iterable, Sequence
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


def _default_id(item: Any) -> Hashable:
    if isinstance(item, str):
        return item
    if isinstance(item, dict):
        if "id" in item:
            return item["id"]
        if "text" in item:
            return item["text"]
    for name in ("id", "doc_id"):
        value = getattr(item, name, None)
        if value is not None:
            return value
    raise TypeError(f"cannot tell the id of {type(item).__name__} {item!r:.80}: give id=... "
                    "(a function from an item to its id), or items with an 'id'")


def fuse(rankings: Sequence[Iterable[Any]], k: float = DEFAULT_K,
         id: Callable[[Any], Hashable] | None = None,
         score: Callable[[Any], float | None] | None = None) -> list[Fused]:
    """The items of ``rankings`` (each best first) in fused order, best first.

    ``id(item)`` names an item across lists (default: a string is its own id; a dict's
    ``"id"`` or else its ``"text"``; an object's ``id`` attribute). ``score(item)``, when
    given, reads an item's upstream score; the fused entry keeps the highest. An item that
    appears twice in one list counts at its best rank there. Ties keep first-seen order.
    """
    if not (isinstance(k, (int, float)) and math.isfinite(k) and k >= 0):
        raise ValueError(f"k must be a finite number >= 0, not {k!r}")
    key = id or _default_id
    fused: dict[Hashable, Fused] = {}
    for list_index, ranking in enumerate(rankings):
        if isinstance(ranking, (str, bytes)):
            raise TypeError(f"ranking {list_index} is a string; give a list of items")
        for rank, item in enumerate(ranking, 1):
            name = key(item)
            entry = fused.get(name)
            if entry is None:
                entry = fused[name] = Fused(name, item, 0.0)
            if list_index in entry.ranks:
                continue  # a duplicate within one list: its best (first) rank counts
            entry.ranks[list_index] = rank
            entry.score += 1.0 / (k + rank)
            if score is not None:
                value = score(item)
                if value is not None and math.isfinite(value) and (
                        entry.upstream_score is None or value > entry.upstream_score):
                    entry.upstream_score = float(value)
    return sorted(fused.values(), key=lambda f: -f.score)
