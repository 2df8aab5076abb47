"""Helpers for the tests of the managed llama-server (``slm-rerank serve``, slm_rerank/llama/):
a fake llama-server, records written as a (dead) supervisor would, and waits on processes.

``never_listens`` is a fixture: a test folder's conftest imports it.
"""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest
from search_fixtures import CLI

from slm_rerank.llama import bundled

#: what a planted symlink's target holds; a test asserts it is still there
VICTIM_TEXT = "someone's precious file\n"


@pytest.fixture
def never_listens(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A 'llama-server' that starts and never answers: a load that does not end."""
    script = tmp_path / "never-listens.sh"
    script.write_text('#!/bin/sh\necho "never listening $*"\nexec sleep 600\n')
    script.chmod(0o755)
    monkeypatch.setenv(bundled.BINARY_ENV, str(script))
    return script


def dead_pid() -> int:
    """The pid of a process that has exited and been reaped."""
    done = subprocess.Popen(["true"])
    done.wait()
    return done.pid


def record(cache: Path, **fields: object) -> None:
    """Write a server.json as if a supervisor had (by default, one that has died)."""
    folder = cache / "serve"
    folder.mkdir(parents=True, exist_ok=True)
    # Never pid 1 as a default: code that trusts the record would signal init.
    pid = dead_pid()
    state = {"pid": pid, "server_pid": pid, "url": "http://127.0.0.1:1", "host": "127.0.0.1",
             "port": 1, "model": "m.gguf", "slots": 1, "started": 0.0, "idle": 0.0, "log": ""}
    (folder / "server.json").write_text(json.dumps({**state, **fields}))


def gone(pid: int) -> bool:
    """True once ``pid`` has exited (a zombie nobody reaps counts as exited)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return True
    return fields[0] in ("Z", "X")


def wait_gone(pid: int, seconds: float = 15) -> bool:
    deadline = time.monotonic() + seconds
    while not gone(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    return gone(pid)


def start_waiting(args: list[str], cwd: Path) -> subprocess.Popen[str]:
    """`slm-rerank serve ARGS` in the background of the test, its output kept."""
    return subprocess.Popen([str(CLI), "serve", *args], cwd=cwd, stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def wait_for(predicate: object, seconds: float = 20) -> None:
    deadline = time.monotonic() + seconds
    while not predicate() and time.monotonic() < deadline:  # type: ignore[operator]
        time.sleep(0.1)


def server_json(cache: Path) -> dict[str, object]:
    return json.loads((cache / "serve" / "server.json").read_text())


def server_log(cache: Path) -> bytes:
    try:
        return (cache / "serve" / "server.log").read_bytes()
    except OSError:
        return b""
