"""One review: retrieve as a search does, ask the model per chunk, gate every candidate.

The run has one deadline, ``--timeout`` (the ``timeout`` setting) as a total: retrieval's
model stage gets at most a third of it, generation what is left but a quarter kept for the
semantic gates, and they the rest. A stage that runs out keeps what it has: fewer chunks
asked, fewer findings judged (``SUPPORT_UNVERIFIED``), each said in ``degraded``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import slm_rerank
from slm_rerank.errors import ContractError, TransientError
from slm_rerank.plugin_kit import command_host, find_model_server, is_source_path
from slm_rerank_review import generation, judges
from slm_rerank_review.diff import GIT_SECONDS, Changes, changed_lines
from slm_rerank_review.findings import Candidate, Dropped, Finding, Reason
from slm_rerank_review.gates import deterministic_gates
from slm_rerank_review.generation import ShownChunk
from slm_rerank_review.hunks import DiffChunks, changed_chunks, kind_word, listed
from slm_rerank_review.reading import ChunkUnreadable, read_lines

#: share of the deadline the search's model stage may take
RETRIEVAL_SHARE = 1 / 3
#: share kept for the semantic gates while generation runs
JUDGES_SHARE = 1 / 4
#: chunks retrieved per chunk reviewed with --diff: most of a file's chunks are unchanged
DIFF_WIDENING = 4
#: chunks retrieved per chunk reviewed without it: some retrieved chunks are no code
CODE_WIDENING = 2
#: the query a review asks for when none is given
DEFAULT_QUERY = "find real defects"


@dataclass(frozen=True)
class ReviewRequest:
    """What to review and how (the CLI's flags; None: the settings decide)."""

    query: str
    root: Path
    paths: tuple[str, ...] = ()
    #: the query was the user's (with --diff it adds the chunks it retrieves first; without
    #: one, a diff review asks about the changed chunks in the diff's order)
    query_given: bool = True
    top: int = 5
    #: lexical retrieval only (no model stage in the search; generation still needs a server)
    fast: bool = False
    support: bool = True
    contradiction: bool = True
    #: review only the lines changed since ``rev`` (None: the uncommitted work)
    diff: bool = False
    rev: str | None = None
    base_url: str | None = None
    model: str | None = None
    timeout: float | None = None
    local: bool | None = None
    #: tokens each chunk's answer may take
    max_tokens: int = generation.MAX_TOKENS


@dataclass
class ReviewReport:
    """What a review found, what it dropped and why, and how it went."""

    query: str
    root: str
    findings: list[Finding] = field(default_factory=list)
    dropped: list[Dropped] = field(default_factory=list)
    #: the chunks the model was asked about, as path:start-end
    reviewed: list[str] = field(default_factory=list)
    #: why the review is less than was asked for (no server, a deadline, a failed judge)
    degraded: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    endpoint: str | None = None
    model_id: str | None = None
    profile: str | None = None
    #: what --diff compared, None without it
    diff: str | None = None
    #: findings that passed the gates but cite no changed line (not reported)
    outside_diff: int = 0
    #: files (--diff: changed; else: retrieved) left out as no code, each with its kind
    not_code: list[str] = field(default_factory=list)
    #: objects of the model's answers that were no usable finding
    malformed: int = 0
    elapsed_s: float = 0.0


def run_review(request: ReviewRequest) -> ReviewReport:
    """Review ``request.paths`` under ``request.root`` for ``request.query``.

    Raises the host's ``SlmRerankError`` subclasses for a permanent fault (a bad setting, a
    pinned URL that is no model server, --diff outside a git work tree); every transient
    one (no server, a timeout, a malformed answer, an unreadable file) gives fewer
    findings and says so in ``degraded``.
    """
    started = time.monotonic()
    flags: dict[str, Any] = {"base_url": request.base_url, "model": request.model,
                             "timeout": request.timeout, "local": request.local}
    # the judges ask on this host, without the user's cascade and budget; the retrieval's
    # search builds a host of its own and keeps them
    host = judges.judges_host(request.root, **flags)
    total = host.settings.timeout
    deadline = started + total
    out = ReviewReport(request.query, str(request.root))
    changes: Changes | None = None
    if request.diff:
        changes = changed_lines(request.root, request.rev,
                                timeout=max(min(total / 2, GIT_SECONDS), 0.1))
        out.diff = changes.described
        if not changes.paths:
            out.notes.append(f"--diff: no changed lines ({changes.described}): nothing to "
                             "review")
            return _done(out, started)
        chunks = _diff_chunks(request, flags, deadline, changes, out)
    else:
        chunks = _retrieve(request, flags, deadline, request.paths, None, out)
    if not chunks:
        return _done(out, started)
    judges_reserve = total * JUDGES_SHARE if request.support or request.contradiction else 0.0
    candidates = asyncio.run(_propose(host, request, chunks, deadline - judges_reserve, out))
    kept, chunk_texts = _gate(request.root, candidates, changes, out)
    _judge(host, request, kept, chunk_texts, deadline, out)
    return _done(out, started)


def _done(out: ReviewReport, started: float) -> ReviewReport:
    out.elapsed_s = time.monotonic() - started
    return out


def _diff_chunks(request: ReviewRequest, flags: dict[str, Any], deadline: float,
                 changes: Changes, out: ReviewReport) -> list[ShownChunk]:
    """The changed hunks' chunks (of the named paths' changed code files); those the
    user's query retrieves first, the rest in the diff's order; at most ``--top``."""
    found = changed_chunks(request.root, changes, request.paths)
    _say_left_out(found, changes, out)
    retrieved: list[ShownChunk] = []
    if request.query_given and found.chunks:
        # the search reads a relative path from the working directory: these are the root's
        paths = tuple(str(request.root / path) for path in found.code_files)
        retrieved = _retrieve(request, flags, deadline, paths, changes, out)
    merged = retrieved + [c for c in found.chunks if not any(
        c.path == r.path and c.start_line <= r.end_line and r.start_line <= c.end_line
        for r in retrieved)]
    if len(merged) > request.top:
        first = "those the query retrieves first, then " if retrieved else ""
        out.warnings.append(f"--diff: {len(merged)} chunks hold changed lines; the first "
                            f"{request.top} are reviewed ({first}in the diff's order); raise "
                            "--top to review them all")
    return merged[:request.top]


def _say_left_out(found: DiffChunks, changes: Changes, out: ReviewReport) -> None:
    """Notes (and warnings) on the changed files a diff review does not ask about."""
    out.not_code = found.not_code
    if found.not_code:
        out.notes.append(f"--diff: {len(found.not_code)} changed files are not code and are "
                         f"not reviewed: {listed(found.not_code)}")
    for why in found.unreadable:
        out.warnings.append(f"--diff: not reviewed: {why}")
    if found.not_named:
        out.notes.append(f"--diff: {found.not_named} changed files are outside the paths "
                         "given and are not reviewed")
    if not found.chunks:
        out.notes.append(f"--diff: no changed code to review ({changes.described})")


def _retrieve(request: ReviewRequest, flags: dict[str, Any], deadline: float,
              paths: tuple[str, ...], changes: Changes | None,
              out: ReviewReport) -> list[ShownChunk]:
    """The chunks to review: the search's best code chunks (with ``changes``: those holding
    a changed line), as they are on disk now."""
    # the search's model stage: its share of what is left of the deadline
    share = (deadline - time.monotonic()) * RETRIEVAL_SHARE
    search_host = command_host(request.root, **{**flags, "timeout": max(share, 0.1)})
    wanted = request.top * (DIFF_WIDENING if changes else CODE_WIDENING)
    report = slm_rerank.search(request.query, root=request.root, paths=list(paths),
                               top_k=wanted, fast=request.fast, host=search_host,
                               caller="review")
    out.warnings.extend(report.warnings)
    if report.degraded:
        out.degraded.append(f"retrieval: {report.degraded.reason}")
    chunks: list[ShownChunk] = []
    not_code: list[str] = []
    for citation in report.results:
        if changes and not changes.touches(citation.path, citation.start_line,
                                           citation.end_line):
            continue
        if not is_source_path(citation.path):
            shown = f"{citation.path} ({kind_word(citation.path)})"
            if shown not in not_code:
                not_code.append(shown)
            continue
        try:
            text = read_lines(request.root, citation.path, citation.start_line,
                              citation.end_line)
        except ChunkUnreadable as exc:
            out.warnings.append(f"not reviewed: {exc}")
            continue
        chunks.append(ShownChunk(citation.path, citation.start_line, citation.end_line, text,
                                 citation.symbol))
        if len(chunks) == request.top:
            break
    if not_code and not changes:
        out.not_code = not_code
        out.notes.append(f"{len(not_code)} retrieved files are not code and are not "
                         f"reviewed: {listed(not_code)}")
    if changes and not chunks:
        out.notes.append(f"--diff: the query retrieved none of the changed chunks "
                         f"({changes.described}); they are reviewed in the diff's order")
    return chunks


async def _propose(host: Any, request: ReviewRequest, chunks: list[ShownChunk],
                   deadline: float, out: ReviewReport) -> list[Candidate]:
    """Every chunk's candidates, asked together (the server's slots bound how many run)."""
    from slm_rerank.plugin_kit import ModelClient

    left = deadline - time.monotonic()
    if left <= 0:
        out.degraded.append("generation: the deadline passed during retrieval; no chunk was "
                            "asked (raise --timeout)")
        return []
    async with ModelClient(timeout=left) as client:
        try:
            server = await asyncio.wait_for(find_model_server(host, client), left)
        except asyncio.TimeoutError:
            server = None
        if server is None or server.endpoint is None:
            why = server.degraded if server else "finding a model server took the whole deadline"
            out.degraded.append(f"generation: {why}; no findings were proposed")
            return []
        out.endpoint, out.model_id = server.endpoint.base_url, server.endpoint.model_id
        out.profile = server.profile.name if server.profile else None
        out.notes.extend(server.notes)
        refused: list[str] = []  # why the server rejected the findings grammar, per chunk
        asked = [generation.generate(client, server.endpoint, server.profile, request.query,
                                     chunk, deadline, request.max_tokens, refused)
                 for chunk in chunks]
        answers = await asyncio.gather(*asked, return_exceptions=True)
    if refused:
        out.degraded.append(f"generation: the server rejected the findings grammar for "
                            f"{len(refused)} of {len(chunks)} chunks, which were asked again "
                            f"without it ({refused[0]}); a current llama.cpp takes it")
    candidates: list[Candidate] = []
    failed: list[str] = []
    for chunk, answer in zip(chunks, answers, strict=True):
        out.reviewed.append(f"{chunk.path}:{chunk.start_line}-{chunk.end_line}")
        if isinstance(answer, (TransientError, ContractError)):
            failed.append(f"{chunk.path}:{chunk.start_line}: {answer}")
            continue
        if isinstance(answer, BaseException):
            raise answer
        proposal = generation.parse_answer(answer, chunk)
        out.malformed += proposal.malformed
        candidates.extend(proposal.candidates)
    if failed:
        out.degraded.append(f"generation: {len(failed)} of {len(chunks)} chunks got no answer "
                            f"(first: {failed[0]})")
    if out.malformed:
        out.notes.append(f"{out.malformed} objects of the model's answers were no usable "
                         "finding and were left out")
    return candidates


def _gate(root: Path, candidates: list[Candidate], changes: Changes | None,
          out: ReviewReport) -> tuple[list[Finding], list[str]]:
    """The deterministic gates, against each chunk as it is on disk now."""
    kept: list[Finding] = []
    texts: list[str] = []
    for candidate in candidates:
        try:
            text = read_lines(root, candidate.path, candidate.start_line, candidate.end_line)
        except ChunkUnreadable as exc:
            out.dropped.append(Dropped(candidate, Reason.CHUNK_UNREADABLE, str(exc)))
            continue
        result = deterministic_gates(candidate, text)
        if isinstance(result, Dropped):
            out.dropped.append(result)
        elif changes and not changes.touches(candidate.path, result.span.start_line,
                                             result.span.end_line):
            out.outside_diff += 1
        else:
            kept.append(result)
            texts.append(text)
    if out.outside_diff:
        out.notes.append(f"--diff: {out.outside_diff} findings cite only unchanged lines and "
                         "are not reported")
    return kept, texts


def _judge(host: Any, request: ReviewRequest, kept: list[Finding], texts: list[str],
           deadline: float, out: ReviewReport) -> None:
    """Support, then the contradiction veto, on what the deterministic gates kept."""
    if request.support and kept:
        verdicts = judges.judge(host, [judges.judged_text(f, t) for f, t in zip(
            kept, texts, strict=True)], instruction=judges.SUPPORT_INSTRUCTION,
            query=judges.SUPPORT_QUERY, deadline=deadline)
        kept, texts = _apply(kept, texts, verdicts, "support", out)
    if request.contradiction and kept:
        verdicts = judges.judge(host, [judges.judged_text(f, t) for f, t in zip(
            kept, texts, strict=True)], instruction=judges.CONTRADICTION_INSTRUCTION,
            query=judges.CONTRADICTION_QUERY, deadline=deadline)
        kept, texts = _apply(kept, texts, verdicts, "contradiction", out)
    out.findings.extend(kept)


def _apply(kept: list[Finding], texts: list[str], verdicts: judges.Verdicts, gate: str,
           out: ReviewReport) -> tuple[list[Finding], list[str]]:
    if verdicts.failure:
        out.degraded.append(f"{gate} judge: {verdicts.failure}")
    passed: list[Finding] = []
    passed_texts: list[str] = []
    for finding, text, probability in zip(kept, texts, verdicts.probabilities, strict=True):
        scores = dataclasses.replace(finding.scores, **{gate: probability})
        finding = dataclasses.replace(finding, scores=scores)
        if probability is None:
            out.dropped.append(Dropped(finding.candidate, Reason.SUPPORT_UNVERIFIED,
                                       f"the {gate} judge gave no verdict: "
                                       f"{verdicts.failure or 'no answer'}", scores))
        elif gate == "support" and probability <= judges.SUPPORT_MIN:
            out.dropped.append(Dropped(finding.candidate, Reason.CLAIM_NOT_SUPPORTED,
                                       f"the support judge's P(supported) is "
                                       f"{probability:.2f}, not above {judges.SUPPORT_MIN}",
                                       scores))
        elif gate == "contradiction" and probability >= judges.CONTRADICTION_VETO:
            out.dropped.append(Dropped(finding.candidate, Reason.CLAIM_NOT_SUPPORTED,
                                       f"vetoed: the contradiction judge's P(contradicted) "
                                       f"is {probability:.2f}", scores))
        else:
            passed.append(finding)
            passed_texts.append(text)
    return passed, passed_texts
