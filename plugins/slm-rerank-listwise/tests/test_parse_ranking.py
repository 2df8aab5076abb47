"""Reading a listwise answer: strict arrays, the repairs that have one reading, and the rest."""

from __future__ import annotations

import pytest
from slm_rerank_listwise.answer import Ranking, parse_ranking

# --- strict -------------------------------------------------------------------------------


def test_a_json_array_holding_each_index_once_is_read_as_is() -> None:
    assert parse_ranking("[2, 0, 3, 1]", 4) == Ranking((2, 0, 3, 1))


def test_whitespace_around_and_inside_the_array_is_not_a_repair() -> None:
    assert parse_ranking("  [ 1 ,0,\t2 ]\n", 3) == Ranking((1, 0, 2))


def test_one_candidate_in_a_one_element_array() -> None:
    assert parse_ranking("[0]", 1) == Ranking((0,))


# --- repaired, and each repair named ------------------------------------------------------


@pytest.mark.parametrize("text", [
    "The ranking is [1, 0, 2]",
    "[1, 0, 2] because candidate 1 defines the function.",
    "Sure! [1, 0, 2]\nThese are ordered by relevance.",
])
def test_prose_around_the_one_array_is_dropped(text: str) -> None:
    assert parse_ranking(text, 3) == Ranking((1, 0, 2), ("prose around the array dropped",))


def test_bracketed_words_in_the_prose_are_not_a_second_array() -> None:
    ranking = parse_ranking("Best first [most relevant]: [2, 1, 0]", 3)
    assert ranking == Ranking((2, 1, 0), ("prose around the array dropped",))


def test_an_unclosed_list_after_a_bracketed_word_is_the_array() -> None:
    ranking = parse_ranking("[best first] [2, 0, 1", 3)
    assert ranking == Ranking((2, 0, 1), ("prose around the array dropped",
                                          "missing closing bracket added"))


def test_a_trailing_comma_is_dropped() -> None:
    assert parse_ranking("[2, 0, 1,]", 3) == Ranking((2, 0, 1), ("trailing comma dropped",))


def test_a_missing_closing_bracket_on_a_complete_list_is_added() -> None:
    assert parse_ranking("[2, 0, 1", 3) == Ranking((2, 0, 1), ("missing closing bracket added",))


def test_a_list_cut_after_a_comma_gets_both_repairs() -> None:
    ranking = parse_ranking("[2, 0, 1,", 3)
    assert ranking.order == (2, 0, 1)
    assert ranking.repairs == ("missing closing bracket added", "trailing comma dropped")


def test_a_cut_list_missing_one_index_gets_both_repairs() -> None:
    ranking = parse_ranking("[2, 0", 3)
    assert ranking == Ranking((2, 0, 1), ("missing closing bracket added",
                                          "index 1 was missing: put last"))


def test_one_based_numbering_of_every_candidate_is_shifted() -> None:
    ranking = parse_ranking("[3, 1, 2]", 3)
    assert ranking == Ranking((2, 0, 1), ("1-based numbering shifted to 0-based",))


def test_exactly_one_missing_index_is_put_last() -> None:
    assert parse_ranking("[3, 0, 1]", 4) == Ranking((3, 0, 1, 2),
                                                    ("index 2 was missing: put last",))


def test_a_repeated_index_with_none_missing_keeps_its_first_place() -> None:
    ranking = parse_ranking("[1, 0, 1, 2]", 3)
    assert ranking == Ranking((1, 0, 2), ("repeated index 1 dropped (first place kept)",))


def test_an_out_of_range_index_with_none_missing_is_dropped() -> None:
    ranking = parse_ranking("[2, 0, 7, 1, -1]", 3)
    assert ranking == Ranking((2, 0, 1), ("out-of-range index 7, -1 dropped",))


def test_an_empty_array_for_one_candidate_misses_only_that_one() -> None:
    assert parse_ranking("[]", 1) == Ranking((0,), ("index 0 was missing: put last",))


def test_a_recorded_base_model_answer_copying_the_example_is_repaired() -> None:
    # Gemma 3 270M base, four candidates after a three-candidate example, answered the
    # example's "[1, 2, 0]" again (tests/fixtures/gemma-270m-listwise-completion.json).
    ranking = parse_ranking("[1, 2, 0]", 4)
    assert ranking == Ranking((1, 2, 0, 3), ("index 3 was missing: put last",))


# --- unusable, with the reason ------------------------------------------------------------


@pytest.mark.parametrize(("text", "n", "problem"), [
    ("Candidate 2 is the best.", 3, "the answer holds no array"),
    ("[best] then the others", 3, "the element 'best' is not a candidate number"),
    ("[best] and [worst]", 3, "the answer holds no array of numbers"),
    ("[0, 1, 2] or maybe [2, 1, 0]", 3, "the answer holds 2 arrays of numbers"),
    ("[2] > [0] > [1]", 3, "the answer holds 3 arrays of numbers"),
    ("[2, 0, one]", 3, "the element 'one' is not a candidate number"),
    ("[2, , 0, 1]", 3, "an empty element is not a candidate number"),
    ("[2.5, 0, 1]", 3, "the element '2.5' is not a candidate number"),
    ('["2", "0", "1"]', 3, "the element '\"2\"' is not a candidate number"),
    ("[0, 1]", 4, "indices 2, 3 are missing"),
    ("[]", 3, "indices 0, 1, 2 are missing"),
    ("[0, 1, 1]", 3, "index 2 is missing and 1 repeated"),
    ("[0, 1, 3]", 3, "index 2 is missing and 3 out of range (0-2)"),
    ("[0, 0, 5]", 3, "indices 1, 2 are missing"),
])
def test_an_ambiguous_or_broken_answer_is_unusable(text: str, n: int, problem: str) -> None:
    assert parse_ranking(text, n) == Ranking(None, (), problem)


def test_a_counting_base_model_answer_is_unusable() -> None:
    # Gemma 3 270M base without an example counts on from 1 until max_tokens stops it.
    ranking = parse_ranking("[1, 2, 3, 4, 5, 6, 7, 8, 9, 10,", 5)
    assert ranking.order is None
    assert ranking.problem == "index 0 is missing and 5, 6, 7, 8, 9, 10 out of range (0-4)"


def test_an_unclosed_list_followed_by_prose_is_unusable() -> None:
    assert parse_ranking("[2, 0, 1 are the best", 3).problem == (
        "the answer holds no array of numbers")
