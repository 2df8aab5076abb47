"""The contract suites themselves: they pass for a good plugin and fail for a broken one."""

from __future__ import annotations

from collections.abc import Callable

import fake_plugins as fakes
import pytest

import slm_rerank
from slm_rerank.registrations import ModelProfile, QueryExpander, Scorer
from slm_rerank.testing import ModelProfileContract, QueryExpanderContract, ScorerContract


class TestFakeProfiles(ModelProfileContract):
    plugin = fakes.Profiles()
    distribution = None
    names = {"raw"}


class TestFakeScorers(ScorerContract):
    plugin = fakes.Scorers()
    distribution = None
    names = {"overlap"}


class TestFakeExpanders(QueryExpanderContract):
    plugin = fakes.Expanders()
    distribution = None
    names = {"synonyms"}


class NoDocumentField:
    @slm_rerank.hookimpl
    def register_model_profiles(self, register: Callable[[ModelProfile], None]) -> None:
        register(ModelProfile("broken", "forgets the document",
                              template="Query: {query}\nRelevant:",
                              yes_words=(" yes",), no_words=(" no",)))


class OutOfRange:
    @slm_rerank.hookimpl
    def register_scorers(self, register: Callable[[Scorer], None]) -> None:
        register(Scorer("logits", "raw logits, not probabilities",
                        lambda query, documents, **_: [3.2 for _ in documents]))


class EmptyWords:
    @slm_rerank.hookimpl
    def register_query_expanders(self, register: Callable[[QueryExpander], None]) -> None:
        register(QueryExpander("blank", "returns blanks", lambda q: ["", " "]))


@pytest.mark.parametrize(("contract", "plugin", "test"), [
    (ModelProfileContract, NoDocumentField(), "test_template_has_every_field"),
    (ScorerContract, OutOfRange(), "test_one_probability_per_document"),
    (QueryExpanderContract, EmptyWords(), "test_expansions_are_words"),
])
def test_a_contract_fails_a_plugin_that_breaks_it(contract, plugin, test) -> None:  # type: ignore[no-untyped-def]
    suite = type("Suite", (contract,), {"plugin": plugin, "distribution": None,
                                        "names": set()})()
    with pytest.raises(AssertionError):
        getattr(suite, test)()
