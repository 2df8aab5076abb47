"""A test's environment kept apart from the user's: config, cache, plugins and every
environment name slm-rerank reads.

A plugin's ``tests/conftest.py`` takes the autouse fixture with one import::

    from slm_rerank.testing.isolation import isolated_home  # noqa: F401

Which names are cleared is computed, not listed: every name a setting declares in its
metadata (``config_keys.Settings``, the ``env`` of each field: ``SLM_ENDPOINT``,
``SLM_HOST``, ``SLM_API_KEY``, ``SLM_RERANK_CACHE_DIR``, ...), and every name of the
tool's own prefix ``SLM_RERANK_`` the process holds (the ripgrep override, the caller's
name, the hook's deadline, ...), except the few that choose what the test harness runs
(:data:`HARNESS_NAMES`); and the few names of other tools the code reads
(:data:`FOREIGN_NAMES`). A setting given a new environment name is cleared with no edit here.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import fields
from pathlib import Path

import pytest

from slm_rerank.config import Settings
from slm_rerank.config_keys import REMOVED_ENV
from slm_rerank.plugins import BUILTIN_DISTRIBUTIONS, LOAD_PLUGINS_ENV

#: the prefix of the environment names the tool reads beside its settings'
PREFIX = "SLM_RERANK_"
#: names of the prefix that choose what the test run itself uses, kept: skip the tests that
#: need a llama-server (``make test LLAMA_SERVER=skip``), or run them against another
#: llama-server binary or model (tests/live/conftest.py)
HARNESS_NAMES = frozenset({
    "SLM_RERANK_WITHOUT_LLAMA_SERVER", "SLM_RERANK_LLAMA_SERVER", "SLM_RERANK_GGUF",
})

#: other tools' names the code reads, which change what those tools do: rg takes flags from
#: the file ``RIPGREP_CONFIG_PATH`` names (the ripgrep source then leaves its word index be)
FOREIGN_NAMES = frozenset({"RIPGREP_CONFIG_PATH"})


def declared_environment_names() -> frozenset[str]:
    """Every environment name a setting declares (its field's ``env`` metadata), and the
    names no longer read that still earn a warning when set (``REMOVED_ENV``)."""
    return frozenset(name for f in fields(Settings)
                     for name in f.metadata.get("env", ())) | frozenset(REMOVED_ENV)


def names_to_clear(environ: Mapping[str, str] | None = None) -> frozenset[str]:
    """The names :func:`isolate` removes from ``environ`` (default: this process's)."""
    environ = os.environ if environ is None else environ
    own = {name for name in environ if name.startswith(PREFIX)}
    return (declared_environment_names() | own | FOREIGN_NAMES) - HARNESS_NAMES


def isolate(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """Clear every environment name slm-rerank reads, point config and cache folders into
    ``tmp_path`` and load only the plugins the host ships; return the cache folder."""
    for name in names_to_clear():
        monkeypatch.delenv(name, raising=False)
    cache = tmp_path / "_cache" / "slm-rerank"
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "_config"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "_cache"))
    monkeypatch.setenv("SLM_RERANK_CACHE_DIR", str(cache))
    # Only the plugins this repository ships: a plugin the user installed (the template,
    # say) must not change formats, sources or names under the tests.
    monkeypatch.setenv(LOAD_PLUGINS_ENV, ",".join(sorted(BUILTIN_DISTRIBUTIONS)))
    # No warm process (slm_rerank.warm_process) outlives a test that runs the command line;
    # the tests of the warm process turn it on.
    monkeypatch.setenv("SLM_RERANK_WARM_PROCESS", "0")
    # No idle-work thread (slm_rerank.idle_work) in a test's process or the MCP server it
    # starts, from a second search on; the tests of that thread turn it on.
    monkeypatch.setenv("SLM_RERANK_IDLE_THREAD", "0")
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path / "_run"))  # its sockets, if turned on
    return cache


@pytest.fixture(autouse=True)
def isolated_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Keep the user's config, cache, plugins and environment out of every test; returns
    the cache folder."""
    return isolate(monkeypatch, tmp_path)
