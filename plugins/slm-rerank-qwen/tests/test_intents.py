"""The qwen profiles ask the question of the query's intent."""

from __future__ import annotations

from slm_rerank_qwen import QWEN, QWEN_THINK

from slm_rerank.registrations import INTENTS


def test_the_qwen_profiles_word_every_intent_differently() -> None:
    for profile in (QWEN, QWEN_THINK):
        asked = {kind: profile.for_intent(kind).instruction for kind in INTENTS}

        assert len(set(asked.values())) == len(INTENTS)
        assert all(text.endswith('Answer only "yes" or "no".') for text in asked.values())
        # the question it is asked is in the prompt the server gets
        assert asked["change"] in profile.for_intent("change").render_completion("q", "d")
