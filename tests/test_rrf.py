"""Reciprocal rank fusion of several ranked lists."""

from __future__ import annotations

import math
from dataclasses import dataclass

import pytest

from slm_rerank.rrf import fuse


def test_an_item_high_in_both_lists_beats_one_first_in_only_one() -> None:
    bm25 = ["a", "b", "c"]
    vector = ["b", "d", "a"]

    fused = fuse([bm25, vector])

    assert [f.id for f in fused] == ["b", "a", "d", "c"]
    assert fused[0].score == pytest.approx(1 / 62 + 1 / 61)
    assert fused[0].ranks == {0: 2, 1: 1}


def test_k_sets_how_much_the_top_ranks_dominate() -> None:
    lists = [["a", "x1", "x2", "b"], ["c", "y1", "y2", "b"]]

    # With a small k, being first once beats being fourth twice; with the usual k=60, not.
    assert fuse(lists, k=0)[0].id in ("a", "c")
    assert fuse(lists, k=60)[0].id == "b"


def test_the_best_upstream_score_per_id_is_kept() -> None:
    bm25 = [{"id": "a", "score": 12.5}, {"id": "b", "score": 3.0}]
    vector = [{"id": "b", "score": 0.91}, {"id": "a", "score": 0.40}]

    fused = {f.id: f for f in fuse([bm25, vector], score=lambda d: d["score"])}

    assert fused["a"].upstream_score == 12.5
    assert fused["b"].upstream_score == 3.0
    assert fused["a"].item == {"id": "a", "score": 12.5}  # the first object seen


def test_items_are_known_by_id_function_or_attribute() -> None:
    @dataclass
    class Hit:
        id: str
        text: str

    fused = fuse([[Hit("1", "x"), Hit("2", "y")], [Hit("2", "y'")]])

    assert [f.id for f in fused] == ["2", "1"]
    assert fuse([[(1, "x")], [(1, "z")]], id=lambda t: t[0])[0].ranks == {0: 1, 1: 1}


def test_a_duplicate_inside_one_list_counts_once_at_its_best_rank() -> None:
    fused = {f.id: f for f in fuse([["a", "b", "a"]])}

    assert fused["a"].score == pytest.approx(1 / 61)


def test_bad_input_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="k must be a finite number"):
        fuse([["a"]], k=math.nan)
    with pytest.raises(TypeError, match="ranking 0 is a string"):
        fuse(["abc"])
    with pytest.raises(TypeError, match="cannot tell the id of object"):
        fuse([[object()]])


def test_no_lists_or_empty_lists_fuse_to_nothing() -> None:
    assert fuse([]) == []
    assert fuse([[], []]) == []
