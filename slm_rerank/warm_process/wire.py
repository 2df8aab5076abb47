"""The messages between a command and the warm process: length-prefixed frames, each capped.

A request is a JSON header and the hook's stdin; the warm process first acknowledges
(accepted, with the deadline it works to, or refused with a reason), then answers with a
JSON header (the exit code, or why it failed) and the command's stdout and stderr bytes.
Standard library only: the command's side runs before click is imported, and it imports as
little as it can (``plain_json``, not ``json``; no ``socket``, ``struct`` or ``typing``).
"""

from __future__ import annotations

import time

from slm_rerank import plain_json

TYPE_CHECKING = False
if TYPE_CHECKING:
    from _socket import socket
    from typing import Any

#: written in every request header: a warm process of another version refuses the request
FORMAT = "slm-rerank warm process 1"
#: the largest JSON header either side reads (argv, folder and environment fit many times)
MAX_HEADER_BYTES = 4 << 20
#: the largest stdin sent (the hook reads at most ``hook.claude.MAX_STDIN_BYTES`` + 1)
MAX_STDIN_BYTES = 2_000_001
#: the largest stdout and stderr an answer carries; a larger one is run in process
MAX_STDOUT_BYTES = 16 << 20
MAX_STDERR_BYTES = 1 << 20

#: a frame's length: 4 bytes, big-endian
LENGTH_BYTES = 4


class WireError(Exception):
    """The other side closed, sent too much, sent something malformed, or took too long."""


def send_frame(sock: socket, payload: bytes, deadline: float) -> None:
    """Send one frame, all of it by ``deadline`` (``time.monotonic()``)."""
    data = len(payload).to_bytes(LENGTH_BYTES, "big") + payload
    view = memoryview(data)
    while view:
        left = deadline - time.monotonic()
        if left <= 0:
            raise WireError("timed out sending")
        sock.settimeout(left)
        try:
            sent = sock.send(view)
        except TimeoutError:
            raise WireError("timed out sending") from None
        except OSError as exc:
            raise WireError(f"the connection broke while sending ({exc.strerror or exc})") from None
        view = view[sent:]


def _receive_exactly(sock: socket, size: int, deadline: float) -> bytes:
    chunks = bytearray()
    while len(chunks) < size:
        left = deadline - time.monotonic()
        if left <= 0:
            raise WireError("timed out waiting")
        sock.settimeout(left)
        try:
            chunk = sock.recv(min(size - len(chunks), 1 << 20))
        except TimeoutError:
            raise WireError("timed out waiting") from None
        except OSError as exc:
            raise WireError(f"the connection broke ({exc.strerror or exc})") from None
        if not chunk:
            raise WireError("the connection closed before the whole message arrived")
        chunks += chunk
    return bytes(chunks)


def receive_frame(sock: socket, cap: int, deadline: float) -> bytes:
    """One frame's payload; WireError if it is over ``cap`` bytes or late."""
    size = int.from_bytes(_receive_exactly(sock, LENGTH_BYTES, deadline), "big")
    if size > cap:
        raise WireError(f"a message of {size} bytes, over the cap of {cap}")
    return _receive_exactly(sock, size, deadline)


def send_json(sock: socket, value: dict[str, Any], deadline: float) -> None:
    # lone surrogates (undecodable argv, folder or environment bytes) travel as \udcXX
    send_frame(sock, plain_json.dumps(value).encode("ascii"), deadline)


def receive_json(sock: socket, deadline: float) -> dict[str, Any]:
    """One JSON object frame; WireError if it is not one."""
    raw = receive_frame(sock, MAX_HEADER_BYTES, deadline)
    try:
        value = plain_json.loads(raw)
    except ValueError:
        raise WireError("a malformed message (not JSON)") from None
    if not isinstance(value, dict):
        raise WireError("a malformed message (not a JSON object)")
    return value
