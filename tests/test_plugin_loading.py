"""Entry-point loading: choosing and disabling plugins, broken plugins, and check_pending."""

from __future__ import annotations

import importlib.metadata
import types

import pluggy
import pytest
from search_fixtures import run_at_once

import slm_rerank
from slm_rerank.plugins import LOAD_PLUGINS_ENV, load_entry_points, make_manager


class FakeDist:
    def __init__(self, name: str) -> None:
        self.name = name
        self.version = "9.9"


class FakeEntryPoint:
    def __init__(self, name: str, dist: str, load) -> None:  # type: ignore[no-untyped-def]
        self.name = name
        self.dist = FakeDist(dist)
        self._load = load
        self.loaded = False

    def load(self):  # type: ignore[no-untyped-def]
        self.loaded = True
        return self._load()


def good_module() -> types.ModuleType:
    module = types.ModuleType("good_plugin")

    @slm_rerank.hookimpl
    def register_scorers(register):  # type: ignore[no-untyped-def]
        return None

    module.register_scorers = register_scorers  # type: ignore[attr-defined]
    return module


def broken_module() -> types.ModuleType:
    raise ImportError("No module named 'missing_dependency'")


def misspelt_module() -> types.ModuleType:
    module = types.ModuleType("misspelt_plugin")

    @slm_rerank.hookimpl
    def register_scorer(register):  # type: ignore[no-untyped-def]
        return None

    module.register_scorer = register_scorer  # type: ignore[attr-defined]
    return module


@pytest.fixture
def entry_points(monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    """The installed entry points, faked; no load restriction unless a test sets one."""
    eps: list[FakeEntryPoint] = []
    monkeypatch.delenv(LOAD_PLUGINS_ENV, raising=False)

    def fake(group: str):  # type: ignore[no-untyped-def]
        assert group == "slm_rerank"
        return list(eps)

    monkeypatch.setattr(importlib.metadata, "entry_points", fake)
    return eps


def test_a_plugin_that_fails_to_import_is_reported_and_the_others_load(entry_points) -> None:
    entry_points += [FakeEntryPoint("broken", "slm-rerank-broken", broken_module),
                     FakeEntryPoint("good", "slm-rerank-good", good_module)]
    pm = make_manager()
    infos = load_entry_points(pm)
    assert infos["broken"].error == "ImportError: No module named 'missing_dependency'"
    assert infos["good"].error is None
    assert infos["good"].hooks == ["register_scorers"]
    assert pm.has_plugin("good") and not pm.has_plugin("broken")


def test_disabled_plugins_are_blocked_before_import(entry_points) -> None:
    by_name = FakeEntryPoint("good", "slm-rerank-good", good_module)
    by_dist = FakeEntryPoint("other", "slm-rerank-other", good_module)
    entry_points += [by_name, by_dist]
    pm = make_manager()
    infos = load_entry_points(pm, disabled=["good", "slm-rerank-other"])
    assert not by_name.loaded and not by_dist.loaded
    assert infos == {}
    assert pm.is_blocked("good") and pm.is_blocked("other")


def test_without_load_plugins_env_every_installed_plugin_loads(entry_points) -> None:
    entry_points += [FakeEntryPoint("one", "slm-rerank-one", good_module),
                     FakeEntryPoint("two", "slm-rerank-two", good_module)]
    infos = load_entry_points(make_manager())
    assert sorted(infos) == ["one", "two"]


def test_load_plugins_env_loads_only_the_plugins_it_names(
        entry_points, monkeypatch: pytest.MonkeyPatch) -> None:
    by_name = FakeEntryPoint("one", "slm-rerank-one", good_module)
    by_dist = FakeEntryPoint("two", "slm-rerank-two", good_module)
    unnamed = FakeEntryPoint("three", "slm-rerank-three", broken_module)
    entry_points += [by_name, by_dist, unnamed]
    monkeypatch.setenv(LOAD_PLUGINS_ENV, " one ,slm-rerank-two,")
    pm = make_manager()
    infos = load_entry_points(pm)
    assert sorted(infos) == ["one", "two"]
    assert by_name.loaded and by_dist.loaded
    assert not unnamed.loaded, "a plugin the variable does not name is never imported"
    assert not pm.has_plugin("three")


def test_an_empty_load_plugins_env_loads_no_plugin(
        entry_points, monkeypatch: pytest.MonkeyPatch) -> None:
    plugin = FakeEntryPoint("one", "slm-rerank-one", good_module)
    entry_points.append(plugin)
    monkeypatch.setenv(LOAD_PLUGINS_ENV, "")
    pm = make_manager()
    assert load_entry_points(pm) == {}
    assert not plugin.loaded and pm.get_plugins() == set()


def test_a_misspelt_hook_is_a_loud_error(entry_points) -> None:
    entry_points.append(FakeEntryPoint("typo", "slm-rerank-typo", misspelt_module))
    with pytest.raises(pluggy.PluginValidationError, match="register_scorer"):
        load_entry_points(make_manager())


def test_hookimpl_is_reexported_from_the_package() -> None:
    assert isinstance(slm_rerank.hookimpl, pluggy.HookimplMarker)


def test_threads_sharing_a_host_all_see_the_installed_plugins() -> None:
    from slm_rerank.host import Host

    def first_look(host: Host, seen: list[list[str]]) -> None:
        seen.append(sorted(host.registry.scorers()))

    for _ in range(5):
        host, seen = Host.from_environment(), []
        assert run_at_once(lambda h=host, s=seen: first_look(h, s)) == []
        assert all("yesno" in names for names in seen), seen
