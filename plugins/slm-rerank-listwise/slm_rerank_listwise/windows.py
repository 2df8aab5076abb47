"""Sliding windows over a long list, and the probability a final rank stands for.

A list longer than one prompt's ``size`` is ranked in windows from the back of the list
to the front, each window ``step`` places before the last (the sliding window of RankGPT,
Sun et al. 2023): the best of each window moves to its front, and the next window, which
overlaps it by ``size - step`` places, carries them further forward. So the best
``size - step`` candidates anywhere in the list reach the top, while a candidate of the
back half is compared only with its neighbours. The last window always starts at the
first candidate (a window that stopped short of it would never compare it).

Calls for ``n`` candidates: 1 when ``n <= size``, else ``1 + ceil((n - size) / step)``.
"""

from __future__ import annotations

from collections.abc import Sequence


def plan(n: int, size: int, step: int) -> list[tuple[int, int]]:
    """The ``(start, end)`` of each window over positions ``0..n-1``, in the order ranked."""
    if size < 1 or step < 1:
        raise ValueError(f"window size and step must be at least 1 (got {size}, {step})")
    if n <= 0:
        return []
    windows = []
    end = n
    while True:
        start = max(0, end - size)
        windows.append((start, end))
        if start == 0:
            return windows
        end -= step


def calls(n: int, size: int, step: int) -> int:
    """How many prompts ranking ``n`` candidates takes (``len(plan(n, size, step))``)."""
    if n <= 0:
        return 0
    return 1 if n <= size else 1 + -(-(n - size) // step)


def reorder(order: list[int], start: int, end: int, ranking: Sequence[int]) -> None:
    """Put ``order[start:end]`` in the order ``ranking`` gives (positions in the window)."""
    window = order[start:end]
    order[start:end] = [window[i] for i in ranking]


def probability(rank: int, n: int) -> float:
    """P(relevant) for the candidate at 0-based ``rank`` of ``n``: ``(n - rank - 0.5) / n``.

    A rank carries an order, not a strength, so the map is linear: evenly spaced, centred
    on 0.5 (logit 0, no push in the host's fusion) with the middle candidate there, never 0
    or 1 (a logit the fusion would clamp to its extreme). One candidate gets 0.5: ranking
    one thing says nothing about it. For 16 candidates the ends are 0.97 and 0.03 (logit
    +-3.4), as far as the host's clipped lexical z (+-3) reaches, so a judge of weight 1
    can overrule the lexical order at the ends, and the profile's ``judge_weight`` scales
    that for a weak model.
    """
    if not 0 <= rank < n:
        raise ValueError(f"rank {rank} is not in 0..{n - 1}")
    return (n - rank - 0.5) / n
