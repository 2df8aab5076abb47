"""Running a scorer: collect its verdicts as they stream in, stop at the deadline.

A scorer is an async iterator (``Scorer.score``). ``collect`` is the one place that drives
it: it checks every verdict against the request, keeps what arrived before a deadline or a
transient fault, and lets a contract violation through. ``spread`` runs one request over
several servers of one model: a shared queue of documents, least-loaded server first, and
a server that fails hands its unfinished documents to the others. ``score_sync`` is the
thin synchronous wrapper for callers without an event loop.

A server that refuses one prompt as longer than its context (HTTP 400 from llama.cpp,
vLLM, llama-cpp-python) must not cost the whole query: ``collect`` asks again for each
document of the refused batch alone, and the one that is refused alone is ``skipped``
with the server's reason, while the others are judged.
"""

from __future__ import annotations

import asyncio
import dataclasses
import math
import re
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from slm_rerank.errors import ContractError, TransientError
from slm_rerank.event_loop import refuse_running_loop
from slm_rerank.registrations import DocumentScore, Endpoint, Scorer, ScoreRequest


@dataclass
class ScoreOutcome:
    """The verdicts one scorer returned, by document index, and why it stopped early."""

    scores: dict[int, DocumentScore] = field(default_factory=dict)
    #: None when every document was judged; else why not (a deadline, a transient fault)
    stopped: str | None = None
    #: what stopped it: "deadline", "transient" (the server failed) or "incomplete" (the
    #: scorer ended without judging every document); None when nothing did
    fault: str | None = None
    #: how each server was used, in the order given (``spread``; empty for ``collect``)
    uses: list[EndpointUse] = field(default_factory=list)
    #: what a person should know about the run (a server that failed and was left out)
    notes: list[str] = field(default_factory=list)
    #: documents the server refused to judge because their prompt is longer than its
    #: context, by index, with the server's reason (they have no verdict)
    skipped: dict[int, str] = field(default_factory=dict)


@dataclass
class EndpointUse:
    """One server's share of a ``spread`` run."""

    url: str
    slots: int
    #: verdicts it gave
    scored: int = 0
    #: why it was left out mid-run (a transient fault), or None
    failed: str | None = None


#: How servers word "this prompt is longer than a request may be", as our client passes
#: their message on: llama.cpp ("request (2377 tokens) exceeds the available context size
#: (512 tokens)", type exceed_context_size_error; older builds "input is larger than the
#: max context size"), vLLM ("This model's maximum context length is ...", "... is longer
#: than the maximum model length ...", "... is too long and exceeds limit of ..."),
#: llama-cpp-python ("Requested tokens (N) exceed context window of M"). Only the text
#: tells this refusal from others, so only these wordings count.
_OVER_CONTEXT = re.compile(
    r"exceeds? the available context size|exceed_context_size|larger than the max context "
    r"size|maximum context length is|longer than the maximum model length|too long and "
    r"exceeds limit|exceeds? (the )?context window|exceeds the context length", re.IGNORECASE)


def over_context(exc: BaseException) -> bool:
    """Whether ``exc`` is a server refusing a prompt as longer than its context."""
    return isinstance(exc, ContractError) and bool(_OVER_CONTEXT.search(str(exc)))


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
    refused: ContractError | None = None
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
        outcome.fault = "deadline"
    except TransientError as exc:
        outcome.stopped = str(exc)
        outcome.fault = "transient"
    except ContractError as exc:
        if not over_context(exc):
            raise
        refused = exc
    finally:
        closer = getattr(stream, "aclose", None)
        if closer is not None:
            try:
                await closer()
            except Exception:  # a generator torn down mid-request: nothing left to keep
                pass
    if refused is not None:
        await _one_by_one(scorer, request, outcome, refused, on_verdict)
    missing = len(request.documents) - len(outcome.scores) - len(outcome.skipped)
    if outcome.stopped is None and missing > 0:
        outcome.stopped = f"scorer '{scorer.name}' returned no verdict for {missing} documents"
        outcome.fault = "incomplete"
    return outcome


async def _one_by_one(scorer: Scorer, request: ScoreRequest, outcome: ScoreOutcome,
                      refused: ContractError,
                      on_verdict: Callable[[DocumentScore], None] | None) -> None:
    """After the server refused a prompt of ``request`` as too long: the documents without
    a verdict, each asked alone; one refused alone is skipped with the server's reason.

    Only a scorer that judges documents one by one can be asked so; one that compares them
    (listwise) stops, and the caller reports why.
    """
    left = [i for i in range(len(request.documents)) if i not in outcome.scores]
    reason = f"the model server refused its prompt as longer than its context ({refused})"
    if len(request.documents) == 1:
        outcome.skipped.update({i: reason for i in left})
        return
    if not scorer.per_document:
        outcome.stopped = f"scorer '{scorer.name}': {reason}"
        outcome.fault = "too-long"
        return
    from slm_rerank.model.client import gather_all

    parts = await gather_all([
        collect(scorer, dataclasses.replace(request, documents=[request.documents[i]]),
                _renumber([i], on_verdict)) for i in left])
    for i, part in zip(left, parts, strict=True):
        for verdict in part.scores.values():
            outcome.scores[i] = dataclasses.replace(verdict, index=i)
        if part.skipped:
            outcome.skipped[i] = part.skipped[0]
        if part.stopped and outcome.stopped is None:
            outcome.stopped, outcome.fault = part.stopped, part.fault


@dataclass
class _Server:
    """A server's state during ``spread``."""

    endpoint: Endpoint
    order: int
    use: EndpointUse
    in_flight: int = 0
    #: seconds per verdict of its last answered batch (inf until it has answered)
    pace: float = math.inf

    @property
    def free(self) -> int:
        return 0 if self.use.failed else self.endpoint.slots - self.in_flight


async def spread(scorer: Scorer, request: ScoreRequest, endpoints: Sequence[Endpoint],
                 on_verdict: Callable[[DocumentScore], None] | None = None) -> ScoreOutcome:
    """Every verdict ``scorer`` gives for ``request``, its documents spread over ``endpoints``.

    The endpoints serve one model, so any of them may judge any document. Documents wait in
    one queue, in order; the next batch goes to the server with the most free slots (ties:
    the one that answered fastest last, then the order given) and is at most its free
    slots and its fair share of the queue, so no server has more documents in flight than
    its slots. A server that fails with a ``TransientError`` takes no more; its unjudged
    documents go back to the front of the queue for the others, and a note says so. Only
    when every server has failed does the run stop early (``stopped``, as ``collect``).
    The deadline stops everything; a ``ContractError`` propagates, as from ``collect``.
    """
    outcome = ScoreOutcome()
    servers = [_Server(e, i, EndpointUse(e.base_url, e.slots)) for i, e in enumerate(endpoints)]
    outcome.uses = [s.use for s in servers]
    queue: deque[int] = deque(range(len(request.documents)))
    running: dict[asyncio.Task[ScoreOutcome], tuple[_Server, list[int], float]] = {}
    halted: list[str] = []  # the deadline passed: dispatch no more
    unanswered = 0  # documents a scorer ended without judging (not the server's fault)

    def dispatch() -> None:
        while queue and not halted:
            ready = [s for s in servers if s.free > 0]
            if not ready:
                return
            server = min(ready, key=lambda s: (-s.free, s.pace, s.order))
            share = -(-len(queue) // len(ready))  # ceil: split a short queue between servers
            batch = [queue.popleft() for _ in range(min(server.free, share))]
            sub = dataclasses.replace(request, endpoint=server.endpoint,
                                      documents=[request.documents[i] for i in batch])
            task = asyncio.ensure_future(collect(scorer, sub, _renumber(batch, on_verdict)))
            server.in_flight += len(batch)
            running[task] = (server, batch, time.monotonic())

    try:
        dispatch()
        while running:
            done, _ = await asyncio.wait(running, return_when=asyncio.FIRST_COMPLETED)
            for task in done:
                server, batch, started = running.pop(task)
                server.in_flight -= len(batch)
                part = task.result()  # a ContractError leaves here, the rest is cancelled
                for j, verdict in part.scores.items():
                    outcome.scores[batch[j]] = dataclasses.replace(verdict, index=batch[j])
                outcome.skipped.update({batch[j]: why for j, why in part.skipped.items()})
                server.use.scored += len(part.scores)
                if part.scores:
                    server.pace = (time.monotonic() - started) / len(part.scores)
                if part.fault == "transient":
                    queue.extendleft(reversed([i for j, i in enumerate(batch)
                                               if j not in part.scores]))
                    _fail(server, servers, part.stopped or "failed", outcome)
                elif part.fault == "deadline":
                    halted.append(part.fault)
                elif part.fault == "incomplete":
                    unanswered += len(batch) - len(part.scores) - len(part.skipped)
            dispatch()
    finally:
        for task in running:
            task.cancel()
        await asyncio.gather(*running, return_exceptions=True)
    total = len(request.documents)
    if "deadline" in halted:
        outcome.stopped = (f"the deadline passed after {len(outcome.scores)} of {total} "
                           "documents were scored")
        outcome.fault = "deadline"
    elif queue and all(s.use.failed for s in servers):
        failed = [s.use for s in servers]
        outcome.stopped = failed[0].failed if len(failed) == 1 else (
            f"all {len(failed)} model servers failed: " + "; ".join(
                f"{u.url} after {u.scored} verdicts: {u.failed}" for u in failed))
        outcome.fault = "transient"
    elif unanswered:
        outcome.stopped = (f"scorer '{scorer.name}' returned no verdict for {unanswered} "
                           "documents")
        outcome.fault = "incomplete"
    return outcome


def _fail(server: _Server, servers: Sequence[_Server], reason: str,
          outcome: ScoreOutcome) -> None:
    if server.use.failed:
        return  # a second batch of the same server failing says nothing new
    server.use.failed = reason
    others = [s.endpoint.base_url for s in servers if not s.use.failed]
    if others:
        outcome.notes.append(f"endpoint {server.endpoint.base_url} failed after "
                             f"{server.use.scored} verdicts ({reason}); carried on with "
                             f"{', '.join(others)}")


def _renumber(batch: list[int], on_verdict: Callable[[DocumentScore], None] | None
              ) -> Callable[[DocumentScore], None] | None:
    """``on_verdict`` for one batch: its verdicts carry their index in the whole request."""
    if on_verdict is None:
        return None
    return lambda verdict: on_verdict(dataclasses.replace(verdict, index=batch[verdict.index]))


def score_sync(scorer: Scorer, request: ScoreRequest) -> ScoreOutcome:
    """``collect`` for callers without an event loop (the CLI, scripts)."""
    refuse_running_loop("score_sync()",
                        "await slm_rerank.model.scoring.collect(...) instead")
    return asyncio.run(collect(scorer, request))
