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
    with pytest.raises(TypeError, match="ranking 0 is a str, not a list of items"):
        fuse(["abc"])
    with pytest.raises(TypeError, match="cannot tell the id of object"):
        fuse([[object()]])


def test_no_lists_or_empty_lists_fuse_to_nothing() -> None:
    assert fuse([]) == []
    assert fuse([[], []]) == []


def test_items_whose_id_is_none_are_known_by_their_text_not_merged_into_one() -> None:
    @dataclass
    class LangChainLike:  # a LangChain Document: id None unless the store set one
        page_content: str
        id: str | None = None

    bm25 = [{"id": None, "text": "rotate keys"}, {"id": None, "text": "billing"}]
    vector = [LangChainLike("a"), LangChainLike("b"), LangChainLike("a")]

    assert [f.id for f in fuse([bm25])] == ["rotate keys", "billing"]
    assert [(f.id, f.ranks) for f in fuse([vector, [{"page_content": "b"}]])] == [
        ("b", {0: 2, 1: 1}), ("a", {0: 1})]


def test_ids_that_differ_only_in_type_are_an_error_naming_both() -> None:
    bm25 = [{"id": 1}, {"id": 2}]  # an int primary key
    vector = [{"id": "2"}, {"id": "1"}]  # the vector store's string ids

    with pytest.raises(ValueError, match=r"ids 2 \(int\) and '2' \(str\) differ only in type"):
        fuse([bm25, vector])
    assert [f.id for f in fuse([bm25, vector], id=lambda d: str(d["id"]))] == ["1", "2"]


def test_an_id_that_cannot_name_an_item_says_to_give_an_id_function() -> None:
    with pytest.raises(TypeError, match=r"the id \['x'\] of ranking 0's item 1 is a list"):
        fuse([[{"id": ["x"]}]])


def test_a_mapping_where_a_list_of_rankings_belongs_is_refused_not_read_as_ids() -> None:
    hits = [{"id": "a"}, {"id": "b"}]

    with pytest.raises(TypeError, match=r"list\(rankings.values\(\)\)"):
        fuse({"bm25": hits, "vector": hits})  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="ranking 0 is a dict, not a list of items"):
        fuse(hits)  # one ranking, not a list of rankings: its dicts would be read as lists
    with pytest.raises(TypeError, match="ranking 1 is a NoneType"):
        fuse([hits, None])  # type: ignore[list-item]


def test_k_true_and_a_score_that_is_no_number_are_clear_errors() -> None:
    with pytest.raises(ValueError, match="k must be a finite number >= 0, not True"):
        fuse([["a"]], k=True)
    with pytest.raises(TypeError, match="score\\(\\) gave '0.9' for ranking 0's item 1"):
        fuse([[{"id": "a", "s": "0.9"}]], score=lambda d: d["s"])


def test_an_upstream_score_of_any_real_number_type_is_kept() -> None:
    from fractions import Fraction  # a numbers.Real that is no float, as numpy's float32

    fused = fuse([[{"id": "a", "s": Fraction(9, 10)}]], score=lambda d: d["s"])

    assert fused[0].upstream_score == 0.9
