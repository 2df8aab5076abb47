"""The model stage of one query: find a server, pick a profile and scorer, judge the head.

The servers are chosen by ``endpoints.py`` and the text each prompt holds by
``passages.py``; this module runs the scorer over it. ``judge`` takes plain chunks
(``Passage``: path, lines, symbol, text) and returns a ``Judgement``: the
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
from typing import TYPE_CHECKING

from slm_rerank.config import Settings
from slm_rerank.errors import ConfigError, ContractError, TransientError
from slm_rerank.host import Host
from slm_rerank.model.endpoints import choose_endpoints
from slm_rerank.model.intent import Intent
from slm_rerank.model.judge_budget import (
    Budget,
    TokenUse,
    count_verdict,
    judge_in_rounds,
    unjudged_tokens,
)
from slm_rerank.model.passages import Passage, fit_context
from slm_rerank.model.profiles import ProfileChoice, choose_profile, weight_text
from slm_rerank.model.progress import Progress
from slm_rerank.model.score_cache import ScoreCache, ScoreKey
from slm_rerank.model.scoring import EndpointUse, ScoreOutcome, collect, spread
from slm_rerank.registrations import (
    Document,
    DocumentScore,
    Endpoint,
    ModelProfile,
    Scorer,
    ScoreRequest,
)

if TYPE_CHECKING:
    from slm_rerank.model.client import ModelClient
    from slm_rerank.model.session import ModelSession


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
    #: what the judge was asked, by the query's intent (``model/intent.py``); None for the
    #: documents API and for a profile that words one question for every intent
    intent: Intent | None = None
    #: what the verdicts cost on the server, and what a budget or the cascade left out
    tokens: TokenUse = field(default_factory=TokenUse)


# --- judging ------------------------------------------------------------------------------


async def _connect(settings: Settings, client: ModelClient, judgement: Judgement, host: Host,
                   session: ModelSession | None) -> list[Endpoint]:
    """Find the servers (``endpoints.py``) and choose the profile; ``judgement`` records
    both. Empty (and ``judgement.degraded``) when no server answers."""
    found = await choose_endpoints(settings, client, session)
    judgement.notes.extend(found.notes)
    if not found.endpoints:
        judgement.degraded = found.degraded
        return []
    endpoints = found.endpoints
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
                      cache_dir: Path | None, intent: Intent | None = None,
                      decisive: str | None = None) -> Judgement:
    """Judge code chunks: each is shown with its ``File: path:lines`` line, cut to fit,
    with the question of the query's ``intent`` where the profile words one.

    ``decisive`` is why the cascade asks nothing (``cascade.asks_nothing``): the
    server and profile are found, and no chunk is sent.
    """
    def prepare(narrowest: Endpoint | None, profile: ModelProfile | None,
                notes: list[str]) -> tuple[str, list[Document]]:
        asked, fitted = fit_context(query, passages, narrowest, profile, notes)
        return asked, [p.document(i) for i, p in enumerate(fitted)]

    return await judge_documents_async(query, prepare, host, settings, cache_dir,
                                       intent=intent, decisive=decisive)


async def judge_documents_async(query: str, prepare: Prepare, host: Host, settings: Settings,
                                cache_dir: Path | None, noun: str = "chunks",
                                unjudged: str = "keep their lexical order",
                                intent: Intent | None = None,
                                instruction: str | None = None,
                                decisive: str | None = None) -> Judgement:
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
                                   f"{judgement.profile.reason}; scorer {scorer.name}; "
                                   f"{weight_text(judgement.profile.profile)}")
        if profile is not None and intent is not None:
            asking = profile.for_intent(intent.kind)
            if asking is not profile:
                profile = asking
                judgement.profile = ProfileChoice(asking, judgement.profile.reason)
                judgement.intent = intent
                judgement.notes.append(f"intent {intent.kind}: {intent.why}")
        if profile is not None and instruction is not None and judgement.profile is not None:
            # another question in the profile's layout (the review's judges); its
            # prompt_version changes with it, so the score cache keeps the two apart
            profile = dataclasses.replace(profile, instruction=instruction)
            judgement.profile = ProfileChoice(profile, judgement.profile.reason)
        # Every server may get any chunk: fit the one with the smallest context.
        narrowest = min(endpoints, key=lambda e: e.context_tokens or math.inf, default=None)
        asked, documents = prepare(narrowest, profile, judgement.notes)
        if decisive is not None and documents:
            # nothing is asked, not even the cache: one cached verdict would lift its chunk
            # above the lexical first the cascade chose to keep
            prefix = profile.render_completion(asked, "") if profile else asked
            judgement.tokens = TokenUse(budget=Budget(settings.budget_tokens,
                                                      settings.budget_seconds),
                                        cascade=True, stopped=decisive,
                                        unjudged=len(documents),
                                        saved=unjudged_tokens(prefix, documents))
            judgement.notes.append(f"0 of {len(documents)} {noun} were judged, {decisive}; "
                                   f"all {len(documents)} (about {judgement.tokens.saved} "
                                   f"prompt tokens) {unjudged}")
            judgement.model_ms = (time.perf_counter() - started) * 1000
            return judgement
        if narrowest is not None and documents:
            from slm_rerank.model.prompt_fit import measured_within

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
            # the prompt around a document: what every prompt of this query shares
            prefix = profile.render_completion(asked, "") if profile else asked
            progress = Progress(len(firsts))
            try:
                outcome = await _score(scorer, request, endpoints, alone, settings,
                                       judgement.tokens, prefix, progress)
            finally:
                progress.close()
            judgement.uses = outcome.uses
            spent = judgement.tokens.per_document
            judgement.tokens.per_document = {firsts[j]: cost for j, cost in spent.items()}
            if judgement.tokens.stopped:
                judgement.notes.append(
                    f"{len(outcome.scores)} of {len(firsts)} {noun} were judged: "
                    f"{judgement.tokens.stopped}; the other {judgement.tokens.unjudged} "
                    f"(about {judgement.tokens.saved} prompt tokens) {unjudged}")
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


async def _score(scorer: Scorer, request: ScoreRequest, endpoints: Sequence[Endpoint],
                 alone: bool, settings: Settings, tokens: TokenUse, prefix: str,
                 progress: Progress) -> ScoreOutcome:
    """The scorer's verdicts on ``request``: all at once, or in rounds when a budget or the
    cascade may stop early (``model/judge_budget.py``); ``tokens`` gets what they cost.
    ``prefix`` is the prompt around a document, which every prompt of the query shares."""
    prefix_chars = len(prefix)
    tick: Callable[[DocumentScore], None] = lambda _: progress.advance()  # noqa: E731
    budget = Budget(settings.budget_tokens, settings.budget_seconds)
    if not (alone and endpoints) or not (budget or settings.cascade):
        # a listwise judge sees every document at once, on one server
        outcome = await (spread(scorer, request, endpoints, tick) if endpoints and alone
                         else collect(scorer, request, tick))
        for i, verdict in outcome.scores.items():
            count_verdict(tokens, i, verdict, request.documents[i], prefix_chars)
        return outcome
    deadline = request.deadline if request.deadline is not None else math.inf
    uses: dict[str, EndpointUse] = {}

    async def run(batch: list[int], ends: float) -> ScoreOutcome:
        working = [e for e in endpoints if not (e.base_url in uses and uses[e.base_url].failed)]
        sub = dataclasses.replace(request, documents=[request.documents[i] for i in batch],
                                  deadline=ends)
        return await spread(scorer, sub, working or endpoints, tick)

    def merge(part: ScoreOutcome, batch: list[int]) -> None:
        for u in part.uses:
            mine = uses.setdefault(u.url, EndpointUse(u.url, u.slots))
            mine.scored += u.scored
            mine.failed = mine.failed or u.failed

    slots = sum(max(1, e.slots) for e in endpoints)
    # a seconds budget is a total: the tokenize that sizes a token budget counts in it
    started = time.monotonic()
    ends = started + budget.seconds if budget.seconds is not None else math.inf
    prefix_tokens = await _prefix_tokens(request, prefix, budget, min(deadline, ends))
    outcome = await judge_in_rounds(run, request.documents, range(len(request.documents)),
                                    prefix_chars, slots, budget, settings.cascade, tokens,
                                    merge, prefix_tokens, deadline, started)
    outcome.uses = list(uses.values())
    return outcome


async def _prefix_tokens(request: ScoreRequest, prefix: str, budget: Budget,
                         deadline: float) -> int | None:
    """The tokens of the prompt around a document, counted by the server, when a token
    budget needs them: one tokenize request, within the deadline; None when the server
    cannot count (the budget then estimates 3 characters a token)."""
    if budget.tokens is None or request.endpoint is None or request.profile is None:
        return None
    try:
        counted = await asyncio.wait_for(request.client.tokenize(request.endpoint, prefix),
                                         max(deadline - time.monotonic(), 0.001))
    except (TransientError, ContractError, asyncio.TimeoutError):
        return None
    return len(counted) if counted else None


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
          cache_dir: Path | None, intent: Intent | None = None,
          decisive: str | None = None) -> Judgement:
    """``judge_async`` for callers without an event loop; a transient fault degrades.

    On the host's model session when it has one (warm client, known endpoint), else in a
    loop of its own.
    """
    session = host.model_session
    coroutine = judge_async(query, passages, host, settings, cache_dir, intent, decisive)
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
