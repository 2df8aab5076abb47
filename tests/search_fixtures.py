"""Shared helpers for the lexical-search tests: an isolated environment, trees, the CLI.

``conftest.py`` calls ``isolate`` for every test, so no test reads or writes the user's
config or cache.
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
import slm_rerank_ripgrep

from slm_rerank.config import Settings
from slm_rerank.host import Host
from slm_rerank.pipeline import SearchRequest, run_search
from slm_rerank.report import Report

CLI = Path(sys.executable).parent / "slm-rerank"


def isolate(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """Point config and cache folders into ``tmp_path``; return the cache folder."""
    cache = tmp_path / "_cache" / "slm-rerank"
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "_config"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "_cache"))
    monkeypatch.setenv("SLM_RERANK_CACHE_DIR", str(cache))
    # A user's own rg override or caller name must not leak into the tests.
    monkeypatch.delenv("SLM_RERANK_RG", raising=False)
    monkeypatch.delenv("SLM_RERANK_CALLER", raising=False)
    return cache


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
    subprocess.run(["git", "init", "-q", str(root)], check=True)
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


def search(root: Path, query: str, cache: Path | None = None, settings: Settings | None = None,
           **options: Any) -> Report:
    """``run_search`` in-process over ``root`` with the ripgrep source only."""
    host = Host.with_plugins(settings or Settings(), slm_rerank_ripgrep)
    request = SearchRequest(query=query, root=root, cache_dir=cache, **options)
    return run_search(request, host)


def result_paths(report: Report) -> list[str]:
    return [c.path for c in report.results]
