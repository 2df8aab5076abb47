"""Sliding windows over long lists, and the probability a final rank stands for."""

from __future__ import annotations

import math

import pytest
from slm_rerank_listwise.windows import calls, plan, probability, reorder


def test_a_list_that_fits_one_window_is_one_call() -> None:
    assert plan(16, 20, 10) == [(0, 16)]
    assert plan(20, 20, 10) == [(0, 20)]


def test_windows_slide_from_the_back_to_the_front_by_step() -> None:
    assert plan(30, 20, 10) == [(10, 30), (0, 20)]
    assert plan(40, 20, 10) == [(20, 40), (10, 30), (0, 20)]


def test_the_last_window_always_starts_at_the_first_candidate() -> None:
    assert plan(31, 20, 10) == [(11, 31), (1, 21), (0, 11)]


@pytest.mark.parametrize(("size", "step"), [(20, 10), (8, 4), (5, 1), (6, 6), (3, 2)])
def test_the_documented_call_count_is_the_number_of_windows(size: int, step: int) -> None:
    for n in range(0, 60):
        assert calls(n, size, step) == len(plan(n, size, step)), n
        if n > size:
            assert calls(n, size, step) == 1 + math.ceil((n - size) / step)


def test_every_candidate_is_in_some_window() -> None:
    for n in range(1, 50):
        covered = {i for start, end in plan(n, 8, 3) for i in range(start, end)}
        assert covered == set(range(n)), n


def test_the_best_candidate_at_the_back_rises_to_the_top() -> None:
    # A consistent judge (higher number = better) over 35 candidates, the best one last.
    quality = list(range(35))
    quality[0], quality[-1] = quality[-1], quality[0]
    order = list(range(35))
    for start, end in plan(35, 10, 5):
        window = order[start:end]
        ranking = sorted(range(len(window)), key=lambda i: -quality[window[i]])
        reorder(order, start, end, ranking)
    best_five = sorted(range(35), key=lambda i: -quality[i])[:5]
    assert order[:5] == best_five  # the overlap (size - step) carried the best forward


def test_a_window_is_put_in_the_order_the_answer_gives() -> None:
    order = [7, 8, 9, 10, 11]
    reorder(order, 1, 4, (2, 0, 1))
    assert order == [7, 10, 8, 9, 11]


def test_probabilities_fall_linearly_with_rank_around_one_half() -> None:
    ps = [probability(r, 16) for r in range(16)]
    assert ps[0] == pytest.approx(31 / 32) and ps[-1] == pytest.approx(1 / 32)
    steps = {round(a - b, 12) for a, b in zip(ps[:-1], ps[1:], strict=True)}
    assert steps == {round(1 / 16, 12)}
    assert ps[7] + ps[8] == pytest.approx(1.0)


def test_one_candidate_gets_one_half_ranking_says_nothing_about_it() -> None:
    assert probability(0, 1) == 0.5


def test_a_rank_outside_the_list_is_refused() -> None:
    with pytest.raises(ValueError, match="rank 3 is not in 0..2"):
        probability(3, 3)


def test_a_window_of_no_size_is_refused() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        plan(10, 0, 1)
