"""The contract suites themselves: they pass for a good plugin and fail for a broken one."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator, Callable

import fake_plugins as fakes
import pytest

import slm_rerank
from slm_rerank.registrations import (
    DocumentScore,
    ModelProfile,
    QueryExpander,
    Scorer,
    ScoreRequest,
    WeightedTerm,
)
from slm_rerank.testing import ModelProfileContract, QueryExpanderContract, ScorerContract


class TestFakeProfiles(ModelProfileContract):
    plugin = fakes.Profiles()
    distribution = None
    names = {"raw", "raw-it"}
    claimed_ids = {"gemma-3-270m": "raw", "gemma-3-1b-it": "raw-it", "llama-3": None}


class TestFakeScorers(ScorerContract):
    plugin = fakes.Scorers()
    distribution = None
    names = {"overlap"}


class TestFakeExpanders(QueryExpanderContract):
    plugin = fakes.Expanders()
    distribution = None
    names = {"synonyms"}


def profile_plugin(profile: ModelProfile) -> object:
    class One:
        @slm_rerank.hookimpl
        def register_model_profiles(self, register: Callable[[ModelProfile], None]) -> None:
            register(profile)

    return One()


async def _out_of_range(request: ScoreRequest) -> AsyncIterator[DocumentScore]:
    for i, _ in enumerate(request.documents):
        yield DocumentScore(i, 3.2)


class OutOfRange:
    @slm_rerank.hookimpl
    def register_scorers(self, register: Callable[[Scorer], None]) -> None:
        register(Scorer("logits", "raw logits, not probabilities", _out_of_range))


class EmptyWords:
    @slm_rerank.hookimpl
    def register_query_expanders(self, register: Callable[[QueryExpander], None]) -> None:
        register(QueryExpander("blank", "returns blanks",
                               lambda request: [WeightedTerm(" "), WeightedTerm("x", -1)]))


GOOD = fakes.RAW_PROFILE


@pytest.mark.parametrize(("contract", "plugin", "test"), [
    (ModelProfileContract, profile_plugin(dataclasses.replace(
        GOOD, completion="{instruction}\nQuery: {query}\nRelevant:")),
     "test_layouts_ask_the_query_before_the_document"),
    (ModelProfileContract, profile_plugin(dataclasses.replace(
        GOOD, completion="{document}\n{instruction}\nQuery: {query}\nRelevant:")),
     "test_layouts_ask_the_query_before_the_document"),
    (ModelProfileContract, profile_plugin(dataclasses.replace(GOOD, no_words=(" yes",))),
     "test_answer_words_are_distinct"),
    (ScorerContract, OutOfRange(), "test_one_probability_per_document"),
    (QueryExpanderContract, EmptyWords(), "test_expansions_are_weighted_words"),
])
def test_a_contract_fails_a_plugin_that_breaks_it(contract, plugin, test) -> None:  # type: ignore[no-untyped-def]
    suite = type("Suite", (contract,), {"plugin": plugin, "distribution": None,
                                        "names": set()})()
    with pytest.raises(Exception):  # noqa: B017  (an assertion, or the ContractError it checks)
        getattr(suite, test)()
