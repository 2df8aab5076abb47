"""The model stage of one query: find a server, pick a profile and scorer, judge the head.

``judge`` takes plain chunks (path, lines, symbol, text) and returns a ``Judgement``: the
model's verdicts by chunk index, and everything the report says about how they were
obtained. A transient fault becomes ``Judgement.degraded`` with whatever was already
scored; a permanent one (unknown profile, a bad URL, an answer we cannot parse) raises.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import hashlib
import json
import math
import time
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from slm_rerank.config import Settings
from slm_rerank.errors import ConfigError, TransientError
from slm_rerank.host import Host
from slm_rerank.model.profiles import ProfileChoice, choose_profile
from slm_rerank.model.progress import Progress
from slm_rerank.model.score_cache import ScoreCache, ScoreKey
from slm_rerank.model.scoring import EndpointUse, collect, spread
from slm_rerank.registrations import (
    Document,
    DocumentScore,
    Endpoint,
    ModelProfile,
    ScoreRequest,
)

if TYPE_CHECKING:
    from slm_rerank.model.client import ModelClient
    from slm_rerank.model.session import ModelSession


@dataclass(frozen=True)
class Passage:
    """One chunk as the model sees it."""

    path: str
    start_line: int
    end_line: int
    symbol: str | None
    #: the chunk's lines, already cut to the prompt budget
    code: str
    cut: bool = False

    def document(self, index: int) -> Document:
        where = f"{self.path}:{self.start_line}-{self.end_line}"
        head = f"File: {where}" + (f" ({self.symbol})" if self.symbol else "")
        return Document.of(str(index), f"{head}\n{self.code}", path=self.path,
                           start_line=self.start_line, end_line=self.end_line,
                           symbol=self.symbol, cut=self.cut)


def cut_lines(lines: Sequence[str], terms: Sequence[str], budget: int) -> tuple[str, bool]:
    """The chunk's text within ``budget`` characters, centred on its best-matching lines.

    A chunk's end is no better than its middle: the window is grown from the line with the
    most query terms, so the evidence that made the chunk a candidate is what the model
    reads.
    """
    text = "\n".join(lines)
    if len(text) <= budget:
        return text, False
    low = [line.lower() for line in lines]
    hits = [sum(term in line for term in terms) for line in low]
    best = max(range(len(lines)), key=lambda i: (hits[i], -i)) if any(hits) else 0
    lo = hi = best
    size = len(lines[best])
    grown = True
    while grown:
        grown = False
        if lo > 0 and size + len(lines[lo - 1]) + 1 <= budget:
            lo -= 1
            size += len(lines[lo]) + 1
            grown = True
        if hi + 1 < len(lines) and size + len(lines[hi + 1]) + 1 <= budget:
            hi += 1
            size += len(lines[hi]) + 1
            grown = True
    return "\n".join(lines[lo:hi + 1])[:budget], True


@dataclass
class Judgement:
    """What the model stage did for one query."""

    #: chunk index -> the model's verdict
    scores: dict[int, DocumentScore] = field(default_factory=dict)
    endpoint: Endpoint | None = None
    profile: ProfileChoice | None = None
    scorer: str | None = None
    #: chunks sent to the model (after de-duplication and the cache)
    sent: int = 0
    cache_hits: int = 0
    model_ms: float = 0.0
    degraded: str | None = None
    notes: list[str] = field(default_factory=list)
    #: every server the chunks were spread over (``endpoint`` is the first)
    endpoints: list[Endpoint] = field(default_factory=list)
    #: how many verdicts each server gave, and which failed mid-run
    uses: list[EndpointUse] = field(default_factory=list)
    #: chunk index -> why the server would not judge it (its prompt was still longer than
    #: the server's context); such a chunk has no verdict
    skipped: dict[int, str] = field(default_factory=dict)
    #: what a person must be told without -v (chunks left unjudged, and which; a score
    #: cache the disk refused)
    warnings: list[str] = field(default_factory=list)
    #: how the judged text differs from what was given (chunks shortened after their
    #: tokens were counted), for the documents API to pass on; also in ``notes``
    shortened: list[str] = field(default_factory=list)


# --- finding the server -------------------------------------------------------------------

#: the settings layers, lowest first, as an origin names them ("user: PATH", "flag: --x")
_LAYERS = ("default", "user", "repo", "env", "flag")


def _layer(origin: str) -> int:
    name = origin.split(":", 1)[0]
    return _LAYERS.index(name) if name in _LAYERS else 0


def pinned_urls(settings: Settings, notes: list[str] | None = None) -> tuple[list[str], str]:
    """The server URLs the settings pin, checked and normalised, and where they came from.

    One URL from ``base_url`` (-e, SLM_ENDPOINT, config) or from the ``[endpoints]`` table
    entry of ``--model``; several from an ``endpoints`` list (config, or -e repeated). When
    both ``base_url`` and a list are set, the higher settings layer wins (SLM_ENDPOINT over
    a list in the user config); both in one file is an error. An empty list: scan.
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


async def find_endpoints(settings: Settings, client: object, judgement: Judgement,
                         session: ModelSession | None = None) -> list[Endpoint]:
    """The pinned servers (flag, environment, config) that answer, else the first one a scan
    finds; empty (and ``judgement.degraded``) when none answers.

    With a ``session``, the endpoints found by an earlier call with the same settings are
    reused without probing them again.
    """
    if session is not None:
        kept = session.endpoints(_endpoint_key(settings))
        if kept is not None:
            judgement.notes.append(f"endpoint {', '.join(e.base_url for e in kept)} kept "
                                   "from an earlier call")
            return list(kept)
    found = await _find_endpoints(settings, client, judgement)
    if session is not None and found:
        session.remember(_endpoint_key(settings), tuple(found))
    return found


async def _find_endpoints(settings: Settings, client: object, judgement: Judgement
                          ) -> list[Endpoint]:
    from slm_rerank.model import discovery

    urls, origin = pinned_urls(settings, judgement.notes)
    if len(urls) > 1:
        return await _several(settings, client, judgement, urls, origin)
    if urls:
        url = urls[0]
        # a pinned server may be remote or busy: it gets longer than a scanned port
        probe = await discovery.probe(client, url, timeout=_probe_timeout(settings),
                                      api_key=settings.api_key)
        if probe.permanent:
            raise ConfigError(f"{url} (from {origin}) is not a usable model server: "
                              f"{probe.reason}")
        if probe.endpoint is None:
            judgement.degraded = (f"the model server {url} (from {origin}) did not answer: "
                                  f"{probe.reason}")
            return []
        judgement.notes.append(f"endpoint {url} from {origin}")
        return [probe.endpoint]
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
            judgement.notes.append(f"endpoint {found.url} {how}")
            return [found.endpoint]
    why = "; ".join(f"{p.url if p.url == managed else p.url.rsplit(':', 1)[-1]} {p.reason}"
                    for p in probes)
    # --local was passed (or auto_serve set): it ran, or --host kept it from starting
    local = "" if settings.auto_serve else ("pass --local to start the bundled model "
                                            "(slm-rerank serve --help), ")
    judgement.degraded = (f"no model server answered on {host} ports "
                          f"{discovery.PORTS.start}-{discovery.PORTS.stop - 1} ({why}); "
                          f"{local}-e URL for your own server (slm-rerank endpoints -e URL "
                          "checks it), or --fast for lexical only")
    return []


async def _several(settings: Settings, client: object, judgement: Judgement,
                   urls: list[str], origin: str) -> list[Endpoint]:
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
        judgement.degraded = (f"none of the {len(urls)} model servers (from {origin}) "
                              f"answered: {why}")
        return []
    model = answered[0].model_id
    used = [e for e in answered if e.model_id == model]
    for probe in probes:
        if probe.endpoint is None:
            judgement.notes.append(f"endpoint {probe.url} (from {origin}) did not answer "
                                   f"({probe.reason}); carried on without it")
        elif probe.endpoint.model_id != model:
            judgement.notes.append(
                f"endpoint {probe.url} serves {probe.endpoint.model_id!r}, not {model!r} "
                f"(the first listed server that answered): left out, so that one model "
                "judges every chunk")
    judgement.notes.append(f"endpoints {', '.join(e.base_url for e in used)} from {origin} "
                           f"(model {model}, {sum(e.slots for e in used)} slots in all)")
    return used


def _probe_timeout(settings: Settings) -> float:
    """How long a probe may wait: 5 s, or a quarter of a longer stage timeout (a busy server
    on a loaded machine answers /props slowly, and degrading then wastes the query)."""
    return min(settings.timeout, max(5.0, settings.timeout / 4))


# --- fitting the server's context -----------------------------------------------------------

#: characters per token assumed when sizing prompts: code and identifiers tokenise densely
CHARS_PER_TOKEN = 3.0
#: tokens kept free in a request for the answer and the chat template's own tokens
RESERVED_TOKENS = 32


def fit_query(query: str, endpoint: Endpoint | None, profile: ModelProfile | None,
              notes: list[str]) -> tuple[str, int | None]:
    """The query as one prompt may hold it, and the characters of the prompt left for the
    query and one document (None when the server reports no context).

    The query keeps at most half the room, its start first (a pasted issue leads with its
    title).
    """
    if endpoint is None or profile is None or not endpoint.context_tokens:
        return query, None
    room = int((endpoint.context_tokens - RESERVED_TOKENS) * CHARS_PER_TOKEN)
    room -= len(profile.render_completion("", ""))
    if len(query) <= room // 2:
        return query, room
    asked = query[:max(room // 2, 0)]
    notes.append(f"the query was cut to its first {len(asked)} characters to fit "
                 f"{endpoint.base_url}'s context of {endpoint.context_tokens} tokens")
    return asked, room


def fit_context(query: str, passages: Sequence[Passage], endpoint: Endpoint | None,
                profile: ModelProfile | None, notes: list[str]
                ) -> tuple[str, list[Passage]]:
    """The query and passages cut so that one prompt fits one request's context.

    Only when the server reports its context (llama.cpp: one slot's). The query keeps at
    most half the room, its start first (a pasted issue leads with its title); each chunk
    is cut again around its best-matching lines to what is left.
    """
    out = list(passages)
    asked, room = fit_query(query, endpoint, profile, notes)
    if room is None or endpoint is None:
        return asked, out
    header = 120  # the "File: path:lines (symbol)" line
    budget = max(room - len(asked) - header, 0)
    terms = [w for w in query.lower().split() if len(w) > 2]
    cut = 0
    for i, p in enumerate(out):
        if len(p.code) > budget:
            code, _ = cut_lines(p.code.splitlines(), terms, budget)
            out[i] = dataclasses.replace(p, code=code, cut=True)
            cut += 1
    if cut:
        notes.append(f"{cut} chunks were cut to {budget} characters to fit "
                     f"{endpoint.base_url}'s context of {endpoint.context_tokens} tokens")
    return asked, out


# --- judging ------------------------------------------------------------------------------


async def _connect(settings: Settings, client: ModelClient, judgement: Judgement, host: Host,
                   session: ModelSession | None) -> list[Endpoint]:
    """Find the servers, apply the settings that override what their probes said, and choose
    the profile; ``judgement`` records both. Empty (and ``judgement.degraded``) when no
    server answers."""
    endpoints = []
    for endpoint in await find_endpoints(settings, client, judgement, session):
        if settings.concurrency:
            endpoint = dataclasses.replace(endpoint, slots=settings.concurrency)
        if settings.api and settings.api != endpoint.kind:
            judgement.notes.append(f"asking {endpoint.base_url} as {settings.api} "
                                   f"(probed as {endpoint.kind})")
            endpoint = dataclasses.replace(endpoint, kind=settings.api)
        endpoints.append(endpoint)
    if not endpoints:
        return []
    judgement.endpoint, judgement.endpoints = endpoints[0], endpoints
    judgement.profile = choose_profile(host.registry.profiles(),
                                       model_id=endpoints[0].model_id,
                                       requested=settings.model)
    return endpoints


@contextlib.asynccontextmanager
async def _client(session: ModelSession | None, timeout: float
                  ) -> AsyncIterator[ModelClient]:
    """The session's warm client, or one of this call's own."""
    from slm_rerank.model.client import ModelClient

    if session is not None:
        yield session.client
        return
    async with ModelClient(timeout=timeout) as client:
        yield client


#: What a judge run needs from its caller: given the narrowest server and the profile (each
#: may be None) and the notes to add to, the query as asked and the documents to judge.
Prepare = Callable[[Endpoint | None, ModelProfile | None, list[str]],
                   tuple[str, list[Document]]]


async def judge_async(query: str, passages: Sequence[Passage], host: Host, settings: Settings,
                      cache_dir: Path | None) -> Judgement:
    """Judge code chunks: each is shown with its ``File: path:lines`` line, cut to fit."""
    def prepare(narrowest: Endpoint | None, profile: ModelProfile | None,
                notes: list[str]) -> tuple[str, list[Document]]:
        asked, fitted = fit_context(query, passages, narrowest, profile, notes)
        return asked, [p.document(i) for i, p in enumerate(fitted)]

    return await judge_documents_async(query, prepare, host, settings, cache_dir)


async def judge_documents_async(query: str, prepare: Prepare, host: Host, settings: Settings,
                                cache_dir: Path | None, noun: str = "chunks",
                                unjudged: str = "keep their lexical order") -> Judgement:
    """Find the server, choose profile and scorer, and judge what ``prepare`` gives.

    A scorer whose verdicts depend on one document alone (``per_document``) is answered
    from the score cache where it can be and may be spread over several servers; one that
    compares documents (listwise) gets them all in one request to one server, uncached.
    """
    session = host.model_session

    started = time.perf_counter()
    judgement = Judgement(scorer=settings.scorer)
    scorers = host.registry.scorers()
    if settings.scorer not in scorers:
        known = ", ".join(sorted(scorers)) or "none installed"
        raise ConfigError(f"{settings.origins.get('scorer', 'default')}: key 'scorer': "
                          f"unknown scorer {settings.scorer!r} (installed: {known}); "
                          "pip install slm-rerank-yesno")
    scorer = scorers[settings.scorer]
    deadline = time.monotonic() + settings.timeout
    async with _client(session, settings.timeout) as client:
        endpoints: list[Endpoint] = []
        if scorer.needs_endpoint:
            endpoints = await _connect(settings, client, judgement, host, session)
            if not endpoints:
                return judgement
        else:
            judgement.profile = choose_profile(host.registry.profiles(),
                                               requested=settings.model)
        endpoint = endpoints[0] if endpoints else None
        if judgement.profile is None and scorer.needs_endpoint:
            raise ConfigError("no model profile is installed; pip install slm-rerank-openai "
                              "(or the profile of your model family, e.g. slm-rerank-qwen)")
        profile = judgement.profile.profile if judgement.profile else None
        if judgement.profile is not None:
            judgement.notes.append(f"profile {judgement.profile.profile.name}: "
                                   f"{judgement.profile.reason}; scorer {scorer.name}")
        # Every server may get any chunk: fit the one with the smallest context.
        narrowest = min(endpoints, key=lambda e: e.context_tokens or math.inf, default=None)
        asked, documents = prepare(narrowest, profile, judgement.notes)
        if narrowest is not None and documents:
            from slm_rerank.model.budget import measured_within

            measured = await measured_within(client, narrowest, profile, asked, documents,
                                             deadline)
            asked, documents = measured.query, measured.documents
            judgement.notes.extend(measured.notes)
            if measured.shortened:
                judgement.shortened.extend(measured.notes)
        options = host.options_for(scorer.name)
        # A scorer's settings ([plugins.graded] max_grade, a localised instruction) change
        # its verdicts: they are part of what a cached verdict was made with.
        scorer_key = scorer.name + (
            "@" + hashlib.sha256(json.dumps(options, sort_keys=True, default=str).encode()
                                 ).hexdigest()[:16] if options else "")
        keys = {i: ScoreKey(endpoint.model_id or endpoint.base_url if endpoint else "-",
                            profile.name if profile else "-",
                            profile.prompt_version if profile else "-", scorer_key, query,
                            d.content_hash) for i, d in enumerate(documents)}
        alone = scorer.per_document
        cache = (ScoreCache(cache_dir) if alone and cache_dir is not None and
                 settings.score_cache else None)
        cached = cache.get_many(keys.values()) if cache else {}
        # Identical chunks (a vendored copy, a repeated block) are asked once.
        todo: dict[str, list[int]] = {}
        for i, doc in enumerate(documents):
            hit = cached.get(keys[i].digest)
            if hit is not None:
                judgement.scores[i] = DocumentScore(i, hit.probability, hit.raw, note="cached")
                judgement.cache_hits += 1
            else:
                todo.setdefault(doc.content_hash if alone else str(i), []).append(i)
        firsts = [indices[0] for indices in todo.values()]
        judgement.sent = len(firsts)
        if firsts:
            request = ScoreRequest(query=asked, documents=[documents[i] for i in firsts],
                                   profile=profile, endpoint=endpoint, deadline=deadline,
                                   options=options, client=client)
            progress = Progress(len(firsts))
            try:
                if endpoints and alone:
                    outcome = await spread(scorer, request, endpoints,
                                           lambda _: progress.advance())
                else:  # a listwise judge sees every document at once, on one server
                    outcome = await collect(scorer, request, lambda _: progress.advance())
            finally:
                progress.close()
            judgement.uses = outcome.uses
            judgement.notes.extend(outcome.notes)
            for j, why in outcome.skipped.items():
                first = firsts[j]
                for i in todo[documents[first].content_hash if alone else str(first)]:
                    judgement.skipped[i] = why
            if judgement.skipped:
                judgement.warnings.append(_skipped_warning(judgement.skipped, documents, noun))
            if len(outcome.uses) > 1:
                judgement.notes.append("verdicts by endpoint: " + ", ".join(
                    f"{u.url} {u.scored}" + (" (failed)" if u.failed else "")
                    for u in outcome.uses))
            fresh = []
            for j, verdict in outcome.scores.items():
                first = firsts[j]
                for i in todo[documents[first].content_hash if alone else str(first)]:
                    judgement.scores[i] = DocumentScore(i, verdict.probability, verdict.raw,
                                                        verdict.bounded, verdict.note)
                if verdict.bounded is None:
                    fresh.append((keys[first], verdict.probability, verdict.raw))
            if cache:
                cache.put_many(fresh)
            if outcome.stopped and len(judgement.scores) == len(documents):
                # every verdict came, and then the scorer said what went wrong (a listwise
                # window it could not use): the order is the model's, but not all of it
                judgement.degraded = (f"{outcome.stopped}; all {len(documents)} {noun} have "
                                      "a verdict")
            elif outcome.stopped:
                judgement.degraded = (f"{outcome.stopped}; {len(judgement.scores)} of "
                                      f"{len(documents)} {noun} were scored, the rest "
                                      f"{unjudged}")
        if cache:
            cache.close()
            if cache.warning:
                judgement.warnings.append(cache.warning)
    judgement.model_ms = (time.perf_counter() - started) * 1000
    return judgement


def _skipped_warning(skipped: dict[int, str], documents: Sequence[Document], noun: str) -> str:
    """One line naming the documents the server would not judge, and the server's reason.

    A file name or id may hold control characters (a repository's, a caller's): they are
    shown escaped, since this line reaches a terminal or an agent as it is.
    """
    from slm_rerank.report import display_path, visible

    def name(document: Document) -> str:
        meta = document.metadata
        if meta.get("path") is not None:
            where = display_path(str(meta["path"]))
            return visible(f"{where}:{meta.get('start_line')}-{meta.get('end_line')}")
        return visible(repr(document.id))

    names = [name(documents[i]) for i in sorted(skipped)]
    shown = ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")
    return (f"{len(names)} of {len(documents)} {noun} were not judged ({shown}): "
            f"{visible(next(iter(skipped.values())))}; they have no model verdict")


def judge(query: str, passages: Sequence[Passage], host: Host, settings: Settings,
          cache_dir: Path | None) -> Judgement:
    """``judge_async`` for callers without an event loop; a transient fault degrades.

    On the host's model session when it has one (warm client, known endpoint), else in a
    loop of its own.
    """
    session = host.model_session
    coroutine = judge_async(query, passages, host, settings, cache_dir)
    try:
        judgement = session.run(coroutine) if session else asyncio.run(coroutine)
    except TransientError as exc:
        judgement = Judgement(scorer=settings.scorer, degraded=str(exc))
    if session is not None and (judgement.degraded or any(u.failed for u in judgement.uses)):
        session.forget()  # a server failed: look for the servers again next time
    return judgement


def locate(host: Host, settings: Settings) -> Judgement:
    """The server and profile a query would use, found without judging anything.

    For the stages before recall (query expansion), which need a model but no scorer. No
    server is ``degraded``, not an exception; a permanent fault (a pinned URL that is no
    model server, an unknown ``--model``) raises ``ConfigError`` as it does for judging.
    """
    session = host.model_session

    async def run() -> Judgement:
        found = Judgement()
        async with _client(session, settings.timeout) as client:
            await _connect(settings, client, found, host, session)
        return found

    try:
        return session.run(run()) if session else asyncio.run(run())
    except TransientError as exc:
        return Judgement(degraded=str(exc))
