"""`serve --background`, `serve status` and `serve stop` (llama/control.py): a start is
reused, reported while it loads, and its failure quotes its own lines of the log.

A fake llama-server (a shell script that never listens) stands in where only the waiting
matters.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest
from search_fixtures import cli, free_port
from serve_fixtures import server_json, server_log, start_waiting, wait_for

from slm_rerank.errors import ServeError
from slm_rerank.llama import bundled, control, ports, supervisor

pytestmark = pytest.mark.bundled_server  # slm-rerank serve starts it


def test_background_start_status_reuse_and_stop(cache: Path, tmp_path: Path) -> None:
    port = free_port()

    started = cli("serve", "--background", "--port", str(port), cwd=tmp_path, timeout=240)

    assert started.returncode == 0, started.stderr
    assert started.stdout.strip() == f"http://127.0.0.1:{port}"
    assert "waiting for the model to load" in started.stderr
    pid_line = (cache / "serve" / "server.pid").read_text().split("\n")[0]
    assert pid_line == str(server_json(cache)["pid"])
    status = cli("serve", "status", cwd=tmp_path)
    assert status.returncode == 0
    assert f"running: http://127.0.0.1:{port} model gemma-3-270m-q4_k_m.gguf" in status.stdout
    again = cli("serve", "--background", "--port", str(port), cwd=tmp_path, timeout=60)
    assert again.returncode == 0
    assert "already running" in again.stderr
    pid = int(server_json(cache)["pid"])

    stopped = cli("serve", "stop", cwd=tmp_path, timeout=60)

    assert stopped.stdout.startswith("stopped")
    assert not ports.healthy(f"http://127.0.0.1:{port}")
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    after = cli("serve", "status", cwd=tmp_path)
    assert after.returncode == 3 and after.stdout.startswith("not running")


def test_status_and_stop_see_a_server_that_is_still_loading(
        cache: Path, tmp_path: Path, never_listens: Path) -> None:
    waiting = start_waiting(["--background", "--port", str(free_port())], tmp_path)
    try:
        wait_for(lambda: b"never listening" in server_log(cache))

        status = cli("serve", "status", cwd=tmp_path)
        stopped = cli("serve", "stop", cwd=tmp_path)
        _, err = waiting.communicate(timeout=30)
    finally:
        waiting.kill()

    assert status.returncode == 3
    assert status.stdout.startswith("starting: pid ")
    assert stopped.stdout.startswith("stopped the server (still loading)")
    assert "the server stopped while starting" in err
    assert b"stopped by SIGTERM while loading" in server_log(cache)


def test_a_background_start_says_it_is_still_loading_while_it_waits(
        cache: Path, never_listens: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(control, "PROGRESS_SECONDS", 0.5)
    said: list[str] = []
    port = free_port()
    argv = ["--cache-dir", str(cache), "--port", str(port)]
    failed: list[BaseException] = []

    def start() -> None:
        try:
            control.start_background(supervisor.ServeOptions(port=port), cache, argv, said.append)
        except ServeError as exc:
            failed.append(exc)

    waiter = threading.Thread(target=start)
    waiter.start()
    wait_for(lambda: any(m.startswith("still loading") for m in said))
    control.stop(cache)
    waiter.join(timeout=30)

    assert any(m.startswith("still loading (") and "server.log" in m for m in said), said
    assert failed and "stopped while starting" in str(failed[0])


def test_a_failed_start_quotes_only_its_own_lines_of_the_log(cache: Path, tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch
                                                             ) -> None:
    script = tmp_path / "fails.sh"
    script.write_text("#!/bin/sh\necho 'error: this start failed'\nexit 3\n")
    script.chmod(0o755)
    monkeypatch.setenv(bundled.BINARY_ENV, str(script))
    (cache / "serve").mkdir(parents=True)
    (cache / "serve" / "server.log").write_text("an old run's line\n" * 50)

    run = cli("serve", "--background", "--port", str(free_port()), cwd=tmp_path, timeout=60)

    assert run.returncode == 1
    assert "error: this start failed" in run.stderr
    assert "an old run's line" not in run.stderr
