"""Shared helpers for the host tests: an isolated environment, repositories, the CLI.

``conftest.py`` calls ``isolate`` for every test, so no test reads or writes the user's
config, cache or environment, or loads a plugin the user happened to install. What a
plugin's tests need too (``isolate``, repositories, the CLI) lives in
``slm_rerank.testing`` and is re-exported here for the host's tests.
"""

from __future__ import annotations

import gc
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import slm_rerank_ripgrep

from slm_rerank.config import Settings
from slm_rerank.host import Host
from slm_rerank.lexical.scope import resolve_scope
from slm_rerank.pipeline import SearchRequest, run_search
from slm_rerank.report import Report
from slm_rerank.testing.helpers import (  # noqa: F401 - the host tests' names for them
    CLI,
    InstalledDistribution,
    InstalledEntryPoint,
    Run,
    cli,
    git_init,
    install_plugin,
    load_plugins,
    make_repo,
    user_config,
    write_tree,
)
from slm_rerank.testing.isolation import isolate  # noqa: F401

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
