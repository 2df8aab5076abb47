"""The model stage of one query: find a server, pick a profile and scorer, judge the head.

The servers are chosen by ``endpoints.py``, the text each prompt holds by ``passages.py``
and ``prompt_fit.py``; this module runs the steps of a judge run in order
(``judge_documents_async``), and ``asking.py`` asks the scorer. ``judge`` takes plain chunks
(``Passage``: path, lines, symbol, text) and returns a ``Judgement``: the
model's verdicts by chunk index, and everything the report says about how they were
obtained. A transient fault becomes ``Judgement.degraded`` with whatever was already
scored; a permanent one (unknown profile, a bad URL, an answer we cannot parse) raises.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import math
import time
from collections.abc import AsyncIterator, Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from slm_rerank.config import Settings
from slm_rerank.errors import ConfigError, TransientError
from slm_rerank.host import Host
from slm_rerank.model.asking import Asking, ask, from_cache, record
from slm_rerank.model.endpoints import choose_endpoints
from slm_rerank.model.intent import Intent
from slm_rerank.model.judge_budget import Budget, TokenUse, unjudged_tokens
from slm_rerank.model.judgement import Judgement
from slm_rerank.model.passages import Passage, fit_context
from slm_rerank.model.profiles import ProfileChoice, choose_profile, weight_text
from slm_rerank.registrations import Document, Endpoint, ModelProfile, Scorer

if TYPE_CHECKING:
    from slm_rerank.model.client import ModelClient
    from slm_rerank.model.session import ModelSession


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
#: Given the model ids of the servers found, why their judge is not asked here (None: ask).
Declined = Callable[[list[str | None]], str | None]


async def judge_async(query: str, passages: Sequence[Passage], host: Host, settings: Settings,
                      cache_dir: Path | None, intent: Intent | None = None,
                      decisive: str | None = None,
                      declined: Declined | None = None) -> Judgement:
    """Judge code chunks: each is shown with its ``File: path:lines`` line, cut to fit,
    with the question of the query's ``intent`` where the profile words one.

    ``decisive`` is why the cascade asks nothing (``cascade.asks_nothing``): the
    server and profile are found, and no chunk is sent. ``declined`` says, once the
    servers' model ids are known, why their judge is not asked here at all (what
    ``calibrate --write`` measured on the repository, ``repository_judge.py``).
    """
    def prepare(narrowest: Endpoint | None, profile: ModelProfile | None,
                notes: list[str]) -> tuple[str, list[Document]]:
        asked, fitted = fit_context(query, passages, narrowest, profile, notes)
        return asked, [p.document(i) for i, p in enumerate(fitted)]

    return await judge_documents_async(query, prepare, host, settings, cache_dir,
                                       intent=intent, decisive=decisive,
                                       declined=declined)


async def judge_documents_async(query: str, prepare: Prepare, host: Host, settings: Settings,
                                cache_dir: Path | None, noun: str = "chunks",
                                unjudged: str = "keep their lexical order",
                                intent: Intent | None = None,
                                instruction: str | None = None,
                                decisive: str | None = None,
                                declined: Declined | None = None) -> Judgement:
    """Find the server, choose profile and scorer, and judge what ``prepare`` gives.

    The steps, in order, each a function below:

    1. ``_scorer``: the scorer the settings name;
    2. ``_find_servers``: the servers (``endpoints.py``) and the profile;
    3. ``_question``: the profile's question for the query's intent, or the caller's;
    4. ``prepare`` and ``_fit_to_tokens``: the documents, cut to the narrowest server's
       context by characters and then by the server's count of their tokens;
    5. ``_ask_nothing``: the cascade found the lexical order decisive (``decisive``,
       ``cascade.py``), or the repository's measurement declines the servers' judge
       (``declined``), so nothing is asked;
    6. ``asking.from_cache``: the verdicts the score cache holds, and the documents still
       to ask (identical documents once);
    7. ``asking.ask``: the scorer's verdicts on those, at once or in rounds;
    8. ``asking.record``: the verdicts, the notes, the warnings and the degraded text.

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
        profile = _question(judgement, intent, instruction)
        # Every server may get any chunk: fit the one with the smallest context.
        narrowest = min(endpoints, key=lambda e: e.context_tokens or math.inf, default=None)
        asked, documents = prepare(narrowest, profile, judgement.notes)
        refused = declined([e.model_id for e in endpoints]) if declined else None
        if (decisive is not None or refused is not None) and documents:
            _ask_nothing(judgement, settings, profile, asked, documents,
                         decisive or refused or "", noun, unjudged)
        else:
            asked, documents = await _fit_to_tokens(client, narrowest, profile, asked,
                                                    documents, deadline, judgement)
            asking = Asking(scorer, host.options_for(scorer.name), profile, endpoints,
                            query, asked, documents, deadline, client, noun, unjudged)
            pending = from_cache(asking, judgement, settings, cache_dir)
            try:
                if pending.firsts:
                    outcome = await ask(asking, pending, judgement, settings)
                    record(asking, pending, outcome, judgement)
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


def _question(judgement: Judgement, intent: Intent | None, instruction: str | None
              ) -> ModelProfile | None:
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
    """Record that nothing was asked (``decisive`` says why: the cascade's rule, or the
    repository's measurement of the judge) and what that saved.

    Nothing is asked, not even the cache: one cached verdict would lift its chunk above
    the lexical first the cascade chose to keep."""
    prefix = profile.render_completion(asked, "") if profile else asked
    judgement.tokens = TokenUse(budget=Budget(settings.budget_tokens, settings.budget_seconds),
                                cascade=settings.cascade, stopped=decisive, unjudged=len(documents),
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


def judge(query: str, passages: Sequence[Passage], host: Host, settings: Settings,
          cache_dir: Path | None, intent: Intent | None = None,
          decisive: str | None = None, declined: Declined | None = None) -> Judgement:
    """``judge_async`` for callers without an event loop; a transient fault degrades.

    On the host's model session when it has one (warm client, known endpoint), else in a
    loop of its own.
    """
    session = host.model_session
    coroutine = judge_async(query, passages, host, settings, cache_dir, intent, decisive,
                            declined)
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
