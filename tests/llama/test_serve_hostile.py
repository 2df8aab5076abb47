"""`slm-rerank serve` in a hostile environment: bad records, reused pids, killed processes.

Ports are outside the range queries scan (8033-8040), so nothing here meets another
session's server. A fake llama-server (a shell script that never listens) stands in where
only the waiting matters.
"""

from __future__ import annotations

import fcntl
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from search_fixtures import CLI, cli, free_port

from slm_rerank.llama import managed as serve

pytestmark = pytest.mark.bundled_server  # slm-rerank serve starts it


@pytest.fixture
def never_listens(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A 'llama-server' that starts and never answers: a load that does not end."""
    script = tmp_path / "never-listens.sh"
    script.write_text('#!/bin/sh\necho "never listening $*"\nexec sleep 600\n')
    script.chmod(0o755)
    monkeypatch.setenv(serve.BINARY_ENV, str(script))
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


# --- the record ----------------------------------------------------------------------------


@pytest.mark.parametrize("fields", [{"pid": "x"}, {"pid": None}, {"port": [1]}, {"url": 3}])
def test_a_server_json_of_the_wrong_shape_is_no_record_not_a_traceback(
        cache: Path, tmp_path: Path, fields: dict[str, object]) -> None:
    record(cache, **fields)

    status = cli("serve", "status", cwd=tmp_path)
    stopped = cli("serve", "stop", cwd=tmp_path)

    assert (status.returncode, stopped.returncode) == (3, 0), status.stderr + stopped.stderr
    assert "Traceback" not in status.stderr + stopped.stderr
    assert stopped.stdout.startswith("not running")


@pytest.mark.parametrize("pid", [0, -1])
def test_a_pid_that_would_signal_a_whole_group_is_no_record(isolated_home: Path,
                                                            pid: int) -> None:
    # os.kill(0, ...) signals our own process group, os.kill(-1, ...) every process: this
    # test only reads the record, and removes it before anything could act on it.
    record(isolated_home, pid=pid, server_pid=pid)
    try:
        read = serve._read_state(isolated_home)
    finally:
        (isolated_home / "serve" / "server.json").unlink()

    assert read is None


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


@pytest.fixture
def bystander() -> Iterator[subprocess.Popen[bytes]]:
    """A live process that is not ours (`sleep 60`), killed when the test ends."""
    process = subprocess.Popen(["sleep", "60"])
    try:
        yield process
    finally:
        process.kill()
        process.wait()


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


# --- the model file and the address --------------------------------------------------------


def test_a_fifo_as_model_file_is_refused_without_blocking(cache: Path, tmp_path: Path) -> None:
    fifo = tmp_path / "model.gguf"
    os.mkfifo(fifo)

    run = cli("serve", "--model-file", str(fifo), "--port", str(free_port()), cwd=tmp_path,
              timeout=20)

    assert run.returncode == 1
    assert "is not a regular file" in run.stderr


def test_a_symlink_loop_as_model_file_is_an_error_not_a_traceback(cache: Path,
                                                                   tmp_path: Path) -> None:
    (tmp_path / "a.gguf").symlink_to(tmp_path / "b.gguf")
    (tmp_path / "b.gguf").symlink_to(tmp_path / "a.gguf")

    run = cli("serve", "--model-file", str(tmp_path / "a.gguf"), "--port", str(free_port()),
              cwd=tmp_path)

    assert run.returncode == 1
    assert "Traceback" not in run.stderr
    assert "cannot read the model" in run.stderr and "a.gguf" in run.stderr


def test_an_empty_model_file_is_called_empty(cache: Path, tmp_path: Path) -> None:
    empty = tmp_path / "model.gguf"
    empty.touch()

    run = cli("serve", "--model-file", str(empty), "--port", str(free_port()), cwd=tmp_path)

    assert run.returncode == 1
    assert "is empty (0 bytes)" in run.stderr


def test_a_bind_address_that_does_not_resolve_is_an_error_not_a_traceback(
        cache: Path, tmp_path: Path) -> None:
    run = cli("serve", "--background", "--bind", "not-an-address", "--port",
              str(free_port()), cwd=tmp_path, timeout=60)

    assert run.returncode == 1
    assert "Traceback" not in run.stderr
    assert "--bind not-an-address is not an address this machine resolves" in run.stderr
    assert "anyone who can reach" not in run.stderr


def test_an_ipv6_bind_gives_a_url_with_brackets(cache: Path, tmp_path: Path) -> None:
    port = free_port()

    run = cli("serve", "--background", "--bind", "::1", "--port", str(port), cwd=tmp_path,
              timeout=240)

    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == f"http://[::1]:{port}"
    assert serve.running(cache) is not None


# --- the processes -------------------------------------------------------------------------


def test_status_and_stop_see_a_server_that_is_still_loading(
        cache: Path, tmp_path: Path, never_listens: Path) -> None:
    waiting = start_waiting(["--background", "--port", str(free_port())], tmp_path)
    try:
        wait_for(lambda: b"never listening" in _log(cache))

        status = cli("serve", "status", cwd=tmp_path)
        stopped = cli("serve", "stop", cwd=tmp_path)
        _, err = waiting.communicate(timeout=30)
    finally:
        waiting.kill()

    assert status.returncode == 3
    assert status.stdout.startswith("starting: pid ")
    assert stopped.stdout.startswith("stopped the server (still loading)")
    assert "the server stopped while starting" in err
    assert b"stopped by SIGTERM while loading" in _log(cache)


def _log(cache: Path) -> bytes:
    try:
        return (cache / "serve" / "server.log").read_bytes()
    except OSError:
        return b""


def test_a_second_serve_on_the_same_cache_is_refused_while_the_first_loads(
        cache: Path, tmp_path: Path, never_listens: Path) -> None:
    first = start_waiting(["--port", str(free_port())], tmp_path)
    try:
        wait_for(lambda: b"never listening" in _log(cache))

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


def test_a_failed_start_quotes_only_its_own_lines_of_the_log(cache: Path, tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch
                                                             ) -> None:
    script = tmp_path / "fails.sh"
    script.write_text("#!/bin/sh\necho 'error: this start failed'\nexit 3\n")
    script.chmod(0o755)
    monkeypatch.setenv(serve.BINARY_ENV, str(script))
    (cache / "serve").mkdir(parents=True)
    (cache / "serve" / "server.log").write_text("an old run's line\n" * 50)

    run = cli("serve", "--background", "--port", str(free_port()), cwd=tmp_path, timeout=60)

    assert run.returncode == 1
    assert "error: this start failed" in run.stderr
    assert "an old run's line" not in run.stderr


def test_a_background_start_says_it_is_still_loading_while_it_waits(
        cache: Path, never_listens: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(serve, "PROGRESS_SECONDS", 0.5)
    said: list[str] = []
    port = free_port()
    argv = ["--cache-dir", str(cache), "--port", str(port)]
    failed: list[BaseException] = []

    def start() -> None:
        try:
            serve.start_background(serve.ServeOptions(port=port), cache, argv, said.append)
        except serve.ServeError as exc:
            failed.append(exc)

    waiter = threading.Thread(target=start)
    waiter.start()
    wait_for(lambda: any(m.startswith("still loading") for m in said))
    serve.stop(cache)
    waiter.join(timeout=30)

    assert any(m.startswith("still loading (") and "server.log" in m for m in said), said
    assert failed and "stopped while starting" in str(failed[0])



class Trickler:
    """A listener that answers HTTP a byte every half second, for ever (and never more
    than one byte per read: urllib's per-read timeout never fires)."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", free_port()))
        self.sock.listen(8)
        self.port = self.sock.getsockname()[1]
        self.stopped = threading.Event()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self.stopped.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._trickle, args=(conn,), daemon=True).start()

    def _trickle(self, conn: socket.socket) -> None:
        answer = b"HTTP/1.1 200 OK\r\nX-Slow: " + b"a" * 100_000
        with conn:
            for byte in answer:
                if self.stopped.wait(0.5):
                    return
                try:
                    conn.sendall(bytes([byte]))
                except OSError:
                    return

    def close(self) -> None:
        self.stopped.set()
        self.sock.close()


def test_a_port_that_trickles_its_answer_is_named_busy_within_the_probe_deadline(
        cache: Path, tmp_path: Path) -> None:
    trickler = Trickler()
    try:
        run = cli("serve", "--background", "--port", str(trickler.port), cwd=tmp_path,
                  timeout=60)  # the probe's total is 2 s; a hang raises TimeoutExpired
    finally:
        trickler.close()

    assert run.returncode == 1
    assert f"port {trickler.port} on 127.0.0.1 is in use by a program that does not " \
           "answer HTTP" in run.stderr
    assert "did not answer whole within 2 s" in run.stderr
