"""`slm-rerank serve` and `--local` against the real llama-server binary and GGUF."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import threading
import time
from pathlib import Path

import pytest
from search_fixtures import CLI, REPO_FILES, cli, free_port, make_repo

from slm_rerank.llama import ports, processes
from slm_rerank.model.discovery import PORTS

pytestmark = pytest.mark.bundled_server  # slm-rerank serve starts it


def state(cache: Path) -> dict[str, object]:
    return json.loads((cache / "serve" / "server.json").read_text())


def test_background_start_status_reuse_and_stop(cache: Path, tmp_path: Path) -> None:
    port = free_port()

    started = cli("serve", "--background", "--port", str(port), cwd=tmp_path, timeout=240)

    assert started.returncode == 0, started.stderr
    assert started.stdout.strip() == f"http://127.0.0.1:{port}"
    assert "waiting for the model to load" in started.stderr
    assert (cache / "serve" / "server.pid").read_text().strip() == str(state(cache)["pid"])
    status = cli("serve", "status", cwd=tmp_path)
    assert status.returncode == 0
    assert f"running: http://127.0.0.1:{port} model gemma-3-270m-q4_k_m.gguf" in status.stdout
    again = cli("serve", "--background", "--port", str(port), cwd=tmp_path, timeout=60)
    assert again.returncode == 0
    assert "already running" in again.stderr
    pid = int(state(cache)["pid"])

    stopped = cli("serve", "stop", cwd=tmp_path, timeout=60)

    assert stopped.stdout.startswith("stopped")
    assert not ports.healthy(f"http://127.0.0.1:{port}")
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    after = cli("serve", "status", cwd=tmp_path)
    assert after.returncode == 3 and after.stdout.startswith("not running")


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


class Squatter:
    """Something that accepts connections on a port and never speaks HTTP."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", free_port()))
        self.sock.listen(8)
        self.port = self.sock.getsockname()[1]
        self.held: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.held.append(conn)

    def close(self) -> None:
        for conn in self.held:
            conn.close()
        self.sock.close()


def test_a_busy_port_is_an_error_naming_what_answers_there(cache: Path, tmp_path: Path) -> None:
    squatter = Squatter()
    try:
        run = cli("serve", "--port", str(squatter.port), cwd=tmp_path, timeout=60)
    finally:
        squatter.close()

    assert run.returncode == 1
    assert f"port {squatter.port} on 127.0.0.1 is in use by a program that does not " \
           "answer HTTP" in run.stderr


def test_a_missing_model_file_is_a_clear_error(cache: Path, tmp_path: Path) -> None:
    run = cli("serve", "--model-file", str(tmp_path / "nope.gguf"), "--port",
              str(free_port()), cwd=tmp_path)

    assert run.returncode == 1
    assert "nope.gguf does not exist" in run.stderr


def test_a_file_that_is_not_gguf_is_refused_before_starting(cache: Path, tmp_path: Path) -> None:
    fake = tmp_path / "model.gguf"
    fake.write_bytes(b"PK\x03\x04 a zip, not a model")

    run = cli("serve", "--background", "--model-file", str(fake), "--port",
              str(free_port()), cwd=tmp_path)

    assert run.returncode == 1
    assert "is not a GGUF model (it starts with b'PK\\x03\\x04'" in run.stderr
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


def test_binding_beyond_loopback_warns(cache: Path, tmp_path: Path) -> None:
    run = cli("serve", "--bind", "0.0.0.0", "--model-file", str(tmp_path / "nope.gguf"),
              cwd=tmp_path)

    assert "binding 0.0.0.0: anyone who can reach this address" in run.stderr


def scan_range_is_free() -> bool:
    return all(not ports.listening("127.0.0.1", port) for port in PORTS)


def test_local_starts_the_bundled_server_once_and_restarts_it_after_a_crash(
        cache: Path, tmp_path: Path) -> None:
    if not scan_range_is_free():
        pytest.skip("something listens on 127.0.0.1:8033-8040; --local would use it")
    repo = make_repo(tmp_path / "repo", REPO_FILES)
    query = ("--local", "--format", "json", "--rerank-top", "2", "-q", "retry backoff")

    first = cli(*query, cwd=repo, timeout=240)

    doc = first.json()
    assert "--local: no model server was running, so started the bundled model at " \
           "http://127.0.0.1:8035" in first.stderr
    assert doc["model"]["endpoint"] == "http://127.0.0.1:8035"
    assert doc["model"]["scored"] == 2
    second = cli(*query, cwd=repo, timeout=240)
    assert "--local:" not in second.stderr  # reused, silently
    assert second.json()["model"]["endpoint"] == "http://127.0.0.1:8035"

    # The server dies (as a crash would): its supervisor notices and clears the record ...
    os.kill(int(state(cache)["server_pid"]), signal.SIGKILL)
    deadline = time.monotonic() + 20
    while (cache / "serve" / "server.json").exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not (cache / "serve" / "server.json").exists()
    # ... and the next query starts it again.
    third = cli(*query, cwd=repo, timeout=240)
    assert "started the bundled model" in third.stderr
    assert third.json()["model"]["scored"] == 2


def test_a_query_whose_server_is_killed_mid_run_degrades(cache: Path, tmp_path: Path) -> None:
    if not scan_range_is_free():
        pytest.skip("something listens on 127.0.0.1:8033-8040; --local would use it")
    repo = make_repo(tmp_path / "repo", REPO_FILES)
    started = cli("serve", "--background", cwd=tmp_path, timeout=240)
    assert started.returncode == 0, started.stderr
    victim = int(state(cache)["server_pid"])

    query = subprocess.Popen(
        [str(CLI), "--format", "json", "--full", "--no-cache", "--timeout", "120", "-q",
         "retry backoff client fetch"],
        cwd=repo, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(1.5)  # the query has found the server and is being judged
    os.kill(victim, signal.SIGKILL)
    out, err = query.communicate(timeout=120)

    assert query.returncode == 0, err
    doc = json.loads(out)
    assert doc["degraded"] is not None
    assert doc["results"], "the lexical order is still given"


def test_without_local_no_server_is_started_and_the_hint_names_local(
        cache: Path, tmp_path: Path) -> None:
    if not scan_range_is_free():
        pytest.skip("something listens on 127.0.0.1:8033-8040")
    repo = make_repo(tmp_path / "repo", REPO_FILES)

    run = cli("--format", "json", "-q", "retry backoff", cwd=repo)

    doc = run.json()
    assert "pass --local to start the bundled model" in doc["degraded"]["reason"]
    assert doc["results"][0]["path"] == "src/net/retry.py"
    assert not (cache / "serve" / "server.json").exists()


def test_local_uses_a_server_given_with_e_and_starts_nothing(
        cache: Path, tmp_path: Path, llama_server: object) -> None:
    repo = make_repo(tmp_path / "repo", REPO_FILES)
    url = llama_server.base_url  # type: ignore[attr-defined]

    run = cli("--local", "-e", url, "--format", "json", "--rerank-top", "2", "-q",
              "retry backoff", cwd=repo, timeout=240)

    assert run.json()["model"]["endpoint"] == url
    assert "--local:" not in run.stderr
    assert not (cache / "serve" / "server.json").exists()


def test_two_local_queries_at_once_start_one_server(cache: Path, tmp_path: Path) -> None:
    if not scan_range_is_free():
        pytest.skip("something listens on 127.0.0.1:8033-8040; --local would use it")
    repo = make_repo(tmp_path / "repo", REPO_FILES)
    argv = [str(CLI), "--local", "--format", "json", "--rerank-top", "1", "-q", "retry backoff"]

    runs = [subprocess.Popen(argv, cwd=repo, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True) for _ in range(2)]
    outs = [run.communicate(timeout=300) for run in runs]

    assert [run.returncode for run in runs] == [0, 0], [err for _, err in outs]
    started = [err for _, err in outs if "so started the bundled model" in err]
    assert len(started) == 1, [err for _, err in outs]
    assert all(json.loads(out)["model"]["endpoint"] == "http://127.0.0.1:8035"
               for out, _ in outs)
    servers = subprocess.run(["pgrep", "-f", f"slm_rerank.llama --cache-dir {cache}"],
                             capture_output=True, text=True).stdout.split()
    assert len(servers) == 1
