"""Probing a port (llama/ports.py): a busy port is named by what answers there, within the
probe's deadline; the bind address is checked, and an IPv6 one gets brackets in its URL."""

from __future__ import annotations

import socket
import threading
from pathlib import Path

import pytest
from search_fixtures import cli, free_port

from slm_rerank.llama import processes

pytestmark = pytest.mark.bundled_server  # slm-rerank serve starts it


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
    assert processes.running(cache) is not None


def test_binding_beyond_loopback_warns(cache: Path, tmp_path: Path) -> None:
    run = cli("serve", "--bind", "0.0.0.0", "--model-file", str(tmp_path / "nope.gguf"),
              cwd=tmp_path)

    assert "binding 0.0.0.0: anyone who can reach this address" in run.stderr
