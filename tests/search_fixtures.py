"""Shared helpers for the host tests: an isolated environment, repositories, the CLI.

``conftest.py`` calls ``isolate`` for every test, so no test reads or writes the user's
config or cache, or loads a plugin the user happened to install.
"""

from __future__ import annotations

import gc
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import slm_rerank_ripgrep

from slm_rerank.config import Settings
from slm_rerank.host import Host
from slm_rerank.lexical.scope import resolve_scope
from slm_rerank.pipeline import SearchRequest, run_search
from slm_rerank.plugins import BUILTIN_DISTRIBUTIONS, LOAD_PLUGINS_ENV
from slm_rerank.report import Report

CLI = Path(sys.executable).parent / "slm-rerank"

#: What the shared ``repo`` fixture holds: a retry module with two symbols, its caller, its
#: test, a README that mentions it, and one unrelated module.
RETRY = """\
import time


def backoff(attempt):
    \"\"\"Seconds to wait before retry number ``attempt``.\"\"\"
    return 2 ** attempt


class RetryPolicy:
    def __init__(self, tries):
        self.tries = tries

    def retry(self, call):
        for attempt in range(self.tries):
            time.sleep(backoff(attempt))
            call()
"""
REPO_FILES: dict[str, str | bytes] = {
    "src/net/retry.py": RETRY,
    "src/net/client.py": "from net.retry import RetryPolicy\n\n\n"
                         "def fetch(url):\n    return RetryPolicy(3).retry(lambda: url)\n",
    "tests/test_retry.py": "from net.retry import backoff\n\n\n"
                           "def test_backoff_doubles():\n    assert backoff(2) == 4\n",
    "README.md": "# net\n\nA client with retry and backoff.\n",
    "src/colour.py": "RED = 1\n",
}


def isolate(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """Point config and cache folders into ``tmp_path``; return the cache folder."""
    cache = tmp_path / "_cache" / "slm-rerank"
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "_config"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "_cache"))
    monkeypatch.setenv("SLM_RERANK_CACHE_DIR", str(cache))
    # Only the plugins this repository ships: a plugin the user installed (the template,
    # say) must not change formats, sources or names under the host's tests.
    monkeypatch.setenv(LOAD_PLUGINS_ENV, ",".join(sorted(BUILTIN_DISTRIBUTIONS)))
    # A user's own rg override or caller name must not leak into the tests.
    monkeypatch.delenv("SLM_RERANK_RG", raising=False)
    monkeypatch.delenv("SLM_RERANK_CALLER", raising=False)
    return cache


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
    """``run_search`` in-process over ``root`` with the ripgrep source only; ``top_k`` and
    ``chunks`` among ``options`` override ``settings``, as ``slm_rerank.search``'s do."""
    given = {key: options.pop(key) for key in ("top_k", "chunks") if key in options}
    host = Host.with_plugins(settings or Settings(), slm_rerank_ripgrep).with_overrides(
        "search({key}=...)", **given)
    # Path arguments are scoped at the edge, as the CLI and API do, against the cwd.
    scope = resolve_scope(root.resolve(), options.pop("paths", ()), (), Path.cwd())
    request = SearchRequest(query=query, root=scope.root, paths=scope.paths, globs=scope.globs,
                            notes=scope.notes, cache_dir=cache, **options)
    return run_search(request, host)


def result_paths(report: Report) -> list[str]:
    return [c.path for c in report.results]


def free_port() -> int:
    """A free loopback port outside 8033-8040, the range queries scan for model servers."""
    import socket

    from slm_rerank.model.discovery import PORTS

    while True:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        if port not in PORTS:
            return port


def linear_growth(work: Callable[[str], object], small: str, large: str) -> float:
    """How many times longer ``work(large)`` takes than ``work(small)``, for a test of
    linear time: with 8 times the text, about 8 when linear, about 64 when quadratic.

    Measured in this thread's CPU time, so that waiting for a core on a busy machine does
    not count; the fastest of five alternating runs of each, with the garbage collector
    off, is the closest to the work itself. Up to two more rounds are measured only when
    the first ratio is high (another process got in the way); the lowest is returned.
    """
    work(small)  # compile the patterns, fill the caches
    ratios = []
    for _ in range(3):
        fastest = {small: float("inf"), large: float("inf")}
        gc.disable()
        try:
            for _ in range(5):
                for text in (small, large):
                    started = time.thread_time()
                    work(text)
                    fastest[text] = min(fastest[text], time.thread_time() - started)
        finally:
            gc.enable()
        ratios.append(fastest[large] / max(fastest[small], 1e-9))
        if ratios[-1] < 20:
            break
    return min(ratios)


def run_at_once(work: Callable[[], object], threads: int = 16) -> list[BaseException]:
    """Run ``work`` in ``threads`` threads released together; the exceptions they raised."""
    gate = threading.Barrier(threads)
    failures: list[BaseException] = []

    def one() -> None:
        gate.wait()
        try:
            work()
        except BaseException as exc:  # noqa: BLE001 - collected for the assertion
            failures.append(exc)

    workers = [threading.Thread(target=one) for _ in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    return failures
