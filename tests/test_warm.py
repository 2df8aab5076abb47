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
