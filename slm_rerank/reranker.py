"""The Python API of the model stage: rerank candidates you already have.

    import slm_rerank

    report = slm_rerank.search("where are retries configured", root="~/src/app")
    reranker = slm_rerank.Reranker(base_url="http://127.0.0.1:8080")
    for hit in reranker.rerank_sync("where are retries configured", candidates=report):
        print(hit.location, hit.score, hit.model_score)

``rerank`` is a coroutine (for MCP servers, web services and RAG pipelines that already run
an event loop); ``rerank_sync`` is its twin for scripts.
"""

from __future__ import annotations

import asyncio
import math
import numbers
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from slm_rerank.cache_folder import cache_path, usable_folder
from slm_rerank.config import Settings, shown
from slm_rerank.documents import check_list
from slm_rerank.event_loop import refuse_running_loop
from slm_rerank.host import Host
from slm_rerank.lexical.chunking import split_lines
from slm_rerank.lexical.filetypes import path_kind
from slm_rerank.lexical.reading import read_regular
from slm_rerank.lexical.scores import kind_prior
from slm_rerank.lexical.terms import extract
from slm_rerank.model.fusion import JudgeWeight, apply_verdicts
from slm_rerank.model.intent import query_intent
from slm_rerank.model.passages import Passage, cut_lines
from slm_rerank.model.stage import Judgement, judge_async
from slm_rerank.overrides import overrides
from slm_rerank.report import Citation, Report


@dataclass(frozen=True)
class Candidate:
    """One place to judge: a file's line range and its text."""

    path: str
    start_line: int
    end_line: int
    text: str
    symbol: str | None = None
    #: the evidence that made it a candidate (any scale: it is standardised)
    lexical_score: float = 0.0


@dataclass(frozen=True)
class Reranked:
    """A candidate after reranking: the fused score, and the model's own beside it."""

    path: str
    start_line: int
    end_line: int
    symbol: str | None
    #: P(relevant) after fusing the model's verdict with the lexical evidence
    score: float
    #: the model's own P(relevant); None when it gave no verdict (see ``RerankResult``)
    model_score: float | None
    lexical_score: float

    @property
    def location(self) -> str:
        return f"{self.path}:{self.start_line}-{self.end_line}"


@dataclass
class RerankResult:
    """Reranked candidates, best first, and how the model stage ran."""

    results: list[Reranked]
    judgement: Judgement
    #: the weight the verdicts were fused by and where it came from: the user's measured
    #: ``judge_weights`` for the model, else the profile's (as in a search)
    weight: JudgeWeight | None = None

    @property
    def degraded(self) -> str | None:
        """Why some candidates kept their lexical order (a server fault), else None."""
        return self.judgement.degraded

    @property
    def warnings(self) -> list[str]:
        """What went wrong without costing the verdicts (an unwritable cache), one line each."""
        return self.judgement.warnings

    def __iter__(self):  # type: ignore[no-untyped-def]
        return iter(self.results)

    def __len__(self) -> int:
        return len(self.results)


class Reranker:
    """A model judge with its settings, reusable across queries.

    Settings come from the usual layers (user config, ``.slm-rerank.toml`` of the current
    directory, environment); the arguments override them. A server that fails degrades the
    result (``RerankResult.degraded``); a wrong setting or an answer that cannot be parsed
    raises ``slm_rerank.errors.SlmRerankError``.
    """

    def __init__(self, model: str | None = None, base_url: str | None = None, *,
                 host: str | None = None, scorer: str | None = None,
                 threshold: float | None = None, timeout: float | None = None,
                 cache: bool | None = None, plugin_host: Host | None = None) -> None:
        given = overrides(model=model, base_url=base_url, host=host, scorer=scorer,
                          threshold=threshold, timeout=timeout, cache=cache)
        base = plugin_host or Host.from_environment(start=Path.cwd())
        #: the host every call asks with: ``plugin_host``'s (or the settings layers'), with
        #: the arguments on top
        self.host = base.with_overrides("Reranker({key}=...)", **given)
        self.host.validate()

    @property
    def settings(self) -> Settings:
        """The settings every call judges with: the layers, with the arguments on top."""
        return self.host.settings

    async def rerank(self, query: str, candidates: Report | Sequence[Candidate | Citation],
                     *, threshold: float | None = None, top_k: int | None = None
                     ) -> RerankResult:
        """Judge every candidate and return them by fused score.

        ``candidates`` is a ``Report`` from ``slm_rerank.search`` (its files are read from
        its root), ``Citation``s (paths relative to the cwd or absolute) or ``Candidate``s
        with their text. A Report or Citations are code: the query's intent and the
        file-kind prior apply as in a search. ``threshold`` (the judge's P(relevant)) drops
        the judged candidates below it, unless the run degraded (a server fault); the
        unjudged keep their given order below the judged ones, as a search keeps them.

        Raises ``TypeError`` for candidates that are not a list of ``Candidate`` or
        ``Citation`` (or a ``Report``), ``ValueError`` for an empty query, a ``top_k``
        below 1 or a ``lexical_score`` that is not a finite number (NaN, infinity): all
        before the model server is asked.
        """
        if not isinstance(query, str) or not query.strip():
            raise ValueError("query must be a non-empty string")
        if top_k is not None and (isinstance(top_k, bool) or not isinstance(top_k, int)
                                  or top_k < 1):
            raise ValueError(f"top_k must be a positive integer, not {top_k!r}")
        settings = self.host.with_overrides("rerank({key}=...)", threshold=threshold).settings
        # Citations (a search's results) are code: the judge gets the question of the
        # query's intent and fusion the file-kind prior, as in the search; Candidates may
        # be any text (a RAG pipeline's documents), judged by the profile's one question.
        items = _as_candidates(candidates, settings.max_file_bytes)
        code = isinstance(candidates, Report) or (
            bool(items) and all(isinstance(c, Citation) for c in candidates))
        folder = usable_folder(cache_path(settings)) if settings.score_cache else None
        cache_dir = folder.path if folder else None
        # A long candidate is cut around the lines with the query's search terms, as in a
        # search: every word of the query, tried on every line, took minutes for a pasted log.
        terms = extract(query)
        literals = terms.literals()
        passages = [Passage(c.path, c.start_line, c.end_line, c.symbol,
                            *cut_lines(c.text.splitlines(), literals, settings.prompt_chars),
                            kind=path_kind(c.path) if code else None)
                    for c in items]
        judgement = await judge_async(query, passages, self.host, settings, cache_dir,
                                      query_intent(query, terms) if code else None)
        if folder and folder.warning:
            judgement.warnings.insert(0, folder.warning)
        limit = settings.threshold
        # the same weight, fusion and threshold as a search (fusion.apply_verdicts): the
        # weight measured for this model (calibrate --write), else the profile's
        verdicts = apply_verdicts([c.lexical_score for c in items], judgement, settings,
                                  threshold=limit, query=query,
                                  lengths={i: len(p.code) for i, p in enumerate(passages)},
                                  priors={i: kind_prior(c.path, terms)
                                          for i, c in enumerate(items)} if code else None)
        if judgement.scores:
            judgement.notes.append(verdicts.weight.note)
        results = []
        for f in verdicts.kept:
            c = items[f.index]
            results.append(Reranked(c.path, c.start_line, c.end_line, c.symbol, f.score,
                                    f.model, c.lexical_score))
        return RerankResult(results[:top_k] if top_k else results, judgement,
                            verdicts.weight)

    def rerank_sync(self, query: str, candidates: Report | Sequence[Candidate | Citation],
                    *, threshold: float | None = None, top_k: int | None = None
                    ) -> RerankResult:
        """``rerank`` for callers without an event loop."""
        refuse_running_loop("Reranker.rerank_sync()", "use `await reranker.rerank(...)` there")
        return asyncio.run(self.rerank(query, candidates, threshold=threshold, top_k=top_k))


def _as_candidates(candidates: Report | Sequence[Candidate | Citation], limit: int
                   ) -> list[Candidate]:
    """Candidates as given, and Citations with their lines read from the file (a regular
    file of at most ``limit`` bytes, read as a search reads it: a FIFO cannot hang it)."""
    if not isinstance(candidates, Report):
        check_list(candidates, "candidates", "Candidate or Citation objects, or a Report")
    root = Path(candidates.root) if isinstance(candidates, Report) else Path.cwd()
    items = candidates.results if isinstance(candidates, Report) else candidates
    # a search ordered by the learned ranker fuses its share, not the lexical score: a
    # Report of one (its ``score``) is reranked as the search would have fused it
    learned = isinstance(candidates, Report) and candidates.score_kind == "learned"
    out: list[Candidate] = []
    texts: dict[str, list[str]] = {}
    for index, item in enumerate(items):
        if not isinstance(item, (Candidate, Citation)):
            raise TypeError(f"candidates[{index}] is a {type(item).__name__}, not a "
                            "Candidate or a Citation")
        _check_fields(index, item)
        if isinstance(item, Candidate):
            out.append(item)
            continue
        if item.path not in texts:
            data, why = read_regular(root, item.path, limit)
            if data is None:
                raise FileNotFoundError(f"cannot read candidate {root / item.path}: {why}")
            texts[item.path] = split_lines(data.decode("utf-8", "replace"))
        lines = texts[item.path][item.start_line - 1:item.end_line]
        out.append(Candidate(item.path, item.start_line, item.end_line, "\n".join(lines),
                             item.symbol, item.score if learned else item.lexical_score))
    return out


def _check_fields(index: int, item: Candidate | Citation) -> None:
    """A candidate's fields have the types the judge needs; else a clear error naming it.

    Without this a ``text`` of None or bytes, or a line range that is no range, failed deep
    in the prompt assembly (AttributeError, TypeError), or was echoed back as given.
    """
    what = f"candidates[{index}]"
    if not isinstance(item.path, str) or not item.path:
        raise TypeError(f"{what}.path is {item.path!r}; give the file's path as a str")
    lines = (item.start_line, item.end_line)
    if any(isinstance(n, bool) or not isinstance(n, int) for n in lines) \
            or not 1 <= item.start_line <= item.end_line:
        raise ValueError(f"{what} ({item.path}) has lines {item.start_line!r}-"
                         f"{item.end_line!r}; give ints with 1 <= start_line <= end_line")
    if isinstance(item, Candidate) and not isinstance(item.text, str):
        raise TypeError(f"{what} ({item.path}:{item.start_line}-{item.end_line}) has a "
                        f"text of type {type(item.text).__name__}; give a str")
    if item.symbol is not None and not isinstance(item.symbol, str):
        raise TypeError(f"{what}.symbol is {item.symbol!r}; give a str or None")
    _check_lexical_score(what, item)


def _check_lexical_score(what: str, item: Candidate | Citation) -> None:
    # Standardising the scores needs finite numbers: NaN or infinity failed deep inside
    # statistics, after the model server had judged every candidate; an int too big for a
    # float (10**400) raised OverflowError.
    value = item.lexical_score
    try:
        finite = (not isinstance(value, bool) and isinstance(value, numbers.Real)
                  and math.isfinite(float(value)))
    except OverflowError:
        finite = False
    if not finite:
        raise ValueError(f"{what} ({item.path}:{item.start_line}-{item.end_line}) has "
                         f"lexical_score {shown(value)}; give a finite number that fits a "
                         "float (any scale: the scores are standardised)")


__all__ = ["Candidate", "Reranked", "RerankResult", "Reranker"]
