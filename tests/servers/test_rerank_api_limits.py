"""serve-api's bounds at start-up and at the door: the API key file is read with a size
cap and never waited on for ever; the listen queue holds as many connections as the
server serves, so a burst of clients gets HTTP answers, not SYN retransmits and resets.
What a hostile client sends (a request trickled a byte at a time, arrays nested 100k deep,
lone surrogates) gets a ranking that says what it changed or an error that says what to
fix; never a traceback, a hang or a silent guess."""

from __future__ import annotations

import json
import os
import resource
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest
from fake_plugins import length_host
from search_fixtures import free_port

from slm_rerank.config import Settings
from slm_rerank.errors import ConfigError
from slm_rerank.host import Host
from slm_rerank.servers import api_key
from slm_rerank.servers.api_key import read_api_key
from slm_rerank.servers.rerank_api import ApiOptions, RerankApiService, make_server

CLI = Path(sys.executable).parent / "slm-rerank"
#: generous: a refused key file ends start-up in about a second
BOUND = 60


def _one_gigabyte_of_memory() -> None:
    # Without a cap, reading /dev/zero would eat the shared machine's memory; with this
    # limit the unfixed read dies of MemoryError instead.
    resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))


def test_a_device_as_api_key_file_is_refused_naming_the_option_not_read_for_ever(
        tmp_path: Path) -> None:
    run = subprocess.run([str(CLI), "serve-api", "--port", str(free_port()),
                          "--api-key-file", "/dev/zero"], cwd=tmp_path, capture_output=True,
                         text=True, timeout=BOUND, stdin=subprocess.DEVNULL,
                         preexec_fn=_one_gigabyte_of_memory)

    assert run.returncode == 1, run.stderr
    assert "--api-key-file /dev/zero is a character device, not a file holding a key" \
        in run.stderr
    assert "Traceback" not in run.stderr


def test_an_api_key_file_longer_than_any_key_is_refused(tmp_path: Path) -> None:
    key_file = tmp_path / "key"
    key_file.write_text("k" * (api_key.KEY_FILE_CAP + 1))

    with pytest.raises(ConfigError, match=f"--api-key-file {key_file} is longer than"):
        read_api_key(None, key_file)


def test_an_api_key_from_a_pipe_is_read(tmp_path: Path) -> None:
    read_end, write_end = os.pipe()
    os.write(write_end, b"k-from-a-pipe\n")
    os.close(write_end)
    try:
        key = read_api_key(None, Path(f"/proc/self/fd/{read_end}"))
    finally:
        os.close(read_end)

    assert key == "k-from-a-pipe"


def test_a_pipe_that_never_delivers_the_key_is_an_error_within_its_deadline(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(api_key, "KEY_PIPE_SECONDS", 0.5)
    fifo = tmp_path / "key.fifo"
    os.mkfifo(fifo)
    holder = os.open(fifo, os.O_RDWR)  # a writer that never writes
    outcome: list[BaseException | str | None] = []

    def read() -> None:
        try:
            outcome.append(read_api_key(None, fifo))
        except BaseException as exc:  # noqa: BLE001 - the thread hands it to the test
            outcome.append(exc)

    try:
        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        reader.join(timeout=BOUND)
        assert not reader.is_alive(), "read_api_key blocked on a FIFO nobody writes"
    finally:
        os.close(holder)
    assert isinstance(outcome[0], ConfigError)
    assert "did not deliver the key within 0.5 s" in str(outcome[0])


# --- the listen queue ----------------------------------------------------------------------


def _connect_all(port: int, count: int) -> list[socket.socket]:
    """``count`` non-blocking connects to ``port``, all started at once."""
    socks = []
    for _ in range(count):
        sock = socket.socket()
        sock.setblocking(False)
        sock.connect_ex(("127.0.0.1", port))
        socks.append(sock)
    return socks


def _established(sock: socket.socket) -> bool:
    """True once the kernel finished the handshake (the connection sits in the queue)."""
    import select

    _, writable, _ = select.select([], [sock], [], 0)
    return bool(writable) and sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR) == 0


def _answer(sock: socket.socket) -> bytes:
    """The whole HTTP answer to GET /health (headers and Content-Length body)."""
    sock.setblocking(True)
    sock.settimeout(BOUND)
    sock.sendall(b"GET /health HTTP/1.1\r\nHost: test\r\n\r\n")
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(4096)
        if not chunk:
            return data
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = next(int(line.split(b":", 1)[1]) for line in head.split(b"\r\n")
                  if line.lower().startswith(b"content-length:"))
    while len(body) < length:
        chunk = sock.recv(4096)
        if not chunk:
            break
        body += chunk
    return head + b"\r\n\r\n" + body


def test_a_burst_of_connections_fits_the_listen_queue_and_each_gets_an_http_answer(
        ) -> None:
    # A server that is listening but not yet accepting: every connection of the burst must
    # finish its handshake in the listen queue. With a backlog of 5 the rest stayed in
    # SYN-SENT, retransmitting, whatever the speed of the machine.
    slots = 16
    host = Host.with_plugins(Settings(score_cache=False))
    service = RerankApiService(host, ApiOptions(port=free_port(), max_connections=slots))
    server = make_server(service)
    burst: list[socket.socket] = []
    try:
        burst = _connect_all(server.server_address[1], slots)
        deadline = time.monotonic() + BOUND
        while not all(_established(s) for s in burst) and time.monotonic() < deadline:
            time.sleep(0.05)
        waiting = sum(not _established(s) for s in burst)

        threading.Thread(target=server.serve_forever, daemon=True).start()
        first = [_answer(s) for s in burst]  # each keeps its slot busy: keep-alive
        extra = _connect_all(server.server_address[1], slots)
        burst += extra
        second = [_answer(s) for s in extra]
    finally:
        for sock in burst:
            sock.close()
        server.shutdown()
        server.server_close()
        service.close()

    assert waiting == 0, f"{waiting} of {slots} connections never left SYN-SENT"
    assert all(a.startswith(b"HTTP/1.1 200 ") for a in first), first
    assert all(a.startswith(b"HTTP/1.1 503 ") and b'"type": "busy"' in a for a in second), \
        second


# --- hostile clients (in-process, the length judge) --------------------------------------


@pytest.fixture
def api(in_process_api: Callable[..., tuple[str, int]]) -> Callable[..., tuple[str, int]]:
    """serve-api in this process with the length judge; ``start(**options)`` -> (url, port)."""
    return lambda **options: in_process_api(length_host(), **options)


def rerank_bytes(body: bytes) -> bytes:
    return (b"POST /v1/rerank HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Content-Length: %d\r\n\r\n" % len(body)) + body


def trickle(port: int, head: bytes, tail: bytes, pause: float) -> tuple[int, bytes]:
    """Send ``head`` at once and ``tail`` one byte per ``pause`` s, as slowloris does;
    how many bytes of ``tail`` went out before the server answered or hung up, and the
    answer."""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(head)
        for sent, byte in enumerate(tail):
            try:
                sock.sendall(bytes([byte]))
            except OSError:
                return sent, b""
            # the server answered (or closed) without waiting for the rest
            sock.setblocking(False)
            try:
                answer = sock.recv(4096)
                sock.setblocking(True)
                return sent, answer
            except BlockingIOError:
                sock.setblocking(True)
            time.sleep(pause)
        return len(tail), sock.recv(4096)


def test_a_request_trickled_a_byte_at_a_time_is_cut_off_not_served_for_ever(
        api: Callable[..., tuple[str, int]]) -> None:
    _, port = api(request_seconds=1.0)
    request = rerank_bytes(json.dumps({"query": "q", "documents": ["a" * 40]}).encode())
    head, body = request.split(b"\r\n\r\n", 1)

    sent_headers, _ = trickle(port, b"", head, pause=0.1)  # 120 bytes: 12 s if let be
    sent_body, answer = trickle(port, head + b"\r\n\r\n", body, pause=0.1)

    assert sent_headers < len(head)  # the server hung up part-way through the headers
    assert sent_body < len(body)
    assert answer.startswith(b"HTTP/1.1 408") and b"was not received in time" in answer


def test_a_kept_alive_connection_may_idle_between_requests_longer_than_a_request_may_take(
        api: Callable[..., tuple[str, int]]) -> None:
    url, _ = api(request_seconds=0.5)

    with httpx.Client(timeout=10) as client:
        first = client.post(url + "/v1/rerank", json={"query": "q", "documents": ["a"]})
        time.sleep(1.0)
        second = client.post(url + "/v1/rerank", json={"query": "q", "documents": ["b"]})

    assert (first.status_code, second.status_code) == (200, 200), second.text


def test_a_deeply_nested_body_is_a_400_not_an_internal_error(
        api: Callable[..., tuple[str, int]]) -> None:
    url, _ = api()

    response = httpx.post(url + "/v1/rerank", content=b'{"query": "q", "documents": ['
                          + b"[" * 100_000 + b"]" * 100_000 + b"]}",
                          headers={"Content-Type": "application/json"})

    assert response.status_code == 400, response.text
    assert "nests arrays or objects too deeply" in response.json()["message"]


def test_lone_surrogates_in_a_request_are_judged_not_a_500(
        api: Callable[..., tuple[str, int]]) -> None:
    url, _ = api()

    response = httpx.post(url + "/v1/rerank", content=b'{"query": "q\\ud800", "documents": '
                          b'["a\\udfffb", "c"], "return_documents": true}',
                          headers={"Content-Type": "application/json"})

    assert response.status_code == 200, response.text
    body = response.json()
    assert sorted(r["index"] for r in body["results"]) == [0, 1]
    assert any("surrogates" in w for w in body["meta"]["warnings"])


def test_a_document_cut_to_fit_the_prompt_is_named_in_the_answers_warnings(
        api: Callable[..., tuple[str, int]]) -> None:
    url, _ = api()

    response = httpx.post(url + "/v1/rerank", json={"query": "q",
                                                    "documents": ["x" * 1_000_000, "y"]})

    assert response.status_code == 200, response.text
    assert any(w.startswith("1 of 2 documents were cut to their first")
               for w in response.json()["meta"]["warnings"])


def test_an_api_key_no_client_could_send_is_refused_at_start(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "key").write_text("clé-secrète\n", encoding="utf-8")
    monkeypatch.setenv("RERANK_KEY", "two\nlines")

    with pytest.raises(ConfigError, match="--api-key-file .*non-ASCII"):
        read_api_key(None, tmp_path / "key")
    with pytest.raises(ConfigError, match="--api-key-env RERANK_KEY: .*printable ASCII"):
        read_api_key("RERANK_KEY", None)


def test_connections_beyond_max_connections_are_answered_503_and_closed(
        api: Callable[..., tuple[str, int]]) -> None:
    url, port = api(max_connections=2)
    idle = [socket.create_connection(("127.0.0.1", port)) for _ in range(2)]
    try:
        time.sleep(0.3)  # both are being served (their threads wait for a request line)
        with socket.create_connection(("127.0.0.1", port), timeout=10) as third:
            third.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
            answer = third.recv(65536)
    finally:
        for conn in idle:
            conn.close()

    assert answer.startswith(b"HTTP/1.1 503")
    assert b"too many open connections (max_connections = 2)" in answer
    # once the idle ones are gone, the server answers again
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        with socket.create_connection(("127.0.0.1", port), timeout=10) as again:
            again.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            if again.recv(65536).startswith(b"HTTP/1.1 200"):
                break
        time.sleep(0.2)
    else:
        raise AssertionError(f"{url} did not answer /health once the idle connections closed")
