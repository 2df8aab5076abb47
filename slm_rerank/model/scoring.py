"""Running a scorer: collect its verdicts as they stream in, stop at the deadline.

A scorer is an async iterator (``Scorer.score``). ``collect`` is the one place that drives
it: it checks every verdict against the request, keeps what arrived before a deadline or a
transient fault, and lets a contract violation through. ``score_sync`` is the thin
synchronous wrapper for callers without an event loop.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from slm_rerank.errors import ContractError, TransientError
from slm_rerank.registrations import DocumentScore, Scorer, ScoreRequest


@dataclass
class ScoreOutcome:
    """The verdicts one scorer returned, by document index, and why it stopped early."""

    scores: dict[int, DocumentScore] = field(default_factory=dict)
    #: None when every document was judged; else why not (a deadline, a transient fault)
    stopped: str | None = None


def _check(scorer: Scorer, request: ScoreRequest, verdict: object,
           seen: dict[int, DocumentScore]) -> DocumentScore:
    who = f"scorer '{scorer.name}'"
    if not isinstance(verdict, DocumentScore):
        raise ContractError(f"{who} yielded a {type(verdict).__name__}, not a DocumentScore")
    if not 0 <= verdict.index < len(request.documents):
        raise ContractError(f"{who} scored document {verdict.index}, but only "
                            f"{len(request.documents)} were sent")
    if verdict.index in seen:
        raise ContractError(f"{who} scored document {verdict.index} twice")
    p = verdict.probability
    if not (isinstance(p, (int, float)) and math.isfinite(p) and 0.0 <= p <= 1.0):
        raise ContractError(f"{who} gave document {verdict.index} the probability {p!r}; "
                            "a probability is a finite number in [0, 1]")
    return verdict


async def collect(scorer: Scorer, request: ScoreRequest,
                  on_verdict: Callable[[DocumentScore], None] | None = None) -> ScoreOutcome:
    """Every verdict ``scorer`` gives before ``request.deadline``.

    ``on_verdict`` is called with each verdict as it arrives (a progress display, a stream).

    A ``TransientError`` or the deadline ends the run with what was scored so far and a
    reason in ``stopped``; a ``ContractError`` (from the scorer, or a verdict that breaks
    the contract) propagates.
    """
    outcome = ScoreOutcome()
    stream = scorer.score(request).__aiter__()
    try:
        while True:
            remaining = None
            if request.deadline is not None:
                remaining = request.deadline - time.monotonic()
                if remaining <= 0:
                    raise asyncio.TimeoutError
            try:
                verdict = await asyncio.wait_for(stream.__anext__(), remaining)
            except StopAsyncIteration:
                break
            checked = _check(scorer, request, verdict, outcome.scores)
            outcome.scores[checked.index] = checked
            if on_verdict is not None:
                on_verdict(checked)
    except asyncio.TimeoutError:
        outcome.stopped = (f"the deadline passed after {len(outcome.scores)} of "
                           f"{len(request.documents)} documents were scored")
    except TransientError as exc:
        outcome.stopped = str(exc)
    finally:
        closer = getattr(stream, "aclose", None)
        if closer is not None:
            try:
                await closer()
            except Exception:  # a generator torn down mid-request: nothing left to keep
                pass
    if outcome.stopped is None and len(outcome.scores) < len(request.documents):
        missing = len(request.documents) - len(outcome.scores)
        outcome.stopped = f"scorer '{scorer.name}' returned no verdict for {missing} documents"
    return outcome


def score_sync(scorer: Scorer, request: ScoreRequest) -> ScoreOutcome:
    """``collect`` for callers without an event loop (the CLI, scripts)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(collect(scorer, request))
    raise RuntimeError("score_sync() was called inside a running event loop; "
                       "await slm_rerank.model.scoring.collect(...) instead")
