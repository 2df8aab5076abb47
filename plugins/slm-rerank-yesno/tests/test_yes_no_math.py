"""The verdict of one top-K list, and which token ids are answer words."""

from __future__ import annotations

import math

import pytest
from slm_rerank_yesno import AnswerIds, answer_ids_from, yes_no_verdict

from slm_rerank.plugin_kit import TokenChoice

YES_WORDS = ("yes", "Yes", " yes", " Yes", "YES")
NO_WORDS = ("no", "No", " no", " No", "NO")


def sigmoid(x: float) -> float:
    return 1 / (1 + math.exp(-x))


def lse(*values: float) -> float:
    return math.log(sum(math.exp(v) for v in values))


def test_probability_is_the_two_way_softmax_of_yes_against_no() -> None:
    top = [TokenChoice("yes", -0.021), TokenChoice("no", -3.87), TokenChoice("The", -5.0)]
    verdict = yes_no_verdict(top, YES_WORDS, NO_WORDS)
    assert verdict.logit == pytest.approx(-0.021 + 3.87)
    assert verdict.probability == pytest.approx(sigmoid(3.849))
    assert verdict.bounded is None and verdict.note is None


def test_every_variant_of_an_answer_adds_its_probability() -> None:
    top = [TokenChoice(" yes", -1.0), TokenChoice("Yes", -2.0), TokenChoice("YES", -6.0),
           TokenChoice(" no", -1.5), TokenChoice("No", -3.0), TokenChoice("maybe", -7.0)]
    verdict = yes_no_verdict(top, YES_WORDS, NO_WORDS)
    assert verdict.logit == pytest.approx(lse(-1.0, -2.0, -6.0) - lse(-1.5, -3.0))
    assert verdict.probability == pytest.approx(sigmoid(verdict.logit))


def test_text_is_matched_stripped_and_case_folded_with_piece_markers_read_as_spaces() -> None:
    top = [TokenChoice("\u2581Yes", -1.0), TokenChoice("\u0120no", -2.0),
           TokenChoice("yes\n", -3.0), TokenChoice("yesterday", -4.0)]
    verdict = yes_no_verdict(top, (" yes",), (" no",))
    assert verdict.logit == pytest.approx(lse(-1.0, -3.0) - -2.0)


def test_known_ids_decide_which_candidates_are_answers() -> None:
    # By text "Yes" would count (case-folded); by id only the profile's own token does.
    ids = AnswerIds(yes=frozenset({9693}), no=frozenset({2152}))
    top = [TokenChoice("yes", -0.5, 9693), TokenChoice("Yes", -1.0, 8241),
           TokenChoice("no", -2.0, 2152)]
    verdict = yes_no_verdict(top, ("yes",), ("no",), ids)
    assert verdict.logit == pytest.approx(-0.5 - -2.0)


def test_a_candidate_without_an_id_is_matched_by_its_text() -> None:
    ids = AnswerIds(yes=frozenset({9693}), no=frozenset({2152}))
    top = [TokenChoice("yes", -0.5), TokenChoice("no", -2.0)]  # vLLM's legacy shape: no ids
    assert yes_no_verdict(top, ("yes",), ("no",), ids).logit == pytest.approx(1.5)


def test_a_missing_yes_is_bounded_by_the_smallest_logprob_and_said_so() -> None:
    top = [TokenChoice("no", -0.1), TokenChoice("The", -3.0), TokenChoice("If", -6.5)]
    verdict = yes_no_verdict(top, YES_WORDS, NO_WORDS)
    assert verdict.bounded == "yes"
    assert verdict.logit == pytest.approx(-6.5 - -0.1)
    assert verdict.probability == pytest.approx(sigmoid(-6.4))
    assert "upper bound" in verdict.note and "-6.50" in verdict.note


def test_a_missing_no_is_bounded_by_the_smallest_logprob_and_said_so() -> None:
    top = [TokenChoice(" yes", -0.3), TokenChoice(" maybe", -4.25)]
    verdict = yes_no_verdict(top, YES_WORDS, NO_WORDS)
    assert verdict.bounded == "no"
    assert verdict.logit == pytest.approx(-0.3 - -4.25)
    assert "lower bound" in verdict.note


def test_no_answer_word_at_all_is_an_even_verdict_flagged_as_bounded_on_both_sides() -> None:
    # what the Gemma 270M base model does in a chat-turn layout (DESIGN.md)
    top = [TokenChoice("You", -1.2), TokenChoice("If", -1.9), TokenChoice("The", -2.4)]
    verdict = yes_no_verdict(top, YES_WORDS, NO_WORDS)
    assert (verdict.probability, verdict.logit, verdict.bounded) == (0.5, 0.0, "both")
    assert "'You'" in verdict.note


def test_a_candidate_with_probability_zero_carries_no_mass() -> None:
    # legacy llama.cpp gives probabilities; a 0 becomes -inf and must not be the bound
    top = [TokenChoice("yes", -0.7), TokenChoice("no", -math.inf), TokenChoice("A", -2.0)]
    verdict = yes_no_verdict(top, YES_WORDS, NO_WORDS)
    assert verdict.bounded == "no"
    assert verdict.logit == pytest.approx(-0.7 - -2.0)


def test_extreme_logits_stay_probabilities() -> None:
    verdict = yes_no_verdict([TokenChoice("no", 0.0), TokenChoice("yes", -800.0)],
                             YES_WORDS, NO_WORDS)
    assert verdict.probability == 0.0 and verdict.logit == -800.0


# --- answer-word ids from the server's tokenizer -------------------------------------------


def test_one_token_words_give_their_ids_and_longer_words_are_left_to_text() -> None:
    ids = answer_ids_from(("yes", " yes", "YES"), ("no", " no"),
                          [[9693], [5081], [56, 1331], [2152], [708]])
    assert ids == AnswerIds(yes=frozenset({9693, 5081}), no=frozenset({2152, 708}))


def test_a_server_that_cannot_tokenize_means_matching_by_text() -> None:
    assert answer_ids_from(("yes",), ("no",), [None, None]) is None


def test_two_words_sharing_an_id_means_matching_by_text() -> None:
    # a tokenizer that puts a space before a lone word gives "yes" the id of " yes"
    assert answer_ids_from(("yes", " yes"), ("no",), [[5081], [5081], [708]]) is None


def test_a_side_without_a_one_token_word_means_matching_by_text() -> None:
    assert answer_ids_from(("yes",), ("no",), [[9693], [110, 111]]) is None
