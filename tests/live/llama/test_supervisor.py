"""The supervisor (llama/supervisor.py): one per cache folder, it stops for idleness, reports
a model llama-server cannot load, and takes its llama-server with it when it is killed.

A fake llama-server (a shell script that never listens) stands in where only the waiting
matters.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from pathlib import Path

import pytest
from search_fixtures import cli, free_port
from serve_fixtures import server_log, start_waiting, wait_for, wait_gone

from slm_rerank.llama import processes

pytestmark = pytest.mark.bundled_server  # slm-rerank serve starts it


def test_an_idle_server_stops_itself(cache: Path, tmp_path: Path) -> None:
    port = free_port()
    started = cli("serve", "--background", "--port", str(port), "--idle-timeout", "2",
                  cwd=tmp_path, timeout=240)
    assert started.returncode == 0, started.stderr

    deadline = time.monotonic() + 30
    while (cache / "serve" / "server.json").exists() and time.monotonic() < deadline:
        time.sleep(0.5)

    assert processes.running(cache) is None
    assert "no query for 2 s: stopping" in (cache / "serve" / "server.log").read_text()
    assert not (cache / "serve" / "server.json").exists()


def test_a_corrupt_gguf_fails_with_the_servers_own_words(cache: Path, tmp_path: Path) -> None:
    truncated = tmp_path / "cut.gguf"
    truncated.write_bytes(b"GGUF" + b"\x03\x00\x00\x00" + b"\x00" * 64)

    run = cli("serve", "--background", "--model-file", str(truncated), "--port",
              str(free_port()), cwd=tmp_path, timeout=240)

    assert run.returncode == 1
    assert "the server stopped while starting" in run.stderr
    assert "server.log ends:" in run.stderr
    assert processes.running(cache) is None


def test_a_second_serve_on_the_same_cache_is_refused_while_the_first_loads(
        cache: Path, tmp_path: Path, never_listens: Path) -> None:
    first = start_waiting(["--port", str(free_port())], tmp_path)
    try:
        wait_for(lambda: b"never listening" in server_log(cache))

        second = cli("serve", "--port", str(free_port()), cwd=tmp_path, timeout=30)
    finally:
        first.send_signal(signal.SIGINT)
        first.communicate(timeout=30)

    assert second.returncode == 1
    assert "a managed server already runs for" in second.stderr
    assert "slm-rerank serve stop" in second.stderr


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_a_killed_supervisor_takes_its_llama_server_with_it(cache: Path,
                                                            tmp_path: Path) -> None:
    started = cli("serve", "--background", "--port", str(free_port()), cwd=tmp_path,
                  timeout=240)
    assert started.returncode == 0, started.stderr
    state = json.loads((cache / "serve" / "server.json").read_text())

    os.kill(state["pid"], signal.SIGKILL)

    assert wait_gone(state["server_pid"]), "llama-server outlived its supervisor"
    status = cli("serve", "status", cwd=tmp_path)
    assert status.returncode == 3 and "is stale" in status.stdout
