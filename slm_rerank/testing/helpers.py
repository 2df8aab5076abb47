"""Helpers a plugin's tests share with the host's: repositories on disk, the installed
command in a real process, the user's config file, and plugins made to look installed.

    from slm_rerank.testing.helpers import cli, make_repo

They run under :func:`slm_rerank.testing.isolation.isolate` (the autouse fixture
``isolated_home``), which keeps the user's config, cache and environment out.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from slm_rerank.git_runner import git_output
from slm_rerank.plugins import BUILTIN_DISTRIBUTIONS, LOAD_PLUGINS_ENV

#: the ``slm-rerank`` command installed beside this Python
CLI = Path(sys.executable).parent / "slm-rerank"


def user_config() -> Path:
    """The user's config.toml under ``isolate`` (its folder created), for settings a
    repository's own file may not set (plugin options, servers)."""
    from slm_rerank.config import user_config_path

    path = user_config_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


@dataclass
class InstalledDistribution:
    """The part of ``importlib.metadata.Distribution`` that plugin loading reads."""

    name: str
    version: str = "1.0"


@dataclass
class InstalledEntryPoint:
    """An entry point of the ``slm_rerank`` group whose ``load()`` returns ``plugin``."""

    name: str
    plugin: object
    dist: InstalledDistribution | None = None
    group: str = "slm_rerank"

    def load(self) -> object:
        return self.plugin


def install_plugin(monkeypatch: pytest.MonkeyPatch, name: str, plugin: object,
                   distribution: str | None = None) -> None:
    """Make ``plugin`` look pip-installed under entry-point ``name``, beside the real plugins.

    Isolation still applies: name it in ``$SLM_RERANK_LOAD_PLUGINS`` for the host to load it.
    """
    import importlib.metadata

    real = list(importlib.metadata.entry_points(group="slm_rerank"))
    dist = InstalledDistribution(distribution or f"slm-rerank-{name}")
    extra = InstalledEntryPoint(name, plugin, dist)

    def entry_points(group: str) -> list[Any]:
        return [*real, extra] if group == "slm_rerank" else []

    monkeypatch.setattr(importlib.metadata, "entry_points", entry_points)


def load_plugins(monkeypatch: pytest.MonkeyPatch, *names: str) -> None:
    """Let the host load the built-ins and ``names``, as ``$SLM_RERANK_LOAD_PLUGINS`` says."""
    monkeypatch.setenv(LOAD_PLUGINS_ENV, ",".join([*sorted(BUILTIN_DISTRIBUTIONS), *names]))


def write_tree(root: Path, files: dict[str, str | bytes]) -> Path:
    """Create ``files`` (relative path -> text or bytes) under ``root``."""
    for rel, content in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content, encoding="utf-8")
    return root


def git_init(root: Path) -> Path:
    """Make ``root`` a git work tree (files stay untracked; both sources see them)."""
    root.mkdir(parents=True, exist_ok=True)
    git_output(root, ["init", "-q"])  # the one git runner, as every git call
    return root


def make_repo(root: Path, files: dict[str, str | bytes]) -> Path:
    """A git repository holding ``files``."""
    return write_tree(git_init(root), files)


@dataclass
class Run:
    """What one CLI process did."""

    returncode: int
    stdout: str
    stderr: str

    def json(self) -> dict[str, Any]:
        assert self.returncode == 0, self.stderr
        return json.loads(self.stdout)

    def paths(self) -> list[str]:
        return [row["path"] for row in self.json()["results"]]


def cli(*args: str, cwd: Path, stdin: str | None = None, env: dict[str, str] | None = None,
        timeout: float = 30) -> Run:
    """Run the installed ``slm-rerank`` in a real process (stdin is /dev/null unless given)."""
    done = subprocess.run(
        [str(CLI), *args], cwd=cwd, input=stdin,
        stdin=subprocess.DEVNULL if stdin is None else None,
        capture_output=True, text=True, errors="surrogateescape", timeout=timeout,
        env={**os.environ, **(env or {})},
    )
    return Run(done.returncode, done.stdout, done.stderr)
