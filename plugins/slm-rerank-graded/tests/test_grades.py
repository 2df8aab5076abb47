"""Reading a grade: the strict text parser and the expected value over digit tokens."""

from __future__ import annotations

import math

import pytest
from slm_rerank_graded.grades import (
    SHORT_ANSWER_CHARS,
    GradeError,
    continuation,
    digit_mass,
    expected_grade,
    grade_of_token,
    is_blank,
    parse_grade,
)

from slm_rerank.plugin_kit import TokenChoice

# --- the strict parser ---------------------------------------------------------------------


@pytest.mark.parametrize(("answer", "grade"), [
    ("7", 7), (" 7", 7), ("7\n", 7), ("0", 0), ("10", 10),
    (" 7/10", 7), ("10/10", 10), ("7 / 10", 7), ("Score: 7", 7), ("7 out of 10", 7),
    ("Relevance score: 7", 7), ("7.", 7), ("7, because", 7), ("+7", 7),
    ("8\nThe document is about retries", 8),
])
def test_an_integer_alone_or_the_first_integer_of_a_short_answer_is_the_grade(
        answer: str, grade: int) -> None:
    assert parse_grade(answer, 10) == grade


@pytest.mark.parametrize(("answer", "reason"), [
    ("", "an empty answer"),
    ("  \n ", "an empty answer"),
    ("Rate how relevant the Document is", "no integer"),   # recorded from Gemma 270M base
    ("yes", "no integer"),
    ("seven", "no integer"),
    ("The document is about retries, 3 of them", "no integer within its first 20"),
    ("11", "above the maximum 10"),
    ("100", "above the maximum 10"),
    ("-3", "a negative number"),
    ("\u22123", "a negative number"),
    ("7.5", "a decimal number"),
    ("7,5", "a decimal number"),
    ("3/5", "a scale of 5, not 10"),
])
def test_an_answer_that_is_no_grade_is_a_failure_not_a_zero(answer: str, reason: str) -> None:
    with pytest.raises(GradeError, match=reason) as caught:
        parse_grade(answer, 10)
    assert caught.value.answer == answer


def test_the_short_answer_limit_counts_from_the_first_line_stripped() -> None:
    assert parse_grade(" " * 40 + "x" * (SHORT_ANSWER_CHARS - 1) + "7", 10) == 7
    with pytest.raises(GradeError, match="no integer within"):
        parse_grade("x" * SHORT_ANSWER_CHARS + "7", 10)


def test_the_maximum_is_the_scale_of_the_setting() -> None:
    assert parse_grade("5/5", 5) == 5
    with pytest.raises(GradeError, match="above the maximum 5"):
        parse_grade("6", 5)


# --- digit tokens --------------------------------------------------------------------------


@pytest.mark.parametrize(("token", "grade"), [
    ("7", 7), (" 7", 7), ("\u25817", 7), ("\u01207", 7), ("10", 10),
    ("11", None), ("7.", None), ("x", None), ("\u0667", None), (" ", None),
])
def test_a_token_spells_a_grade_when_it_is_digits_alone_up_to_the_maximum(
        token: str, grade: int | None) -> None:
    assert grade_of_token(token, 10) == grade


@pytest.mark.parametrize(("token", "blank"), [
    (" ", True), ("\u2581", True), ("  ", True), ("\n", False), ("\n\n", False),
    (" 7", False), ("", False),
])
def test_a_space_alone_is_a_blank_token_a_newline_is_not(token: str, blank: bool) -> None:
    assert is_blank(token) is blank


def test_the_expected_grade_is_renormalised_over_the_grade_tokens_present() -> None:
    top = (TokenChoice("7", math.log(0.5)), TokenChoice(" 7", math.log(0.1)),
           TokenChoice("3", math.log(0.2)), TokenChoice("Page", math.log(0.15)),
           TokenChoice("12", math.log(0.05)))
    mass = digit_mass(top, 10)
    assert mass.grades == pytest.approx({7: 0.6, 3: 0.2})
    assert mass.mass == pytest.approx(0.8)  # "Page" and the out-of-range "12" are not grades
    assert mass.spelling[7] == "7"  # the likelier spelling
    assert expected_grade(mass.grades) == pytest.approx((7 * 0.6 + 3 * 0.2) / 0.8)


def test_after_a_1_a_0_makes_10_a_digit_beyond_the_maximum_drops_and_anything_else_ends_it(
        ) -> None:
    after = (TokenChoice("\n\n", math.log(0.5)), TokenChoice("0", math.log(0.3)),
             TokenChoice("5", math.log(0.1)), TokenChoice("/", math.log(0.1)))
    assert continuation(1, after, 10) == pytest.approx({1: 0.6, 10: 0.3})


def test_a_continuation_with_no_mass_keeps_the_first_digit() -> None:
    assert continuation(1, (TokenChoice("0", -math.inf),), 10) == {1: 1.0}
