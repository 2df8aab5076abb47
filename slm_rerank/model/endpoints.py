"""Which model servers a query goes to: the pinned ones that answer, else one a scan finds.

``choose_endpoints`` returns the servers with the notes that say how they were chosen, and
why none answered when none did; the model stage (``stage.py``) records them in its
``Judgement``. A pinned URL that is no model server raises ``ConfigError``.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from slm_rerank.config import Settings
from slm_rerank.errors import ConfigError
from slm_rerank.registrations import Endpoint

if TYPE_CHECKING:
    from slm_rerank.model.session import ModelSession


@dataclass
class FoundEndpoints:
    """The servers chosen for a query, and what a person may want to know about it."""

    #: the servers to spread the chunks over, the first listed first; empty when none answered
    endpoints: list[Endpoint] = field(default_factory=list)
    #: how each server was found, kept or left out, for ``-v``
    notes: list[str] = field(default_factory=list)
    #: why no server answered (the query then degrades to its lexical order); None otherwise
    degraded: str | None = None


#: the settings layers, lowest first, as an origin names them ("user: PATH", "flag: --x")
_LAYERS = ("default", "user", "repo", "env", "flag")


def _layer(origin: str) -> int:
    """The layer of ``origin``; one that names no layer is a caller's argument
    (``Reranker(base_url=...)``, ``Host.with_overrides``), above them all as a flag is."""
    name = origin.split(":", 1)[0]
    return _LAYERS.index(name) if name in _LAYERS else len(_LAYERS)


def pinned_urls(settings: Settings, notes: list[str] | None = None) -> tuple[list[str], str]:
    """The server URLs the settings pin, checked and normalised, and where they came from.

    One URL from ``base_url`` (-e, SLM_ENDPOINT, config) or from the ``[endpoints]`` table
    entry of ``--model``; several from an ``endpoints`` list (config, or -e repeated). When
    both ``base_url`` and a list are set, the higher settings layer wins (SLM_ENDPOINT over
    a list in the user config), which ``notes`` is told; both in one file is an error. An
    empty list: scan.
    """
    base, table = settings.base_url, settings.endpoints
    base_origin = settings.origins.get("base_url", "default")
    list_origin = settings.origins.get("endpoints", "default")
    from slm_rerank.model import discovery

    if isinstance(table, dict):
        if settings.model and settings.model in table and not base:
            origin = f"[endpoints] {settings.model}"
            return [discovery.check_base_url(table[settings.model], origin)], origin
        listed: list[str] = []
    else:
        listed = table
    if listed and base and _layer(list_origin) == _layer(base_origin):
        raise ConfigError(f"{base_origin} sets both base_url ({base}) and an endpoints list; "
                          "keep one (a list may hold a single URL)")
    if listed and (not base or _layer(list_origin) > _layer(base_origin)):
        where = "-e" if list_origin.startswith("flag") else f"{list_origin}: key 'endpoints'"
        urls: list[str] = []
        for url in listed:
            checked = discovery.check_base_url(url, where)
            if checked in urls:
                raise ConfigError(f"{where}: model server URL {checked} is listed twice; "
                                  "list each server once (its slots say how much it takes)")
            urls.append(checked)
        return urls, where
    if base:
        if listed and notes is not None:
            notes.append(f"base_url from {base_origin} overrides the endpoints list from "
                         f"{list_origin}")
        return [discovery.check_base_url(base, base_origin)], base_origin
    return [], "default"


def _endpoint_key(settings: Settings) -> tuple[Any, ...]:
    """Everything that decides which servers a query goes to."""
    table = settings.endpoints
    listed = tuple(sorted(table.items())) if isinstance(table, dict) else tuple(table)
    return (settings.base_url, settings.host, settings.model, listed, settings.api_key,
            settings.origins.get("base_url"), settings.origins.get("endpoints"))


async def choose_endpoints(settings: Settings, client: object,
                           session: ModelSession | None = None) -> FoundEndpoints:
    """The servers a query goes to, with the settings that override what their probes said
    (``concurrency`` for their slots, ``--api`` for how they are asked) applied."""
    found = await find_endpoints(settings, client, session)
    chosen = []
    for endpoint in found.endpoints:
        if settings.concurrency:
            endpoint = dataclasses.replace(endpoint, slots=settings.concurrency)
        if settings.api and settings.api != endpoint.kind:
            found.notes.append(f"asking {endpoint.base_url} as {settings.api} "
                               f"(probed as {endpoint.kind})")
            endpoint = dataclasses.replace(endpoint, kind=settings.api)
        chosen.append(endpoint)
    found.endpoints = chosen
    return found


async def find_endpoints(settings: Settings, client: object,
                         session: ModelSession | None = None) -> FoundEndpoints:
    """The pinned servers (flag, environment, config) that answer, else the first one a scan
    finds; none (and ``degraded`` says why) when none answers.

    With a ``session``, the endpoints found by an earlier call with the same settings are
    reused without probing them again.
    """
    if session is not None:
        kept = session.endpoints(_endpoint_key(settings))
        if kept is not None:
            return FoundEndpoints(list(kept), [f"endpoint {', '.join(e.base_url for e in kept)}"
                                               " kept from an earlier call"])
    found = await _find_endpoints(settings, client)
    if session is not None and found.endpoints:
        session.remember(_endpoint_key(settings), tuple(found.endpoints))
    return found


async def _find_endpoints(settings: Settings, client: object) -> FoundEndpoints:
    from slm_rerank.model import discovery

    notes: list[str] = []
    urls, origin = pinned_urls(settings, notes)
    if len(urls) > 1:
        return await _several(settings, client, urls, origin, notes)
    if urls:
        url = urls[0]
        # a pinned server may be remote or busy: it gets longer than a scanned port
        probe = await discovery.probe(client, url, timeout=_probe_timeout(settings),
                                      api_key=settings.api_key)
        if probe.permanent:
            raise ConfigError(f"{url} (from {origin}) is not a usable model server: "
                              f"{probe.reason}")
        if probe.endpoint is None:
            return FoundEndpoints([], notes, f"the model server {url} (from {origin}) did "
                                             f"not answer: {probe.reason}")
        notes.append(f"endpoint {url} from {origin}")
        return FoundEndpoints([probe.endpoint], notes)
    host = discovery.DEFAULT_HOST
    if settings.host:
        host = discovery.check_host(settings.host, settings.origins.get("host", "host"))
    from slm_rerank.cache_folder import cache_path

    # the managed server may listen off the scanned ports (serve --port 8235)
    managed = discovery.managed_url(cache_path(settings), host)
    probes = await discovery.scan(host, also=[managed] if managed else [])
    for found in probes:
        if found.endpoint is not None:
            how = ("the managed server (slm-rerank serve status)" if found.url == managed
                   else f"found by scanning {host}")
            notes.append(f"endpoint {found.url} {how}")
            return FoundEndpoints([found.endpoint], notes)
    why = "; ".join(f"{p.url if p.url == managed else p.url.rsplit(':', 1)[-1]} {p.reason}"
                    for p in probes)
    # --local was passed (or auto_serve set): it ran, or --host kept it from starting
    local = "" if settings.auto_serve else ("pass --local to start the bundled model "
                                            "(slm-rerank serve --help), ")
    return FoundEndpoints([], notes, f"no model server answered on {host} ports "
                          f"{discovery.PORTS.start}-{discovery.PORTS.stop - 1} ({why}); "
                          f"{local}-e URL for your own server (slm-rerank endpoints -e URL "
                          "checks it), or --fast for lexical only")


async def _several(settings: Settings, client: object, urls: list[str], origin: str,
                   notes: list[str]) -> FoundEndpoints:
    """The listed servers that answer with the model of the first listed one that answers.

    A server serving another model is left out with a note: its verdicts would mix two
    models' scores (and two score-cache keys) in one ranking. One that does not answer is
    left out too; only when none answers does the query degrade.
    """
    from slm_rerank.model import discovery

    probes = await discovery.probe_all(client, urls, timeout=_probe_timeout(settings),
                                       api_key=settings.api_key)
    for probe in probes:
        if probe.permanent:
            raise ConfigError(f"{probe.url} (from {origin}) is not a usable model server: "
                              f"{probe.reason}; fix it or take it off the list")
    answered = [p.endpoint for p in probes if p.endpoint is not None]
    if not answered:
        why = "; ".join(f"{p.url} {p.reason}" for p in probes)
        return FoundEndpoints([], notes, f"none of the {len(urls)} model servers (from "
                                         f"{origin}) answered: {why}")
    model = answered[0].model_id
    used = [e for e in answered if e.model_id == model]
    for probe in probes:
        if probe.endpoint is None:
            notes.append(f"endpoint {probe.url} (from {origin}) did not answer "
                         f"({probe.reason}); carried on without it")
        elif probe.endpoint.model_id != model:
            notes.append(
                f"endpoint {probe.url} serves {probe.endpoint.model_id!r}, not {model!r} "
                f"(the first listed server that answered): left out, so that one model "
                "judges every chunk")
    notes.append(f"endpoints {', '.join(e.base_url for e in used)} from {origin} "
                 f"(model {model}, {sum(e.slots for e in used)} slots in all)")
    return FoundEndpoints(used, notes)


def _probe_timeout(settings: Settings) -> float:
    """How long a probe may wait: 5 s, or a quarter of a longer stage timeout (a busy server
    on a loaded machine answers /props slowly, and degrading then wastes the query)."""
    return min(settings.timeout, max(5.0, settings.timeout / 4))
