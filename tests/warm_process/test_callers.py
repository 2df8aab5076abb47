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


def raw_request(repo: Path, cwd: str) -> dict[str, object]:
    """A search request as a command sends it, but for the folder it names; the reply."""
    import time

    from slm_rerank.warm_process import client, wire

    env = {**os.environ, **ON}
    sock = client.connect(client.socket_path(env), time.monotonic() + 5)
    with sock:
        request = client.Request("search", list(QUERY), False, started=time.monotonic())
        head = {**client._header(request), "cwd": cwd, "env": env}
        by = time.monotonic() + 5
        wire.send_json(sock, head, by)
        wire.send_frame(sock, b"", by)
        return wire.receive_json(sock, by)


def test_a_folder_gone_before_the_worker_takes_the_request_is_refused_and_the_worker_stays(
        repo: Path, tmp_path: Path) -> None:
    cli(*QUERY, cwd=repo, env=ON)
    wait_for_warm(repo, ON)
    worker, ran = worker_of(repo, ON)
    reply = raw_request(repo, str(tmp_path / "removed"))
    assert reply["accepted"] is False
    assert "removed" in str(reply["reason"])
    assert worker_of(repo, ON) == (worker, ran)  # its memory kept for the next caller


def merged(repo: Path, env: dict[str, str]) -> str:
    """A verbose search's stdout and stderr as a caller sees them on one stream (``2>&1``)."""
    done = subprocess.run([str(CLI), *QUERY, "-v"], cwd=repo, env={**os.environ, **env},
                          stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, timeout=30)
    assert done.returncode == 0, done.stdout
    return done.stdout


def test_stdout_and_stderr_on_one_stream_come_in_the_order_of_a_run_in_process(
        repo: Path) -> None:
    cli(*QUERY, cwd=repo, env=ON)
    wait_for_warm(repo, ON)
    worker, ran = worker_of(repo, ON)
    alone = merged(repo, OFF)
    assert alone.index("retry.py") < alone.index("slm-rerank: why")  # results, then the whys
    assert merged(repo, ON) == alone
    assert worker_of(repo, ON) == (worker, ran + 1)


@pytest.mark.parametrize("stdin", [b'{"prompt": "where is backoff",,}', b'{"prompt": "a\tb"}'])
def test_a_hook_given_malformed_json_says_so_in_one_line_as_in_its_own_process(
        repo: Path, stdin: bytes) -> None:
    # the command's side reads the hook's stdin before it imports json: the scanner must
    # still say what is wrong (Python 3.11's raised SystemError, a traceback, exit 1)
    def hook(env: dict[str, str]) -> subprocess.CompletedProcess[bytes]:
        return subprocess.run([str(CLI), "hook", "claude-prompt"], cwd=repo, input=stdin,
                              env={**os.environ, **env}, capture_output=True, timeout=30)

    warm, alone = hook(ON), hook(OFF)
    assert (warm.returncode, warm.stdout, warm.stderr) == (
        alone.returncode, alone.stdout, alone.stderr)
    assert warm.returncode == 0 and warm.stdout == b""
    assert warm.stderr.startswith(b"slm-rerank hook: unreadable hook input: ")
    assert warm.stderr.count(b"\n") == 1
