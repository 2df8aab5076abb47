"""Talking to a port: who listens there, whether llama-server answers, which address is local.

Every probe is bounded (two seconds in all, at most ANSWER_CAP read): what answers on a
port may be anything, and a status or a start must not wait on it.
"""

from __future__ import annotations

import ipaddress
import json
import socket
import time
import urllib.parse

from slm_rerank.errors import ServeError

#: The largest answer read from a port (the /slots list of a many-slot server fits).
ANSWER_CAP = 1 << 20


def http_get(url: str, timeout: float = 2.0) -> tuple[int, object]:
    """GET ``url``: (status, its JSON, or its first 200 characters).

    ``timeout`` is the total for connecting, sending and reading the whole answer, and the
    answer is cut at ANSWER_CAP: a listener that trickles a byte a second (which urllib's
    per-read timeout never ends) or sends without end costs two seconds, not the command.
    Raises OSError if nothing usable answers in time.
    """
    parts = urllib.parse.urlsplit(url)
    if parts.hostname is None:
        raise OSError(f"{url} names no host")
    deadline = time.monotonic() + timeout
    data = bytearray()
    with socket.create_connection((parts.hostname, parts.port or 80),
                                  timeout=timeout) as sock:
        # HTTP/1.0 and Connection: close: the answer ends where the connection does, with
        # no chunked framing to decode
        sock.sendall(f"GET {parts.path or '/'} HTTP/1.0\r\nHost: {parts.netloc}\r\n"
                     "Accept: application/json\r\nConnection: close\r\n\r\n".encode())
        while len(data) < ANSWER_CAP:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"{url} did not answer whole within {timeout:g} s")
            sock.settimeout(left)
            try:
                chunk = sock.recv(min(65536, ANSWER_CAP - len(data)))
            except TimeoutError:
                raise TimeoutError(f"{url} did not answer whole within {timeout:g} s") \
                    from None
            if not chunk:
                break
            data += chunk
    head, found, body = bytes(data).partition(b"\r\n\r\n")
    words = head.split(b"\r\n", 1)[0].split()
    if not found or len(words) < 2 or not words[0].startswith(b"HTTP/") \
            or not words[1].isdigit():
        raise OSError(f"{url} did not answer HTTP (it sent {bytes(data[:40])!r})")
    try:
        return int(words[1]), json.loads(body or b"null")
    except ValueError:
        return int(words[1]), body.decode("utf-8", "replace")[:200]


def check_bind(host: str) -> None:
    """Refuse an address this machine cannot resolve, before anything starts."""
    try:
        socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError) as exc:
        raise ServeError(f"--bind {host} is not an address this machine resolves ({exc}); "
                         "give an IP address such as 127.0.0.1 or ::1") from None


def is_loopback(address: str) -> bool:
    """True for ``localhost`` and loopback IPs: the addresses nothing off this machine
    reaches (``serve`` and ``serve-api`` warn before binding any other)."""
    if address == "localhost":
        return True
    try:
        return ipaddress.ip_address(address).is_loopback
    except ValueError:
        return False


def base_url(host: str, port: int) -> str:
    """``http://host:port``, an IPv6 address in brackets (``http://[::1]:8035``)."""
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


def listening(host: str, port: int) -> bool:
    try:
        addresses = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError):
        return False
    for family, kind, proto, _, address in addresses:
        with socket.socket(family, kind, proto) as sock:
            sock.settimeout(1.0)
            if sock.connect_ex(address) == 0:
                return True
    return False


def port_owner(host: str, port: int) -> str | None:
    """What already answers on ``host:port`` (None: nothing listens)."""
    if not listening(host, port):
        return None
    base = base_url(host, port)
    try:
        status, body = http_get(base + "/v1/models")
    except OSError as exc:
        return f"a program that does not answer HTTP ({exc})"
    if status == 200 and isinstance(body, dict):
        data = body.get("data")
        ids = [m.get("id") for m in data if isinstance(m, dict)] if isinstance(data, list) \
            else []
        return f"a model server serving {', '.join(map(str, ids)) or 'no model'}"
    return f"an HTTP server answering GET /v1/models with HTTP {status}"


def healthy(url: str) -> bool:
    try:
        status, _ = http_get(url + "/health", timeout=2.0)
    except OSError:
        return False
    return status == 200


def busy(url: str) -> bool:
    """True while a slot is processing a request (llama-server's /slots)."""
    try:
        status, body = http_get(url + "/slots", timeout=2.0)
    except OSError:
        return False
    return status == 200 and isinstance(body, list) and any(
        isinstance(s, dict) and s.get("is_processing") for s in body)

