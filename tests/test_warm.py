"""What a long-lived process keeps between searches (``slm_rerank.warm``): a host while the
files and environment it was read from are unchanged, and a new one when they change."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from slm_rerank.config import user_config_path
from slm_rerank.plugins import LOAD_PLUGINS_ENV
from slm_rerank.warm import HostCache


def test_a_host_is_kept_until_a_file_or_variable_it_was_read_from_changes(
        repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cache = HostCache()
    first = cache.host_for(repo)
    assert cache.host_for(repo) is first
    assert cache.host_for(repo / "src") is first  # no config file of its own below

    config = repo / ".slm-rerank.toml"
    config.write_text("top_k = 3\n")
    third = cache.host_for(repo)
    assert third is not first and third.settings.top_k == 3
    assert third.pm is first.pm  # the plugins loaded are kept
    # the same size, a new content: the modification time tells
    stamp = config.stat()
    config.write_text("top_k = 2\n")
    os.utime(config, ns=(stamp.st_atime_ns, stamp.st_mtime_ns + 1_000_000))
    assert cache.host_for(repo).settings.top_k == 2

    user_config_path().parent.mkdir(parents=True, exist_ok=True)
    user_config_path().write_text("chunks = true\n")
    assert cache.host_for(repo).settings.chunks is True
    monkeypatch.setenv("SLM_RERANK_CACHE_DIR", str(repo.parent / "elsewhere"))
    assert cache.host_for(repo).settings.cache_dir == str(repo.parent / "elsewhere")


def test_the_plugins_allowed_are_part_of_what_a_host_was_built_from(
        repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cache = HostCache()
    assert "ripgrep" in cache.host_for(repo).registry.sources()

    monkeypatch.setenv(LOAD_PLUGINS_ENV, "slm-rerank-git")

    assert set(cache.host_for(repo).registry.sources()) == {"git"}


def test_a_config_file_that_became_unusable_is_an_error_not_the_kept_host(
        repo: Path) -> None:
    from slm_rerank.errors import ConfigError

    cache = HostCache()
    cache.host_for(repo)
    user_config_path().parent.mkdir(parents=True, exist_ok=True)
    user_config_path().write_text("top_k = [\n")

    with pytest.raises(ConfigError):
        cache.host_for(repo)


def test_a_process_that_keeps_plugins_loads_them_once_per_choice_of_plugins(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from slm_rerank import host as host_module
    from slm_rerank.host import Host, keep_plugins

    monkeypatch.setattr(host_module, "_KEPT_PLUGINS", None)
    separate = (Host.from_environment(start=tmp_path), Host.from_environment(start=tmp_path))
    assert separate[0].registry and separate[0].pm is not separate[1].registry.pm
    keep_plugins()
    first, second = Host.from_environment(start=tmp_path), Host.from_environment(start=tmp_path)
    assert first.registry.pm is second.registry.pm  # loaded once, for both
    assert "text" in second.registry.formatters()
    user_config_path().parent.mkdir(parents=True, exist_ok=True)
    user_config_path().write_text('disabled_plugins = ["formatters"]\n')
    other = Host.from_environment(start=tmp_path)
    assert other.registry.pm is not first.pm and "text" not in other.registry.formatters()
    monkeypatch.setenv(LOAD_PLUGINS_ENV, "ripgrep")
    assert Host.from_environment(start=tmp_path).registry.pm is not other.pm
