"""Asking the scorer about a run's documents: the score cache first, then the scorer, at
once or in rounds, and its verdicts, notes and warnings recorded in the ``Judgement``.

Steps 6 to 8 of ``stage.judge_documents_async``: ``from_cache`` (the verdicts the cache
holds, and each distinct document still to ask once), ``ask`` (the scorer's verdicts on
those, through ``run_scorer``: all at once, or in rounds when a budget or the cascade may
stop early, ``judge_budget.py``) and ``record``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from slm_rerank import digests
from slm_rerank.config import Settings
from slm_rerank.errors import ContractError, TransientError
from slm_rerank.model.judge_budget import Budget, TokenUse, count_verdict, judge_in_rounds
from slm_rerank.model.judgement import Judgement
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


@dataclass(frozen=True)
class Asking:
    """What one run asks, of whom: fixed once the documents are fitted (``stage``)."""

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
class Pending:
    """What the score cache left to ask: each distinct document once."""

    keys: dict[int, ScoreKey]
    #: identity (content hash, or the index for a scorer that compares) -> its documents
    todo: dict[str, list[int]]
    cache: ScoreCache | None

    @property
    def firsts(self) -> list[int]:
        """The document asked for each identity; its verdict is every copy's."""
        return [indices[0] for indices in self.todo.values()]

    def copies(self, asking: Asking, first: int) -> list[int]:
        """Every document the verdict on ``first`` answers."""
        document = asking.documents[first]
        return self.todo[document.content_hash if asking.alone else str(first)]


def from_cache(asking: Asking, judgement: Judgement, settings: Settings,
                cache_dir: Path | None) -> Pending:
    """The verdicts the score cache holds go into ``judgement``; the rest are pending.

    A verdict is cached under what it was made with: the model, the profile and its prompt
    version, the scorer and its settings, the query and the document's text."""
    endpoint = asking.endpoints[0] if asking.endpoints else None
    profile = asking.profile
    # A scorer's settings ([plugins.graded] max_grade, a localised instruction) change
    # its verdicts: they are part of what a cached verdict was made with.
    scorer_key = asking.scorer.name + (
        "@" + digests.sha256(json.dumps(asking.options, sort_keys=True, default=str).encode()
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
    pending = Pending(keys, todo, cache)
    judgement.sent = len(pending.firsts)
    return pending


async def ask(asking: Asking, pending: Pending, judgement: Judgement,
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
        outcome = await run_scorer(asking.scorer, request, asking.endpoints, asking.alone,
                               settings, judgement.tokens, asking.prefix, progress)
    finally:
        progress.close()
    spent = judgement.tokens.per_document
    judgement.tokens.per_document = {firsts[j]: cost for j, cost in spent.items()}
    return outcome


def record(asking: Asking, pending: Pending, outcome: ScoreOutcome,
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
        judgement.warnings.append(skipped_warning(judgement.skipped, documents, noun))
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


async def run_scorer(scorer: Scorer, request: ScoreRequest, endpoints: Sequence[Endpoint],
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
    prefix_tokens = await count_prefix_tokens(request, prefix, budget, min(deadline, ends))
    outcome = await judge_in_rounds(run, request.documents, range(len(request.documents)),
                                    prefix_chars, slots, budget, settings.cascade, tokens,
                                    merge, prefix_tokens, deadline, started)
    outcome.uses = list(uses.values())
    return outcome


async def count_prefix_tokens(request: ScoreRequest, prefix: str, budget: Budget,
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


def skipped_warning(skipped: dict[int, str], documents: Sequence[Document], noun: str) -> str:
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
