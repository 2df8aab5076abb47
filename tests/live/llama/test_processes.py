"""Which processes are ours (llama/processes.py): a reused or foreign pid is never
signalled, and the llama-server a dead supervisor left is stopped by the next start.

Ports are outside the range queries scan (8033-8040), so nothing here meets another
session's server.
"""

from __future__ import annotations

import fcntl
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from search_fixtures import cli, free_port
from serve_fixtures import dead_pid, record

from slm_rerank.llama import control, processes

pytestmark = pytest.mark.bundled_server  # slm-rerank serve starts it


@pytest.fixture
def bystander() -> Iterator[subprocess.Popen[bytes]]:
    """A live process that is not ours (`sleep 60`), killed when the test ends."""
    process = subprocess.Popen(["sleep", "60"])
    try:
        yield process
    finally:
        process.kill()
        process.wait()


def test_stop_never_signals_a_process_that_reused_a_stale_pid(cache: Path,
                                                               tmp_path: Path) -> None:
    bystander = subprocess.Popen(["sleep", "600"])
    try:
        record(cache, pid=bystander.pid, server_pid=bystander.pid)
        (cache / "serve" / "server.pid").write_text(f"{bystander.pid}\n")

        status = cli("serve", "status", cwd=tmp_path)
        stopped = cli("serve", "stop", cwd=tmp_path)

        assert bystander.poll() is None, "serve stop killed an unrelated process"
        assert status.returncode == 3 and "is stale" in status.stdout
        assert stopped.stdout.startswith("not running")
        assert not (cache / "serve" / "server.json").exists()
    finally:
        bystander.kill()
        bystander.wait()


def test_status_calls_a_live_reused_supervisor_pid_another_process_not_gone(
        cache: Path, tmp_path: Path, bystander: subprocess.Popen[bytes]) -> None:
    record(cache, pid=bystander.pid, server_pid=bystander.pid)

    status = cli("serve", "status", cwd=tmp_path)

    assert status.returncode == 3
    assert "is gone" not in status.stdout
    assert f"names supervisor pid {bystander.pid} (sleep 60)" in status.stdout
    assert "another process now, not slm-rerank serve" in status.stdout


def test_stop_never_signals_the_pid_in_a_pid_file_locked_by_someone_else(
        cache: Path, tmp_path: Path, bystander: subprocess.Popen[bytes]) -> None:
    # The lock says "a supervisor lives"; the number in the file must still be ours to be
    # signalled. Here this test holds the lock and the file names an unrelated process.
    (cache / "serve").mkdir(parents=True, exist_ok=True)
    with open(cache / "serve" / "server.pid", "w") as held:
        held.write(f"{bystander.pid}\n")
        held.flush()
        fcntl.flock(held, fcntl.LOCK_EX)

        status = cli("serve", "status", cwd=tmp_path)
        stopped = cli("serve", "stop", cwd=tmp_path)

        assert bystander.poll() is None, "serve stop signalled a process that is not ours"
    assert status.returncode == 3
    assert stopped.stdout.startswith("not running")
    for said in (status.stdout, stopped.stdout):
        assert f"names pid {bystander.pid} (sleep 60), which is not a slm-rerank serve " \
               "supervisor; nothing was signalled" in said


def orphan(port: int) -> subprocess.Popen[bytes]:
    """A process holding ``port`` whose arguments are a managed llama-server's."""
    code = ("import socket, time\n"
            "s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"
            f"s.bind(('127.0.0.1', {port})); s.listen(4); print('up', flush=True)\n"
            "time.sleep(600)\n")
    process = subprocess.Popen([sys.executable, "-c", code, "-m", "m.gguf", "--host",
                                "127.0.0.1", "--port", str(port)], stdout=subprocess.PIPE)
    assert process.stdout is not None and process.stdout.readline() == b"up\n"
    return process


def test_a_start_stops_the_llama_server_a_dead_supervisor_left_on_its_port(
        cache: Path, tmp_path: Path) -> None:
    port = free_port()
    left = orphan(port)
    try:
        record(cache, pid=dead_pid(), server_pid=left.pid, port=port,
               url=f"http://127.0.0.1:{port}")

        run = cli("serve", "--background", "--port", str(port), cwd=tmp_path, timeout=240)

        assert left.poll() is not None, "the orphan still holds the port"
        assert run.returncode == 0, run.stderr
        assert run.stdout.strip() == f"http://127.0.0.1:{port}"
    finally:
        left.kill()
        left.wait()


def pretend_supervisor(cache: Path, module: str) -> subprocess.Popen[bytes]:
    """A process that holds ``server.pid`` as a supervisor does, run as ``-m MODULE``."""
    (cache / "serve").mkdir(parents=True, exist_ok=True)
    code = ("import fcntl, os, sys, time\n"
            f"f = open({str(cache / 'serve' / 'server.pid')!r}, 'w')\n"
            "f.write(f'{os.getpid()}\\n'); f.flush(); fcntl.flock(f, fcntl.LOCK_EX)\n"
            "print('up', flush=True); time.sleep(600)\n")
    process = subprocess.Popen([sys.executable, "-c", code, "-m", module, "--cache-dir",
                                str(cache)], stdout=subprocess.PIPE)
    assert process.stdout is not None and process.stdout.readline() == b"up\n"
    return process


@pytest.mark.parametrize("module", [processes.SUPERVISOR_MODULE, "slm_rerank.serve"])
def test_a_supervisor_is_known_by_what_background_runs_and_by_the_old_spelling(
        cache: Path, module: str) -> None:
    # slm_rerank.serve: what installs before the llama/ package ran; one started before an
    # upgrade must still be reported and stopped after it
    held = pretend_supervisor(cache, module)
    try:
        said = control.stop(cache, wait=5)

        assert said == f"stopped the server (still loading) (pid {held.pid})"
        assert not processes.alive(held.pid)  # stop waited for it (and reaped our child)
    finally:
        held.kill()
        held.wait()


def test_a_process_holding_the_pid_file_under_another_name_is_not_signalled(
        cache: Path) -> None:
    held = pretend_supervisor(cache, "slm_rerank.elsewhere")
    try:
        said = control.stop(cache, wait=5)

        assert held.poll() is None, "serve stop signalled a process that is not ours"
        assert said.startswith("not running") and "nothing was signalled" in said
    finally:
        held.kill()
        held.wait()
