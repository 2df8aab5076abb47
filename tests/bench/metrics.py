"""Retrieval metrics for the benchmark: pure functions over ranked file lists.

Ranks are 1-based. A ranking is a sequence of repository-relative POSIX paths, best first.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence

Span = tuple[int, int]  # inclusive [start_line, end_line]


def first_gold_rank(ranked: Sequence[str], gold: Iterable[str]) -> int | None:
    """The 1-based rank of the first gold file in `ranked`, or None when none is there."""
    gold_set = set(gold)
    for rank, path in enumerate(ranked, start=1):
        if path in gold_set:
            return rank
    return None


def hit_at(ranked: Sequence[str], gold: Iterable[str], k: int) -> bool:
    """True when any gold file is at rank k or better."""
    rank = first_gold_rank(ranked[:k], gold)
    return rank is not None


def reciprocal_rank(ranked: Sequence[str], gold: Iterable[str], k: int = 10) -> float:
    """1/rank of the first gold file within the top k, 0.0 when there is none (MRR@k term)."""
    rank = first_gold_rank(ranked[:k], gold)
    return 0.0 if rank is None else 1.0 / rank


def spans_overlap(a: Span, b: Span) -> bool:
    """True when two inclusive line ranges share at least one line."""
    return a[0] <= b[1] and b[0] <= a[1]


def line_hit(
    cited: Sequence[tuple[str, int, int]],
    gold_lines: Mapping[str, Sequence[Sequence[int]]],
    k: int = 5,
) -> bool:
    """True when any of the first k citations (path, start, end) overlaps a gold range of
    the same file."""
    for path, start, end in cited[:k]:
        for gold_start, gold_end in gold_lines.get(path, ()):
            if spans_overlap((start, end), (gold_start, gold_end)):
                return True
    return False


def mean(values: Iterable[float]) -> float:
    """Arithmetic mean; NaN for no values (so an empty cell shows as such, not as zero)."""
    items = list(values)
    if not items:
        return math.nan
    return sum(items) / len(items)


def macro_mean(values_by_group: Mapping[str, Sequence[float]]) -> float:
    """Mean of the per-group means (groups without values are left out)."""
    return mean(mean(vals) for vals in values_by_group.values() if vals)


def percentile(values: Iterable[float], q: float) -> float:
    """The q-th percentile (0..100) by linear interpolation between closest ranks, as
    numpy's default method does; NaN for no values."""
    if not 0.0 <= q <= 100.0:
        raise ValueError(f"percentile must be in [0, 100], got {q}")
    items = sorted(values)
    if not items:
        return math.nan
    position = (len(items) - 1) * q / 100.0
    lower = math.floor(position)
    upper = math.ceil(position)
    fraction = position - lower
    return items[lower] + (items[upper] - items[lower]) * fraction
