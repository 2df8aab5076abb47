"""A rerank HTTP endpoint (Cohere/Jina shapes) in front of any judge (`slm-rerank serve-api`).

A user with only an instruct model in llama-server or Ollama gets ``POST /v1/rerank`` that
LangChain, LlamaIndex and other rerank clients can call; docs/rerank-server.md is the user
guide (request and response shapes with their sources, errors, limits, degraded answers).

The server keeps one warm ``Host`` (settings read and plugins loaded once) and one
``ModelSession`` (one event loop, one keep-alive client, the found server remembered) for
its whole life, as the MCP server does; each request runs ``arerank_documents`` on the
session's loop. Built on the standard library's ``ThreadingHTTPServer``: no web framework
is a dependency, and ``http.server`` is imported only when the command runs, so that the
other commands do not pay for it.
"""

from __future__ import annotations

import contextlib
import hmac
import io
import json
import re
import sys
import threading
import time
import traceback
import uuid
from dataclasses import dataclass, field
from typing import Any

from slm_rerank.errors import ApiError

#: the paths a rerank request may be posted to: Cohere v1 and Jina (/v1/rerank), the
#: Cohere v2 SDK (/v2/rerank, where LangChain's CohereRerank posts), TEI/llama.cpp (/rerank)
RERANK_PATHS = ("/v1/rerank", "/v2/rerank", "/rerank")
HEALTH_PATH = "/health"
#: fields a client library may send that this server reads
KNOWN_FIELDS = {"model", "query", "documents", "top_n", "return_documents"}
DEGRADED_HEADER = "X-Slm-Rerank-Degraded"


@dataclass
class ApiOptions:
    """How the server listens and what it accepts."""

    bind: str = "127.0.0.1"
    port: int = 8090
    api_key: str | None = None
    max_documents: int = 1000
    max_bytes: int = 5_000_000
    #: requests judged at once; the rest wait (up to the judging timeout) for a turn
    parallel: int = 1
    #: answer 503 rather than a marked partial ranking when some documents were not judged
    no_partial: bool = False
    #: seconds a client has to send one whole request once its first byte came
    request_seconds: float = 60.0
    #: open connections served at once (a thread each); more are answered 503 and closed
    max_connections: int = 64


@dataclass
class RerankRequest:
    """One parsed ``POST /v1/rerank`` body."""

    query: str
    texts: list[str]
    top_n: int | None = None
    return_documents: bool = False
    model: str | None = None
    #: fields sent that this server does not read, named in ``meta.warnings``
    ignored: list[str] = field(default_factory=list)


def parse_size(text: str) -> int:
    """``5MB``, ``500k``, ``1048576`` as a number of bytes (K and M are 1000 and 1000^2)."""
    found = re.fullmatch(r"\s*(\d+)\s*([kKmM]?)[bB]?\s*", text)
    if not found:
        raise ValueError(f"{text!r} is not a size; give bytes, or a number with K or M "
                         "(e.g. 5MB)")
    return int(found[1]) * {"": 1, "k": 1000, "m": 1000_000}[found[2].lower()]


def parse_request(body: bytes, options: ApiOptions) -> RerankRequest:
    """The request in ``body``, or an ``ApiError`` (400, or 413 for too many documents)."""
    def bad(message: str) -> ApiError:
        return ApiError(400, "invalid_request", message)

    def no_constants(name: str) -> Any:
        raise ValueError(f"{name} is not JSON")

    try:
        data = json.loads(body.decode("utf-8"), parse_constant=no_constants)
    except (UnicodeDecodeError, ValueError) as exc:
        raise bad(f"the body is not valid JSON ({exc})") from None
    except RecursionError:  # [[[[...]]]]: the decoder recurses once per level
        raise bad("the body nests arrays or objects too deeply; send 'query' and a flat "
                  "'documents' list") from None
    if not isinstance(data, dict):
        raise bad("the body must be a JSON object with 'query' and 'documents'")
    query = data.get("query")
    if not isinstance(query, str) or not query.strip():
        raise bad("'query' must be a non-empty string")
    documents = data.get("documents")
    if not isinstance(documents, list) or not documents:
        raise bad("'documents' must be a non-empty list of strings or {\"text\": ...} objects")
    if len(documents) > options.max_documents:
        raise ApiError(413, "too_many_documents",
                       f"{len(documents)} documents sent; this server takes at most "
                       f"{options.max_documents} per request (--max-documents)")
    texts = []
    for i, item in enumerate(documents):
        text = item.get("text") if isinstance(item, dict) else item
        if not isinstance(text, str):
            raise bad(f"documents[{i}] must be a string or an object with a string 'text'")
        texts.append(text)
    top_n = data.get("top_n")
    if top_n is not None and (isinstance(top_n, bool) or not isinstance(top_n, int)
                              or top_n < 1):
        raise bad(f"'top_n' must be a positive integer, not {json.dumps(top_n)}")
    return_documents = data.get("return_documents")
    if return_documents is not None and not isinstance(return_documents, bool):
        raise bad("'return_documents' must be true or false")
    model = data.get("model")
    if model is not None and not isinstance(model, str):
        raise bad("'model' must be a string (it is not used to choose the model: see "
                  "docs/rerank-server.md)")
    return RerankRequest(query, texts, top_n, bool(return_documents), model,
                         sorted(set(data) - KNOWN_FIELDS))


def shape_response(request: RerankRequest, result: Any, no_partial: bool = False
                   ) -> tuple[dict[str, Any], dict[str, str]]:
    """The response body and extra headers for ``result`` (a ``DocumentsResult``).

    Raises ``ApiError`` 503 when no document was judged (or, with ``no_partial``, when any
    was not): a ranking without a verdict is the input order, never passed off as one.
    """
    judged = [r for r in result.results if r.score is not None]
    unjudged = [r for r in result.results if r.score is None]
    if not judged or (unjudged and no_partial):
        reason = result.degraded or "the model gave no verdict"
        what = ("no document was judged" if not judged else
                f"{len(unjudged)} of {len(result.results)} documents were not judged")
        raise ApiError(503, "model_unavailable", f"{what}: {reason}")
    # Unjudged documents follow in input order with scores strictly below every verdict,
    # so that a client sorting by relevance_score keeps that order; they are marked.
    floor = min(r.score for r in judged)
    scores = {id(r): r.score for r in judged}
    for j, r in enumerate(unjudged):
        scores[id(r)] = floor * (len(unjudged) - j) / (len(unjudged) + 1)
    results = []
    for r in result.results[:request.top_n]:
        item: dict[str, Any] = {"index": r.index, "relevance_score": scores[id(r)]}
        if request.return_documents:
            item["document"] = {"text": request.texts[r.index]}
        if r.score is None:
            item["judged"] = False
        results.append(item)
    warnings = [f"field {name!r} is not used by this server" for name in request.ignored]
    warnings += getattr(result, "warnings", [])  # documents cut to fit, text repaired
    body: dict[str, Any] = {"id": str(uuid.uuid4()),
                            "model": result.model_id or result.profile or result.scorer,
                            "results": results,
                            "meta": {"api_version": {"version": "2"}}}
    headers: dict[str, str] = {}
    if unjudged or result.degraded:
        reason = result.degraded or "the model gave no verdict for some documents"
        body["degraded"] = {"reason": reason, "judged": len(judged),
                            "documents": len(result.results),
                            "unjudged_indices": sorted(r.index for r in unjudged)}
        warnings.insert(0, f"degraded: {len(judged)} of {len(result.results)} documents "
                           f"were judged ({reason}); the others follow in input order, "
                           "scored below every judged one")
        headers[DEGRADED_HEADER] = f"{len(judged)}/{len(result.results)} judged"
    if warnings:
        body["meta"]["warnings"] = warnings
    body["slm_rerank"] = {"scorer": result.scorer, "profile": result.profile}
    return body, headers


class RerankApiService:
    """The warm state every request shares: the Host, its model session, the turn gate."""

    def __init__(self, host: Any, options: ApiOptions) -> None:
        from slm_rerank.model.session import ModelSession

        self.host = host
        self.options = options
        self.session = ModelSession(timeout=host.settings.timeout)
        host.model_session = self.session
        self._turns = threading.BoundedSemaphore(options.parallel)

    def rerank(self, request: RerankRequest) -> tuple[dict[str, Any], dict[str, str]]:
        from slm_rerank.documents import arerank_documents
        from slm_rerank.errors import SlmRerankError, TransientError

        # Wait for a turn no longer than a request may take to judge: past that, the
        # client has long given up.
        if not self._turns.acquire(timeout=self.host.settings.timeout):
            raise ApiError(503, "busy", f"{self.options.parallel} request(s) were being "
                           f"judged for over {self.host.settings.timeout:g} s; try again "
                           "later or start the server with a larger --parallel")
        try:
            result = self.session.run(arerank_documents(request.query, request.texts,
                                                        host=self.host))
        except TransientError as exc:
            self.session.forget()
            raise ApiError(503, "model_unavailable", f"the model server failed: {exc}") \
                from None
        except SlmRerankError as exc:  # a server that is no model server, a bad answer
            self.session.forget()
            raise ApiError(502, "bad_model_server", str(exc)) from None
        finally:
            self._turns.release()
        if result.degraded:
            self.session.forget()  # find the server again next time
        return shape_response(request, result, self.options.no_partial)

    def close(self) -> None:
        self.session.close()


class _DeadlineReader(io.RawIOBase):
    """The connection's bytes, each read bounded by what is left of the request's time.

    The socket timeout alone bounds one read, so a client sending a byte every few seconds
    (slowloris) held a thread for as long as it liked; here a request must arrive whole
    within ``request_seconds`` of its first byte. Waiting for a request on a kept-alive
    connection counts only against the socket timeout.
    """

    def __init__(self, handler: Any) -> None:
        self.handler = handler

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        handler = self.handler
        sock = handler.connection
        if handler.request_deadline is None:
            sock.settimeout(handler.timeout)
        else:
            left = handler.request_deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"the request did not arrive within "
                                   f"{handler.service.options.request_seconds:g} s")
            sock.settimeout(min(left, handler.timeout))
        count = sock.recv_into(buffer)
        if count and handler.request_deadline is None:
            handler.request_deadline = (time.monotonic()
                                        + handler.service.options.request_seconds)
        return count


class _Routes:
    """The request handling; mixed into ``BaseHTTPRequestHandler`` by ``make_server``."""

    # set by make_server on the class it builds
    service: RerankApiService
    protocol_version = "HTTP/1.1"  # keep-alive: clients reuse one connection
    timeout = 30  # seconds a client may stay silent (between requests, or within one)
    request_deadline: float | None = None

    def setup(self: Any) -> None:
        super().setup()  # type: ignore[misc]
        self.rfile.close()  # the base class's reader; ours reads the same socket
        self.rfile = io.BufferedReader(_DeadlineReader(self))

    def handle_one_request(self: Any) -> None:
        self.request_deadline = None  # the next request's clock starts at its first byte
        super().handle_one_request()  # type: ignore[misc]

    def version_string(self) -> str:
        return "slm-rerank"  # not the Python version: nothing for a scanner to match

    def _send_json(self: Any, status: int, body: dict[str, Any],
                   headers: dict[str, str] | None = None) -> None:
        # the last read may have left the socket little time; the answer gets the usual
        self.connection.settimeout(self.timeout)
        data = (json.dumps(body, allow_nan=False) + "\n").encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        if self.close_connection:
            self.send_header("Connection", "close")
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    def _send_error(self: Any, error: ApiError) -> None:
        # Cohere's errors carry "message"; LlamaIndex's JinaRerank raises resp["detail"]
        # when "results" is missing: both name the fault.
        self._send_json(error.status, {"message": error.message, "detail": error.message,
                                       "type": error.kind}, error.headers)

    def send_error(self: Any, code: int, message: str | None = None,
                   explain: str | None = None) -> None:
        """The base class's own errors (a malformed request line, an unknown method), as
        JSON like every other error."""
        self.close_connection = True
        self._send_error(ApiError(code, "not_implemented" if code == 501 else "invalid_request",
                                  message or self.responses.get(code, ("error",))[0]))

    def _route(self: Any, method: str) -> None:
        path = self.path.split("?", 1)[0]
        self.body_read = False
        try:
            if path == HEALTH_PATH:
                if method not in ("GET", "HEAD"):
                    raise ApiError(405, "method_not_allowed", f"{path} takes GET",
                                   {"Allow": "GET, HEAD"})
                self._send_json(200, {"status": "ok"})
                return
            if path not in RERANK_PATHS:
                raise ApiError(404, "not_found", f"no endpoint {path}; POST a rerank "
                               f"request to {RERANK_PATHS[0]}")
            if method != "POST":
                raise ApiError(405, "method_not_allowed", f"{path} takes POST",
                               {"Allow": "POST"})
            self._check_key()
            request = parse_request(self._read_body(), self.service.options)
            body, headers = self.service.rerank(request)
            self._send_json(200, body, headers)
        except ApiError as error:
            if not self.body_read and (self.headers.get("Content-Length", "0") != "0"
                                       or self.headers.get("Transfer-Encoding")):
                # the unread body would be parsed as the next request on this connection
                self.close_connection = True
            self._send_error(error)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True  # the client left; nobody to answer
        except Exception as exc:  # a bug must cost one request, never the server
            traceback.print_exc(file=sys.stderr)
            self.close_connection = True
            self._send_error(ApiError(500, "internal_error", f"internal error "
                                      f"({type(exc).__name__}: {exc}); the server is still "
                                      "running, please report this with its stderr"))

    def _check_key(self: Any) -> None:
        expected = self.service.options.api_key
        if expected is None:
            return
        given = self.headers.get("Authorization", "")
        scheme, _, token = given.partition(" ")
        if scheme.lower() != "bearer" or not hmac.compare_digest(
                token.strip().encode(), expected.encode()):
            raise ApiError(401, "unauthorized", "missing or wrong API key: send "
                           "'Authorization: Bearer <key>'", {"WWW-Authenticate": "Bearer"})

    def _read_body(self: Any) -> bytes:
        kind = self.headers.get("Content-Type", "").split(";", 1)[0].strip().lower()
        if kind != "application/json":
            raise ApiError(415, "unsupported_media_type", "send the request as JSON with "
                           f"'Content-Type: application/json' (got {kind or 'none'!r})")
        length = self.headers.get("Content-Length")
        if self.headers.get("Transfer-Encoding") or length is None:
            raise ApiError(411, "length_required", "send a Content-Length header (chunked "
                           "bodies are not read)")
        try:
            size = int(length)
        except ValueError:
            size = -1
        if size < 0:
            raise ApiError(400, "invalid_request", f"Content-Length {length!r} is not a size")
        if size > self.service.options.max_bytes:
            raise ApiError(413, "too_large", f"the body is {size} bytes; this server takes at "
                           f"most {self.service.options.max_bytes} (--max-bytes)")
        try:
            body = self.rfile.read(size)
        except TimeoutError as exc:
            self.body_read = True
            self.close_connection = True
            raise ApiError(408, "request_timeout", f"the body of {size} bytes was not "
                           f"received in time ({exc}; the socket timeout is {self.timeout} s)"
                           ) from None
        self.body_read = True
        if len(body) != size:
            self.close_connection = True
            raise ApiError(400, "invalid_request", f"the body ended after {len(body)} of "
                           f"{size} bytes (Content-Length)")
        return body

    def do_GET(self) -> None:  # noqa: N802 - the base class's naming
        self._route("GET")

    def do_HEAD(self) -> None:  # noqa: N802
        self._route("HEAD")

    def do_POST(self) -> None:  # noqa: N802
        self._route("POST")

    def do_PUT(self) -> None:  # noqa: N802
        self._route("PUT")

    def do_DELETE(self) -> None:  # noqa: N802
        self._route("DELETE")

    def do_PATCH(self) -> None:  # noqa: N802
        self._route("PATCH")


def make_server(service: RerankApiService) -> Any:
    """A bound ``ThreadingHTTPServer`` answering with ``service`` (not yet serving)."""
    import socket
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    handler = type("RerankHandler", (_Routes, BaseHTTPRequestHandler), {"service": service})
    limit = service.options.max_connections
    full = json.dumps({"message": f"too many open connections (max_connections = {limit}); "
                                  "retry, or close idle keep-alive connections",
                       "detail": "too many open connections", "type": "busy"}).encode()

    class CappedServer(ThreadingHTTPServer):
        """One thread per connection, at most ``max_connections``: slow or idle clients
        cannot make the server start threads without end."""

        daemon_threads = True
        address_family = socket.AF_INET6 if ":" in service.options.bind else socket.AF_INET
        # socketserver listens with a backlog of 5: a burst of clients beyond it stayed in
        # SYN-SENT for a second or more (or was reset) before reaching the 503 below. The
        # queue holds at least every connection the server may serve, and a burst as
        # large again beyond them, which are answered 503 at once; the kernel caps it at
        # net.core.somaxconn.
        request_queue_size = max(2 * limit, 128)
        slots = threading.BoundedSemaphore(limit)

        def process_request(self, request: Any, client_address: Any) -> None:
            if not self.slots.acquire(blocking=False):
                with contextlib.suppress(OSError):
                    request.sendall(b"HTTP/1.1 503 Service Unavailable\r\n"
                                    b"Content-Type: application/json\r\nConnection: close\r\n"
                                    b"Retry-After: 1\r\nContent-Length: %d\r\n\r\n"
                                    % len(full) + full)
                self.shutdown_request(request)
                return
            try:
                super().process_request(request, client_address)
            except BaseException:
                self.slots.release()
                raise

        def process_request_thread(self, request: Any, client_address: Any) -> None:
            try:
                super().process_request_thread(request, client_address)
            finally:
                self.slots.release()

    return CappedServer((service.options.bind, service.options.port), handler)
