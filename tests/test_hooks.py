"""Each hook, called through a plugin manager that holds only fakes."""

from __future__ import annotations

from pathlib import Path

import fake_plugins as fakes
import pytest

from slm_rerank.config import Settings
from slm_rerank.host import Host
from slm_rerank.registrations import SourceQuery
from slm_rerank.registry import RegistrationError
from slm_rerank.report import Report


def registry(*plugins: object):
    return Host.with_plugins(Settings(), *plugins).registry


def test_hook_register_output_formatters() -> None:
    formatters = registry(fakes.Formats()).formatters()
    assert list(formatters) == ["paths"]
    report = Report(query="q", root="/r", mode="fast")
    assert formatters["paths"].render(report, tty=False) == ""


def test_hook_register_candidate_sources(tmp_path: Path) -> None:
    source = registry(fakes.Sources()).sources()["fixed"]
    assert source.unavailable(tmp_path) is None
    hits = source.search(SourceQuery(root=tmp_path, terms=["retry"]))
    assert hits.body_counts == {"a.py": {"retry": 1}}


def test_hook_register_query_expanders() -> None:
    expander = registry(fakes.Expanders()).expanders()["synonyms"]
    assert expander.expand("retry on timeout") == ["backoff"]


def test_hook_register_model_profiles() -> None:
    profile = registry(fakes.Profiles()).profiles()["raw"]
    assert profile.yes_words == (" yes",)
    assert "{document}" in profile.template


def test_hook_register_scorers() -> None:
    scorer = registry(fakes.Scorers()).scorers()["overlap"]
    assert scorer.score("retry policy", ["retry here", "nothing"]) == [1.0, 0.0]


def test_a_duplicate_name_is_an_error_naming_both_plugins() -> None:
    host = Host.with_plugins(Settings())
    assert host.pm is not None
    host.pm.register(fakes.Formats(), name="first")
    host.pm.register(fakes.SameFormatAgain(), name="second")
    with pytest.raises(RegistrationError) as info:
        host.registry.formatters()
    message = str(info.value)
    assert "'paths'" in message and "'first'" in message and "'second'" in message


def test_a_plugin_that_raises_while_registering_is_named() -> None:
    host = Host.with_plugins(Settings())
    assert host.pm is not None
    host.pm.register(fakes.RaisesWhileRegistering(), name="explosive")
    with pytest.raises(RegistrationError, match="plugin 'explosive' raised .*ValueError: boom"):
        host.registry.formatters()


def test_registering_the_wrong_type_is_an_error() -> None:
    with pytest.raises(RegistrationError, match="expected Scorer"):
        registry(fakes.WrongType()).scorers()


def test_names_by_plugin_attributes_each_name() -> None:
    host = Host.with_plugins(Settings())
    assert host.pm is not None
    host.pm.register(fakes.Formats(), name="fmt")
    host.pm.register(fakes.Scorers(), name="sc")
    assert host.registry.names_by_plugin() == {
        "fmt": {"register_output_formatters": ["paths"]},
        "sc": {"register_scorers": ["overlap"]},
    }
