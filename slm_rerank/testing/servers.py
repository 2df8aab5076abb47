"""Real socket servers that misbehave the way hostile listeners do: trickle, or flood.

A trickling server sends its headers and then one byte every ``interval`` seconds for as
long as the client listens: httpx's timeout is per read, so only a total deadline stops a
client reading from it. A flooding server announces and sends a body far larger than any
answer a client should read. Each counts what it sent, so a test can check that the client
stopped reading (a size cap), not how much memory the process took.
"""

from __future__ import annotations

import contextlib
import functools
import socket
import struct
import threading
import time
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field


@dataclass
class Misbehaving:
    """A listening server; ``url`` is its base URL, ``sent`` the body bytes it wrote."""

    url: str
    port: int
    sent: int = 0
    connections: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def count(self, n: int) -> None:
        with self._lock:
            self.sent += n


def _read_request(conn: socket.socket) -> str:
    """Read up to the end of the request's headers; the path it asked for."""
    data = b""
    while b"\r\n\r\n" not in data and len(data) < 65536:
        chunk = conn.recv(4096)
        if not chunk:
            break
        data += chunk
    parts = data.split(b" ", 2)
    return parts[1].decode("latin-1") if len(parts) > 2 else ""


def _serve(conn: socket.socket, server: Misbehaving, stop: threading.Event, mode: str,
           interval: float, body_bytes: int, answers: dict[str, bytes]) -> None:
    with conn:
        try:
            path = _read_request(conn)
            if path in answers:  # a well-behaved answer: the probe passes, the next call not
                body = answers[path]
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                             b"Connection: close\r\nContent-Length: "
                             + str(len(body)).encode() + b"\r\n\r\n" + body)
                return
            if mode == "gzipbomb":
                bomb = gzip_bomb(body_bytes)
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                             b"Content-Encoding: gzip\r\nContent-Length: "
                             + str(len(bomb)).encode() + b"\r\n\r\n")
                for start in range(0, len(bomb), 65536):
                    if stop.is_set():
                        return
                    conn.sendall(bomb[start:start + 65536])
                    server.count(min(65536, len(bomb) - start))
                return
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                         b"Content-Length: " + str(body_bytes).encode() + b"\r\n\r\n")
            if mode == "trickle":
                conn.sendall(b"{")
                server.count(1)
                while not stop.wait(interval):
                    conn.sendall(b" ")
                    server.count(1)
            else:  # flood
                block = b" " * 65536
                while not stop.is_set() and server.sent < body_bytes:
                    conn.sendall(block)
                    server.count(len(block))
        except OSError:
            return  # the client hung up: what a capped or timed-out reader does


@functools.lru_cache(maxsize=2)
def gzip_bomb(size: int) -> bytes:
    """A gzip stream of ``size`` spaces (a multiple of 1 MiB), built in milliseconds.

    Compressing a gigabyte takes seconds; but after a full flush the compressor starts
    afresh, so every further MiB of spaces compresses to the same bytes, which are repeated.
    """
    block = b" " * (1 << 20)
    blocks = max(1, size // len(block))
    deflate = zlib.compressobj(9, zlib.DEFLATED, -zlib.MAX_WBITS)
    first = deflate.compress(block) + deflate.flush(zlib.Z_FULL_FLUSH)
    again = deflate.compress(block) + deflate.flush(zlib.Z_FULL_FLUSH)
    crc = 0
    for _ in range(blocks):
        crc = zlib.crc32(block, crc)
    header = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x02\xff"
    trailer = struct.pack("<II", crc, (blocks * len(block)) & 0xFFFFFFFF)
    return header + first + again * (blocks - 1) + deflate.flush() + trailer


@contextlib.contextmanager
def misbehaving_server(mode: str, interval: float = 0.5, body_bytes: int = 300_000_000,
                       answers: dict[str, bytes] | None = None) -> Iterator[Misbehaving]:
    """A server on a free loopback port that trickles (``"trickle"``), floods (``"flood"``)
    or sends ``body_bytes`` of spaces as a small gzip stream (``"gzipbomb"``) for every
    request it gets, except those for a path in ``answers``, which get that body; closed,
    with every connection, when the block ends."""
    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    listener.settimeout(0.1)
    port = listener.getsockname()[1]
    server = Misbehaving(f"http://127.0.0.1:{port}", port)
    stop = threading.Event()
    workers: list[threading.Thread] = []

    def accept() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            conn.settimeout(30)
            server.connections += 1
            worker = threading.Thread(target=_serve, daemon=True,
                                      args=(conn, server, stop, mode, interval, body_bytes,
                                            answers or {}))
            worker.start()
            workers.append(worker)

    acceptor = threading.Thread(target=accept, daemon=True)
    acceptor.start()
    try:
        yield server
    finally:
        stop.set()
        acceptor.join(5)
        listener.close()
        deadline = time.monotonic() + 5
        for worker in workers:
            worker.join(max(0.0, deadline - time.monotonic()))
