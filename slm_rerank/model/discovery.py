"""Find model servers: probe one URL or several at once, scan one host's ports.

A probe asks the cheap read-only endpoints every server kind has and tells them apart by
what answers: llama.cpp's ``/props`` (and its ``total_slots``), Ollama's ``/api/version``,
the OpenAI ``/v1/models`` list for everything else. A scan probes one host only (loopback
unless told otherwise), all ports at once, and says per port why nothing usable answered.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import re
import socket
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx

from slm_rerank.config_keys import SCAN_HOST, SCAN_PORTS
from slm_rerank.errors import ConfigError, SlmRerankError
from slm_rerank.model.answers import (
    ACCEPT_ENCODING,
    NotJSON,
    Unreadable,
    decode_json,
    excerpt,
    read_body,
)
from slm_rerank.registrations import Endpoint
from slm_rerank.report import visible

DEFAULT_HOST = SCAN_HOST
#: probe reasons that a retry cannot cure (the rest: refused, timeout, loading, unreachable)
PERMANENT_REASONS = ("not a model server", "needs an API key", "Ollama ")
PORTS = SCAN_PORTS
#: the first Ollama release whose answers carry logprobs
OLLAMA_LOGPROBS = (0, 12, 11)
#: The most a probe reads of one answer: llama.cpp's /props, chat template included, is
#: tens of kilobytes, but a hosted API's /v1/models may list hundreds of models with their
#: metadata; past this a listener is not a model server worth reading (memory stays bounded).
MAX_PROBE_BYTES = 8_000_000
#: Seconds a whole scan may take: connecting to every port and probing those that listen.
SCAN_SECONDS = 1.0


@dataclass(frozen=True)
class Probe:
    """What one URL turned out to be: a usable endpoint, or why not."""

    url: str
    endpoint: Endpoint | None
    #: why the URL is not usable ("refused", "timeout", "not a model server", ...)
    reason: str | None = None

    @property
    def permanent(self) -> bool:
        """True when waiting will not help: something answers, but not a usable server."""
        return self.reason is not None and self.reason.startswith(PERMANENT_REASONS)


async def probe(client_or_http: Any, base_url: str, timeout: float = 0.5,
                api_key: str | None = None, deadline: float | None = None) -> Probe:
    """Ask ``base_url`` what it is; never raises for a server that is down or strange.

    ``client_or_http`` is a ``ModelClient`` or an ``httpx.AsyncClient``. ``timeout`` bounds
    the whole probe: connecting, every request it makes and reading every answer (httpx's
    own timeout is per read, so a server that sends a byte now and then would otherwise
    hold the probe for ever). An answer over ``MAX_PROBE_BYTES`` is not read further.
    ``deadline`` is the configured deadline a timeout names, when ``timeout`` is only what
    is left of it (a scan's, after its connects).
    """
    http: httpx.AsyncClient = getattr(client_or_http, "http", client_or_http)
    base = base_url.rstrip("/")
    try:
        return await asyncio.wait_for(_probe(http, base, timeout, api_key), timeout)
    except asyncio.TimeoutError:
        shown = timeout if deadline is None else deadline
        return Probe(base, None, f"timeout (no whole answer within {shown:g} s)")


async def _probe(http: httpx.AsyncClient, base: str, timeout: float,
                 api_key: str | None) -> Probe:
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}

    async def get(path: str) -> httpx.Response | str:
        return await _ask(http, "GET", base + path, headers, timeout)

    # Asked together: a scan pays one round trip per port, not three.
    answers = await asyncio.gather(get("/v1/models"), get("/props"), get("/api/version"))
    responses = [a for a in answers if isinstance(a, httpx.Response)]
    if len(responses) < len(answers):
        # an oversized answer first: it says "not a model server", which no retry cures
        failures = sorted((a for a in answers if isinstance(a, str)),
                          key=lambda a: not a.startswith(PERMANENT_REASONS))
        return Probe(base, None, failures[0])
    models, props, version = responses
    if 503 in (models.status_code, props.status_code):
        return Probe(base, None, "still loading (503)")
    if models.status_code in (401, 403):
        return Probe(base, None, f"needs an API key ({models.status_code})")

    model_id = _model_id(_json(models))
    props_body = _json(props) if props.status_code == 200 else None
    if isinstance(props_body, dict) and ("total_slots" in props_body
                                         or "default_generation_settings" in props_body):
        slots = props_body.get("total_slots")
        slots = slots if isinstance(slots, int) and slots >= 1 else 1
        model_id = model_id or _props_model(props_body)
        settings = props_body.get("default_generation_settings")
        n_ctx = settings.get("n_ctx") if isinstance(settings, dict) else None
        n_ctx = n_ctx if isinstance(n_ctx, int) and n_ctx > 0 else None
        return Probe(base, Endpoint(base, "llama.cpp", model_id, slots, api_key, n_ctx))

    version_body = _json(version) if version.status_code == 200 else None
    if isinstance(version_body, dict) and isinstance(version_body.get("version"), str):
        found = _version(version_body["version"])
        if found is not None and found < OLLAMA_LOGPROBS:
            return Probe(base, None, f"Ollama {version_body['version']} returns no logprobs "
                         "(needs 0.12.11 or later); upgrade Ollama")
        if model_id is None:
            tags = await get("/api/tags")
            if isinstance(tags, httpx.Response) and tags.status_code == 200:
                model_id = _model_id(_json(tags))
        if model_id is None:
            return Probe(base, None, "Ollama has no model pulled (ollama pull MODEL)")
        return Probe(base, Endpoint(base, "ollama", model_id, 1, api_key))

    if models.status_code == 200 and model_id is not None:
        return Probe(base, Endpoint(base, "openai-completions", model_id, 1, api_key))
    if await _serves_rerank(http, base, headers, timeout):
        # A pure rerank API (Jina's hosted one) answers none of the above. It can only
        # serve the rerank-endpoint scorer, which asks by its own API option, not by kind;
        # any other scorer gets a 404 naming the path it asked for.
        return Probe(base, Endpoint(base, "openai-completions", None, 1, api_key))
    said = f"{models.status_code}"
    if models.status_code == 200:
        try:
            decode_json(models.content)
        except NotJSON as exc:
            said += f", {exc}"  # why a 200 did not read as a model list
    return Probe(base, None, f"not a model server (GET /v1/models: {said})")


async def _serves_rerank(http: httpx.AsyncClient, base: str, headers: dict[str, str],
                         timeout: float) -> bool:
    """Whether ``base`` has a ``/v1/rerank`` route: an empty request is refused as invalid.

    ``{}`` names no model and no documents, so no server does any work for it; a rerank
    API says the request is invalid (400, 422) where any other server has no route (404,
    405). A 2xx, 5xx or a failure says nothing usable.
    """
    answer = await _ask(http, "POST", base + "/v1/rerank", headers, timeout, body={})
    return isinstance(answer, httpx.Response) and answer.status_code in (400, 422)


async def _ask(http: httpx.AsyncClient, method: str, url: str, headers: dict[str, str],
               timeout: float, body: Any = None) -> httpx.Response | str:
    """One request's answer, read to its end within ``MAX_PROBE_BYTES``; else why not.

    The caller bounds the total time; ``timeout`` here only stops one silent read early.
    """
    path = urlsplit(url).path
    try:
        async with http.stream(method, url, timeout=timeout,
                               headers={**headers, "Accept-Encoding": ACCEPT_ENCODING},
                               **({"json": body} if body is not None else {})) as streamed:
            content = await read_body(streamed, MAX_PROBE_BYTES)
            if content is None:  # counted decoded: a gzip bomb stops here too
                return (f"not a model server ({method} {path} sent more than "
                        f"{MAX_PROBE_BYTES // 1_000_000} MB; a model server's answer to "
                        "it is kilobytes)")
    except Unreadable as exc:
        return f"not a model server ({method} {path} sent {exc})"
    except httpx.InvalidURL as exc:
        # not an HTTPError: unmapped it would end the search in a traceback
        raise ConfigError(f"model server URL {excerpt(url)} is not a usable http(s) URL "
                          f"({excerpt(str(exc))}); write it as http://HOST:PORT") from None
    except httpx.ConnectError as exc:
        return _connect_failure(exc)
    except httpx.TimeoutException:
        return "timeout"
    except httpx.HTTPError as exc:
        return f"failed ({type(exc).__name__})"
    # the bytes are decoded already: their content-encoding no longer applies
    kept = {k: v for k, v in streamed.headers.items()
            if k.lower() not in ("content-encoding", "content-length", "transfer-encoding")}
    return httpx.Response(streamed.status_code, headers=kept, content=content,
                          request=streamed.request)


async def probe_all(client_or_http: Any, urls: Iterable[str], timeout: float = 0.5,
                    api_key: str | None = None) -> list[Probe]:
    """``probe`` each of ``urls`` at once (the servers of an ``endpoints`` list), in order."""
    return list(await asyncio.gather(*(probe(client_or_http, url, timeout, api_key)
                                       for url in urls)))


async def scan(host: str = DEFAULT_HOST, ports: Iterable[int] = PORTS,
               timeout: float = SCAN_SECONDS, also: Iterable[str] = ()) -> list[Probe]:
    """Probe every port of ``host`` at once; one ``Probe`` per port, in port order.

    ``also`` are URLs probed beside the ports (the managed server on a port of its own);
    their probes come first, in the order given. ``timeout`` bounds the whole scan.
    """
    ports = list(ports)
    host = check_host(host)
    name = f"[{host}]" if ":" in host else host
    scanned = {f"http://{name}:{port}" for port in ports}
    extra = [url.rstrip("/") for url in dict.fromkeys(also) if url.rstrip("/") not in scanned]
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    # A bare TCP connect first: when nothing listens (the common case) the scan costs a
    # few milliseconds and never builds an HTTP client (its TLS setup alone is ~100 ms).
    closed = await asyncio.gather(*(_closed(host, port, timeout) for port in ports))
    results = {f"http://{name}:{port}": Probe(f"http://{name}:{port}", None, why)
               for port, why in zip(ports, closed, strict=True) if why is not None}
    listening = [f"http://{name}:{port}"
                 for port, why in zip(ports, closed, strict=True) if why is None]
    if listening or extra:
        left = max(deadline - loop.time(), 0.001)
        # trust_env=False: a proxy from the environment must not stand in for the host.
        async with httpx.AsyncClient(trust_env=False) as http:
            found = await asyncio.gather(*(probe(http, url, left, deadline=timeout)
                                           for url in extra + listening))
        results.update(zip(extra + listening, found, strict=True))
    return [results[url] for url in extra] + [results[f"http://{name}:{port}"]
                                              for port in ports]


def managed_url(cache_dir: Path, host: str = DEFAULT_HOST,
                timeout: float = SCAN_SECONDS) -> str | None:
    """The URL of ``cache_dir``'s managed server (``slm-rerank serve``) while it runs on
    ``host``; else None, also when finding out takes longer than ``timeout``.

    It may listen on any port (``serve --port 8235``), which a scan of 8033-8040 alone
    misses although ``serve status`` reports it. A scan of another host (``--host``) wants
    that host's servers, so a managed server elsewhere is not offered to it.
    """
    from slm_rerank.llama import processes
    from slm_rerank.llama.ports import is_loopback
    from slm_rerank.llama.state import ServerState

    found: list[ServerState | None] = []

    def read() -> None:
        try:
            found.append(processes.running(cache_dir))
        except (OSError, SlmRerankError):
            found.append(None)  # an unreadable record: serve status says what is wrong

    # running() reads files in the cache folder and asks the server's /health: a daemon
    # thread bounds both, and one that hangs cannot keep the process from exiting.
    worker = threading.Thread(target=read, daemon=True, name="slm-rerank-managed-server")
    worker.start()
    worker.join(timeout)
    state = found[0] if found else None
    if state is None:
        return None
    same = state.host == host or (is_loopback(state.host) and is_loopback(host))
    return state.url.rstrip("/") if same else None


async def _closed(host: str, port: int, timeout: float) -> str | None:
    """None when something accepts connections on ``host:port``, else why not."""
    try:
        _, writer = await asyncio.wait_for(asyncio.open_connection(host, port), timeout)
    except asyncio.TimeoutError:
        return "timeout"
    except ConnectionRefusedError:
        return "refused"
    except OSError as exc:
        return f"unreachable ({exc.strerror or exc})"
    writer.close()
    with contextlib.suppress(OSError):
        await writer.wait_closed()
    return None


def check_host(host: str, origin: str | None = None) -> str:
    """``host`` as a scan takes it: a name or an address, without scheme, port or brackets.

    A ``ConfigError`` names what is wrong: a URL or ``HOST:PORT`` belongs to ``-e``, and a
    name the resolver cannot even encode (a label over 63 characters) would otherwise fail
    deep inside the socket layer.
    """
    where = f"{origin}: " if origin else ""
    text = host.strip()
    if text.startswith("[") and text.endswith("]"):
        text = text[1:-1]  # [::1], as written in a URL
    if not text or any(c.isspace() or not c.isprintable() or c in "/@[]?#" for c in text):
        raise ConfigError(f"{where}host {host!r} is not a host name or address; give one "
                          "like 127.0.0.1, ::1 or gpu-box (a server's URL goes to -e URL)")
    if ":" in text:
        try:
            ipaddress.IPv6Address(text)
        except ValueError:
            raise ConfigError(f"{where}host {host!r} is not a host name or address (a port "
                              "or scheme does not belong here; scans try ports "
                              f"{PORTS.start}-{PORTS.stop - 1}; for one server use -e "
                              "http://HOST:PORT)") from None
        return text
    try:
        text.encode("idna")
    except UnicodeError as exc:
        raise ConfigError(f"{where}host {host!r} is not a valid host name ({exc})") from None
    return text


def check_base_url(url: str, origin: str | None = None) -> str:
    """``url`` normalised: http(s) only, no trailing slash, no OpenAI-style ``/v1`` tail.

    Servers are asked at ``/v1/...`` and ``/completion`` below this URL, so the ``/v1``
    that OpenAI client settings carry is dropped. A bad URL is a ``ConfigError`` naming it
    (and ``origin``, the setting it came from, when given).
    """
    where = f"{origin}: " if origin else ""
    text = url.strip()
    if not all(c.isprintable() for c in text):
        # httpx refuses these only when the request is built (InvalidURL), far from the
        # setting; shown escaped: the URL is quoted in a one-line message on a terminal.
        raise ConfigError(f"{where}model server URL '{visible(text)}' holds a control "
                          "or invisible character; write it as http://HOST:PORT")
    try:
        parts = urlsplit(text)
        parts.port  # noqa: B018 - raises ValueError for a port that is not a number
    except ValueError as exc:
        raise ConfigError(f"{where}model server URL {url!r} is malformed ({exc}); write "
                          "it as http://HOST:PORT") from exc
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError(f"{where}model server URL {url!r} is not an http(s) URL; write "
                          "it as http://HOST:PORT")
    if parts.username or parts.password:
        raise ConfigError(f"{where}model server URL {parts.scheme}://…@{parts.hostname} "
                          "carries credentials; URLs are shown in messages and reports, so "
                          "give the key as api_key (SLM_API_KEY) instead")
    if parts.query or parts.fragment:
        raise ConfigError(f"{where}model server URL {url!r} carries a query or fragment; "
                          "give only the server's base URL (http://HOST:PORT)")
    path = re.sub(r"/v1/*$", "", parts.path.rstrip("/"))
    return f"{parts.scheme}://{parts.netloc}{path}"


def _connect_failure(exc: BaseException) -> str:
    """"refused", or why the connection could not even be tried (a name that won't resolve)."""
    cause: BaseException | None = exc
    while cause is not None:
        if isinstance(cause, ConnectionRefusedError):
            return "refused"
        if isinstance(cause, socket.gaierror):
            return f"unreachable ({cause.strerror or cause})"
        cause = cause.__cause__ or cause.__context__
    return f"unreachable ({exc})" if str(exc) else "refused"


# --- reading answers -----------------------------------------------------------------------


def _json(response: httpx.Response) -> Any:
    """The answer's JSON, or None for one that cannot be read (see ``decode_json``)."""
    try:
        return decode_json(response.content)
    except NotJSON:
        return None


def _model_id(body: Any) -> str | None:
    """``data[0].id`` (OpenAI), else ``models[0].name``/``model`` (Ollama, llama.cpp)."""
    if not isinstance(body, dict):
        return None
    for key, fields in (("data", ("id",)), ("models", ("name", "model"))):
        listed = body.get(key)
        if isinstance(listed, list) and listed and isinstance(listed[0], dict):
            for field in fields:
                if isinstance(listed[0].get(field), str) and listed[0][field]:
                    return listed[0][field]
    return None


def _props_model(props: dict[str, Any]) -> str | None:
    for key in ("model_alias", "model_path"):
        if isinstance(props.get(key), str) and props[key]:
            return props[key].rsplit("/", 1)[-1]
    return None


def _version(text: str) -> tuple[int, ...] | None:
    match = re.match(r"v?(\d+)\.(\d+)\.(\d+)", text.strip())
    return tuple(int(n) for n in match.groups()) if match else None
