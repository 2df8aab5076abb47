"""What a caller brings to the warm process besides its folder, environment and stdin: its
umask, and a folder that is gone by the time the worker takes the request. Each is as the
command would have it in its own process, and the worker stays.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from search_fixtures import CLI, cli
from test_warm_process import (  # noqa: F401 - runtime is a fixture
    OFF,
    ON,
    QUERY,
    runtime,
    wait_for_warm,
    worker_of,
)

pytestmark = pytest.mark.usefixtures("runtime")


def with_umask(mask: int, repo: Path, env: dict[str, str]) -> None:
    done = subprocess.run([str(CLI), *QUERY], cwd=repo, env={**os.environ, **env},
                          stdin=subprocess.DEVNULL, capture_output=True, timeout=30,
                          preexec_fn=lambda: os.umask(mask))  # noqa: PLW1509 - no threads here
    assert done.returncode == 0, done.stderr


def usage_log_mode(repo: Path, mask: int, env: dict[str, str]) -> int:
    """The mode of the usage log a search by a caller with umask ``mask`` creates."""
    log = Path(os.environ["SLM_RERANK_CACHE_DIR"]) / "usage.jsonl"
    log.unlink(missing_ok=True)
    with_umask(mask, repo, env)
    return log.stat().st_mode & 0o777


def test_a_command_creates_its_files_with_its_callers_umask(repo: Path) -> None:
    cli(*QUERY, cwd=repo, env=ON)  # started by a caller with the usual umask
    wait_for_warm(repo, ON)
    worker, ran = worker_of(repo, ON)
    alone = usage_log_mode(repo, 0o077, OFF)
    assert alone == 0o600
    assert usage_log_mode(repo, 0o077, ON) == alone
    assert worker_of(repo, ON) == (worker, ran + 1)  # answered by the worker
    assert usage_log_mode(repo, 0o022, ON) == 0o644  # and the next caller's own again
