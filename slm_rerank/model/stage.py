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
from typing import TYPE_CHECKING, Any

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

    The steps, in order, each a function below:

    1. ``_scorer``: the scorer the settings name;
    2. ``_find_servers``: the servers (``endpoints.py``) and the profile;
    3. ``_question``: the profile's question for the query's intent, or the caller's;
    4. ``prepare`` and ``_fit_to_tokens``: the documents, cut to the narrowest server's
       context by characters and then by the server's count of their tokens;
    5. ``_ask_nothing``: the cascade found the lexical order decisive (``decisive``,
       ``cascade.py``), so nothing is asked;
    6. ``_from_cache``: the verdicts the score cache holds, and the documents still to ask
       (identical documents once);
    7. ``_ask``: the scorer's verdicts on those, at once or in rounds (``_score``);
    8. ``_record``: the verdicts, the notes, the warnings and the degraded text.

    A scorer whose verdicts depend on one document alone (``per_document``) is answered
    from the score cache where it can be and may be spread over several servers; one that
    compares documents (listwise) gets them all in one request to one server, uncached.
    """
    started = time.perf_counter()
    judgement = Judgement(scorer=settings.scorer)
    scorer = _scorer(host, settings)
    deadline = time.monotonic() + settings.timeout
    async with _client(host.model_session, settings.timeout) as client:
        endpoints = await _find_servers(scorer, settings, client, judgement, host)
        if endpoints is None:
            return judgement
        profile = _question(judgement, scorer, intent, instruction)
        # Every server may get any chunk: fit the one with the smallest context.
        narrowest = min(endpoints, key=lambda e: e.context_tokens or math.inf, default=None)
        asked, documents = prepare(narrowest, profile, judgement.notes)
        if decisive is not None and documents:
            _ask_nothing(judgement, settings, profile, asked, documents, decisive, noun,
                         unjudged)
        else:
            asked, documents = await _fit_to_tokens(client, narrowest, profile, asked,
                                                    documents, deadline, judgement)
            asking = _Asking(scorer, host.options_for(scorer.name), profile, endpoints,
                             query, asked, documents, deadline, client, noun, unjudged)
            pending = _from_cache(asking, judgement, settings, cache_dir)
            try:
                if pending.firsts:
                    outcome = await _ask(asking, pending, judgement, settings)
                    _record(asking, pending, outcome, judgement)
            finally:
                if pending.cache:
                    pending.cache.close()
            if pending.cache and pending.cache.warning:
                judgement.warnings.append(pending.cache.warning)
    judgement.model_ms = (time.perf_counter() - started) * 1000
    return judgement


def _scorer(host: Host, settings: Settings) -> Scorer:
    """The scorer the ``scorer`` setting names; ConfigError naming the installed ones."""
    scorers = host.registry.scorers()
    if settings.scorer not in scorers:
        known = ", ".join(sorted(scorers)) or "none installed"
        raise ConfigError(f"{settings.origins.get('scorer', 'default')}: key 'scorer': "
                          f"unknown scorer {settings.scorer!r} (installed: {known}); "
                          "pip install slm-rerank-yesno")
    return scorers[settings.scorer]


async def _find_servers(scorer: Scorer, settings: Settings, client: ModelClient,
                        judgement: Judgement, host: Host) -> list[Endpoint] | None:
    """The servers a scorer that needs one is spread over (empty for one that needs none),
    and the profile, both recorded in ``judgement``, with a note naming the profile. None
    (and ``judgement.degraded``) when no server answers."""
    endpoints: list[Endpoint] = []
    if scorer.needs_endpoint:
        endpoints = await _connect(settings, client, judgement, host, host.model_session)
        if not endpoints:
            return None
        if judgement.profile is None:
            raise ConfigError("no model profile is installed; pip install slm-rerank-openai "
                              "(or the profile of your model family, e.g. slm-rerank-qwen)")
    else:
        judgement.profile = choose_profile(host.registry.profiles(), requested=settings.model)
    if judgement.profile is not None:
        judgement.notes.append(f"profile {judgement.profile.profile.name}: "
                               f"{judgement.profile.reason}; scorer {scorer.name}; "
                               f"{weight_text(judgement.profile.profile)}")
    return endpoints


def _question(judgement: Judgement, scorer: Scorer, intent: Intent | None,
              instruction: str | None) -> ModelProfile | None:
    """The profile the judge is asked through: the chosen one, with the question of the
    query's ``intent`` where it words one, or the caller's ``instruction`` (the review's
    judges) in its layout; ``judgement.profile`` and ``intent`` say which."""
    choice = judgement.profile
    if choice is None:
        return None
    profile = choice.profile
    if intent is not None:
        asking = profile.for_intent(intent.kind)
        if asking is not profile:
            profile = asking
            judgement.profile = ProfileChoice(asking, choice.reason)
            judgement.intent = intent
            judgement.notes.append(f"intent {intent.kind}: {intent.why}")
    if instruction is not None:
        # another question in the profile's layout; its prompt_version changes with it,
        # so the score cache keeps the two apart
        profile = dataclasses.replace(profile, instruction=instruction)
        judgement.profile = ProfileChoice(profile, choice.reason)
    return profile


def _ask_nothing(judgement: Judgement, settings: Settings, profile: ModelProfile | None,
                 asked: str, documents: Sequence[Document], decisive: str, noun: str,
                 unjudged: str) -> None:
    """Record that the cascade asked nothing (``decisive`` says why) and what that saved.

    Nothing is asked, not even the cache: one cached verdict would lift its chunk above
    the lexical first the cascade chose to keep."""
    prefix = profile.render_completion(asked, "") if profile else asked
    judgement.tokens = TokenUse(budget=Budget(settings.budget_tokens, settings.budget_seconds),
                                cascade=True, stopped=decisive, unjudged=len(documents),
                                saved=unjudged_tokens(prefix, documents))
    judgement.notes.append(f"0 of {len(documents)} {noun} were judged, {decisive}; "
                           f"all {len(documents)} (about {judgement.tokens.saved} prompt "
                           f"tokens) {unjudged}")


async def _fit_to_tokens(client: ModelClient, narrowest: Endpoint | None,
                         profile: ModelProfile | None, asked: str, documents: list[Document],
                         deadline: float, judgement: Judgement) -> tuple[str, list[Document]]:
    """The query and documents with every prompt within the narrowest server's context by
    its own count of their tokens (``prompt_fit.py``); what was cut goes to the notes."""
    if narrowest is None or not documents:
        return asked, documents
    from slm_rerank.model.prompt_fit import measured_within

    measured = await measured_within(client, narrowest, profile, asked, documents, deadline)
    judgement.notes.extend(measured.notes)
    if measured.shortened:
        judgement.shortened.extend(measured.notes)
    return measured.query, measured.documents


@dataclass(frozen=True)
class _Asking:
    """What one run asks, of whom: fixed once the documents are fitted."""

    scorer: Scorer
    #: the scorer's settings (``[plugins.NAME]``)
    options: dict[str, Any]
    profile: ModelProfile | None
    endpoints: list[Endpoint]
    #: the query as the user asked it (the cache key's), and as the prompts hold it (cut)
    query: str
    asked: str
    documents: list[Document]
    deadline: float
    client: ModelClient
    #: for the notes: what the documents are called, and what becomes of the unjudged
    noun: str
    unjudged: str

    @property
    def alone(self) -> bool:
        """Whether a verdict depends on its document alone (cacheable, spreadable)."""
        return self.scorer.per_document

    @property
    def prefix(self) -> str:
        """The prompt around a document: what every prompt of this query shares."""
        return self.profile.render_completion(self.asked, "") if self.profile else self.asked


@dataclass
class _Pending:
    """What the score cache left to ask: each distinct document once."""

    keys: dict[int, ScoreKey]
    #: identity (content hash, or the index for a scorer that compares) -> its documents
    todo: dict[str, list[int]]
    cache: ScoreCache | None

    @property
    def firsts(self) -> list[int]:
        """The document asked for each identity; its verdict is every copy's."""
        return [indices[0] for indices in self.todo.values()]

    def copies(self, asking: _Asking, first: int) -> list[int]:
        """Every document the verdict on ``first`` answers."""
        document = asking.documents[first]
        return self.todo[document.content_hash if asking.alone else str(first)]


def _from_cache(asking: _Asking, judgement: Judgement, settings: Settings,
                cache_dir: Path | None) -> _Pending:
    """The verdicts the score cache holds go into ``judgement``; the rest are pending.

    A verdict is cached under what it was made with: the model, the profile and its prompt
    version, the scorer and its settings, the query and the document's text."""
    endpoint = asking.endpoints[0] if asking.endpoints else None
    profile = asking.profile
    # A scorer's settings ([plugins.graded] max_grade, a localised instruction) change
    # its verdicts: they are part of what a cached verdict was made with.
    scorer_key = asking.scorer.name + (
        "@" + hashlib.sha256(json.dumps(asking.options, sort_keys=True, default=str).encode()
                             ).hexdigest()[:16] if asking.options else "")
    keys = {i: ScoreKey(endpoint.model_id or endpoint.base_url if endpoint else "-",
                        profile.name if profile else "-",
                        profile.prompt_version if profile else "-", scorer_key,
                        asking.query, d.content_hash)
            for i, d in enumerate(asking.documents)}
    cache = (ScoreCache(cache_dir) if asking.alone and cache_dir is not None and
             settings.score_cache else None)
    cached = cache.get_many(keys.values()) if cache else {}
    # Identical chunks (a vendored copy, a repeated block) are asked once.
    todo: dict[str, list[int]] = {}
    for i, doc in enumerate(asking.documents):
        hit = cached.get(keys[i].digest)
        if hit is not None:
            judgement.scores[i] = DocumentScore(i, hit.probability, hit.raw, note="cached")
            judgement.cache_hits += 1
        else:
            todo.setdefault(doc.content_hash if asking.alone else str(i), []).append(i)
    pending = _Pending(keys, todo, cache)
    judgement.sent = len(pending.firsts)
    return pending


async def _ask(asking: _Asking, pending: _Pending, judgement: Judgement,
               settings: Settings) -> ScoreOutcome:
    """The scorer's verdicts on the pending documents (by their position in ``firsts``),
    with a progress line; ``judgement.tokens`` gets what they cost, by document index."""
    firsts = pending.firsts
    endpoint = asking.endpoints[0] if asking.endpoints else None
    request = ScoreRequest(query=asking.asked, documents=[asking.documents[i] for i in firsts],
                           profile=asking.profile, endpoint=endpoint,
                           deadline=asking.deadline, options=asking.options,
                           client=asking.client)
    progress = Progress(len(firsts))
    try:
        outcome = await _score(asking.scorer, request, asking.endpoints, asking.alone,
                               settings, judgement.tokens, asking.prefix, progress)
    finally:
        progress.close()
    spent = judgement.tokens.per_document
    judgement.tokens.per_document = {firsts[j]: cost for j, cost in spent.items()}
    return outcome


def _record(asking: _Asking, pending: _Pending, outcome: ScoreOutcome,
            judgement: Judgement) -> None:
    """The scorer's verdicts into ``judgement`` (each copy of a document gets its verdict;
    the fresh ones go to the cache), with the notes, the warnings naming the documents the
    server would not judge, and the degraded text when the scorer stopped early."""
    firsts, documents, noun = pending.firsts, asking.documents, asking.noun
    judgement.uses = outcome.uses
    if judgement.tokens.stopped:
        judgement.notes.append(
            f"{len(outcome.scores)} of {len(firsts)} {noun} were judged: "
            f"{judgement.tokens.stopped}; the other {judgement.tokens.unjudged} "
            f"(about {judgement.tokens.saved} prompt tokens) {asking.unjudged}")
    judgement.notes.extend(outcome.notes)
    for j, why in outcome.skipped.items():
        for i in pending.copies(asking, firsts[j]):
            judgement.skipped[i] = why
    if judgement.skipped:
        judgement.warnings.append(_skipped_warning(judgement.skipped, documents, noun))
    if len(outcome.uses) > 1:
        judgement.notes.append("verdicts by endpoint: " + ", ".join(
            f"{u.url} {u.scored}" + (" (failed)" if u.failed else "") for u in outcome.uses))
    fresh = []
    for j, verdict in outcome.scores.items():
        first = firsts[j]
        for i in pending.copies(asking, first):
            judgement.scores[i] = DocumentScore(i, verdict.probability, verdict.raw,
                                                verdict.bounded, verdict.note)
        if verdict.bounded is None:
            fresh.append((pending.keys[first], verdict.probability, verdict.raw))
    if pending.cache:
        pending.cache.put_many(fresh)
    if outcome.stopped and len(judgement.scores) == len(documents):
        # every verdict came, and then the scorer said what went wrong (a listwise
        # window it could not use): the order is the model's, but not all of it
        judgement.degraded = f"{outcome.stopped}; all {len(documents)} {noun} have a verdict"
    elif outcome.stopped:
        judgement.degraded = (f"{outcome.stopped}; {len(judgement.scores)} of "
                              f"{len(documents)} {noun} were scored, the rest "
                              f"{asking.unjudged}")


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
