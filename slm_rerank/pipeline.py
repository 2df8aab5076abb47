"""One query from text to report, as DESIGN.md draws it.

    gather -> rank -> head -> score -> fuse -> select -> cite

Each stage is a function over plain data; ``run_search`` composes them and is the only
place that does. The stages' bodies live with their stage: gather and rank in
``lexical/`` (``gather.py``, ``rank.py``), the model's judgement in ``model/`` (``stage.py``,
fused and cut by ``fusion.apply_verdicts``), the lift of uncommitted files and the stubs
in ``context/``; what is here binds a ``SearchRequest`` to them. Scoping the user's path
arguments against the working directory happens before, at the CLI/API edge
(``lexical/scope.py``); the request arrives here already resolved.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from slm_rerank.config import Settings
from slm_rerank.errors import ConfigError, QueryError, SlmRerankError
from slm_rerank.host import Host
from slm_rerank.lexical.filetypes import path_kind
from slm_rerank.lexical.gather import Gathered, gather_files
from slm_rerank.lexical.plan import SearchPlan, planned_files, planned_terms
from slm_rerank.lexical.rank import Ranked, head, rank_chunks
from slm_rerank.lexical.scores import ScoredChunk
from slm_rerank.lexical.terms import QueryTerms, Term, extract
from slm_rerank.lexical.why import order_of
from slm_rerank.registrations import Endpoint, ExpandRequest, ModelProfile
from slm_rerank.report import Citation, Degraded, ModelInfo, Report, Shortfall, display_path

if TYPE_CHECKING:
    from slm_rerank.context.grouping import SliceGroup
    from slm_rerank.lexical.ordering import HistoryAhead
    from slm_rerank.model.repository_judge import RepositoryJudge
    from slm_rerank.model.stage import Judgement


@dataclass
class SearchRequest:
    """One query, with its scope already resolved against the working directory.

    What the settings say (``top_k``, ``chunks``, the model stage's keys) is the host's:
    a caller that sets one for this query passes ``host.with_overrides(...)``.
    """

    query: str
    #: the searched folder, absolute and resolved
    root: Path
    #: regular files or folders inside ``root`` to restrict the search to (empty: all)
    paths: list[Path] = field(default_factory=list)
    #: glob patterns relative to ``root``
    globs: list[str] = field(default_factory=list)
    fast: bool = True
    cache_dir: Path | None = None
    #: query expanders to ask for extra recall terms, by name
    expanders: list[str] = field(default_factory=list)
    #: what scoping had to say (skipped piped names, globs matching nothing)
    notes: list[str] = field(default_factory=list)
    #: explain every skipped file (``-v``), even where finding them costs the source work
    explain: bool = False
    #: ghost stubs of the results' files: "stub" (cited chunk in full) or "skeleton"
    stubs: str | None = None
    #: lift files with uncommitted changes (``--dirty``)
    dirty: bool = False
    #: group the results by architectural slice (``--by-slice``)
    by_slice: bool = False
    #: fewer terms and files for a caller with little time (the prompt hook)
    plan: SearchPlan | None = None


@dataclass
class PlacedChunk:
    """One chunk's place in the final order: its fused score and what it came from."""

    item: ScoredChunk
    score: float
    model_score: float | None = None
    #: the answer side the model left out of its top-K (its score is a bound), if any
    bounded: str | None = None
    #: the file-kind prior fusion added (``lexical.scores.kind_prior``); None when unjudged
    prior: float | None = None


# --- expand -------------------------------------------------------------------------------


def expand(request: SearchRequest, host: Host, terms: QueryTerms, notes: list[str]) -> None:
    """Add the named expanders' terms to ``terms``, weighted below the words typed.

    An expander never costs the search: whatever it fails with (no server, a timeout, an
    answer it cannot use, a bug) becomes a note and recall goes on with the typed words.
    Only an unknown expander name is an error: that is the user's to fix.
    """
    if not request.expanders:
        return
    available = host.registry.expanders()
    for name in request.expanders:
        if name not in available:
            known = ", ".join(sorted(available)) or "none installed"
            raise ConfigError(f"unknown query expander {name!r} (installed: {known}); "
                              "pip install slm-rerank-expand")
    have = {t.root for t in terms.terms}
    base = max((t.weight for t in terms.terms), default=1.0)
    endpoint, profile = None, None
    # --timeout bounds expansion as a whole: finding the server, then every expander.
    deadline = time.monotonic() + host.settings.timeout
    if any(available[name].needs_endpoint for name in request.expanders):
        endpoint, profile = _expansion_model(request, host, notes)
    for name in request.expanders:
        asked = ExpandRequest(query=request.query, endpoint=endpoint, profile=profile,
                              deadline=deadline, options=host.options_for(name),
                              cache_dir=request.cache_dir)
        try:
            extra = available[name].expand(asked)
        except SlmRerankError as exc:
            notes.append(f"expander {name} failed, searching without it: {exc}")
            continue
        except Exception as exc:  # a plugin's bug must not cost the search
            notes.append(f"expander {name} failed, searching without it: "
                         f"{type(exc).__name__}: {exc}")
            continue
        added = []
        for weighted in extra:
            word = weighted.term.strip().lower()
            if word and word not in have:
                have.add(word)
                added.append(word)
                terms.terms.append(Term(root=word, weight=base * weighted.weight, strong=False))
        notes.append(f"expander {name} added: {', '.join(added) or 'nothing'}")


def _expansion_model(request: SearchRequest, host: Host, notes: list[str]
                     ) -> tuple[Endpoint | None, ModelProfile | None]:
    """The model server and profile for expansion, found as the model stage finds them.

    With ``--fast`` too: expansion is asked for explicitly, so the server is contacted for
    it alone (and ``-v`` says so); chunks are still not judged.
    """
    from slm_rerank.model.stage import locate

    try:
        found = locate(host, host.settings)
    except SlmRerankError as exc:
        notes.append(f"query expansion has no model: {exc}")
        return None, None
    if found.endpoint is None:
        notes.append(f"query expansion has no model: {found.degraded}")
        return None, None
    if request.fast:
        notes.append(f"--fast: the model server {found.endpoint.base_url} is asked only "
                     "to expand the query")
    profile = found.profile.profile if found.profile else None
    return found.endpoint, profile


# --- gather -------------------------------------------------------------------------------


def gather(request: SearchRequest, host: Host, terms: QueryTerms, notes: list[str]
           ) -> Gathered:
    """The files in the request's scope and their evidence (``lexical/gather.py``)."""
    return gather_files(host, request.root, terms, notes, paths=request.paths,
                        globs=request.globs, explain=request.explain)


# --- uncommitted work ---------------------------------------------------------------------


def prefer_dirty(request: SearchRequest, host: Host, gathered: Gathered, notes: list[str],
                 warnings: list[str]) -> dict[str, str]:
    """Lift the changed files with evidence by ``dirty_bonus`` (``context/dirty.py``);
    path -> kind of every changed file under the root."""
    from slm_rerank.context.dirty import lift_dirty

    return lift_dirty(request.root, gathered.evidence, host.settings.dirty_bonus, notes,
                      warnings)


# --- rank ---------------------------------------------------------------------------------


def rank(request: SearchRequest, host: Host, gathered: Gathered, notes: list[str],
         ahead: HistoryAhead | None = None) -> Ranked:
    """Every chunk of the candidate files, scored lexically, best first
    (``lexical/rank.py``). ``ahead``: the history ``ordering.read_ahead`` began looking up."""
    if request.plan is not None:
        gathered.evidence = planned_files(gathered.evidence, request.plan)
    ranked = rank_chunks(request.root, gathered, notes, top_k=host.settings.top_k,
                         limit=host.settings.max_file_bytes, cache_dir=request.cache_dir)
    from slm_rerank.lexical.ordering import put_in_order

    put_in_order(request.root, request.cache_dir, host.settings, gathered, ranked, notes,
                 ahead, request.query)
    return ranked


# --- head, score, fuse --------------------------------------------------------------------


def fuse(ranked: Ranked, model_scores: dict[int, float] | None = None, weight: float = 1.0,
         lengths: dict[int, int] | None = None, exponent: float = 0.0,
         bounded: dict[int, str] | None = None,
         priors: dict[int, float] | None = None) -> list[PlacedChunk]:
    """The final order. Without model scores it is the lexical order, unchanged.

    ``model_scores`` maps an index into ``ranked.chunks`` to a model's P(relevant); scored
    chunks then rank by fused score above the unscored tail (``model/fusion.py``). With
    a weight of the caller's (the benches try several); a search, ``Reranker`` and
    ``calibrate`` fuse a run's verdicts in ``fusion.apply_verdicts``, which chooses the
    weight and cuts by the threshold.
    """
    if not model_scores:
        return [PlacedChunk(item, item.score) for item in ranked.chunks]
    from slm_rerank.model.fusion import fuse_scores

    bounded = bounded or {}
    return [PlacedChunk(ranked.chunks[f.index], f.score, f.model, bounded.get(f.index), f.prior)
            for f in fuse_scores([c.score for c in ranked.chunks], model_scores, weight,
                                 lengths, exponent, priors)]


def kind_priors(ranked: Ranked, indices: list[int], terms: QueryTerms) -> dict[int, float]:
    """The file-kind prior (logits) of each of ``indices`` (into ``ranked.chunks``)."""
    from slm_rerank.lexical.scores import kind_prior

    return {i: kind_prior(ranked.chunks[i].path, terms) for i in indices}


@dataclass
class Scored:
    """The model's judgement of the head, and where the head sits in the ranking."""

    judgement: Judgement
    #: the head as indices into ``ranked.chunks``; the judgement's document j is chosen[j]
    chosen: list[int]
    #: characters of the text the model read, by the judgement's document index
    lengths: dict[int, int]


def judge_head(request: SearchRequest, host: Host, settings: Settings, terms: QueryTerms,
               ranked: Ranked, repository: RepositoryJudge | None = None) -> Scored:
    """Ask the model about the head: the first ``rerank_top`` chunks, file-diverse
    (``lexical/rank.head``), as ``model/passages.py`` cuts them; ``repository`` (a
    search's) may decline the judge (``repository_judge.py``)."""
    # Imported here: --fast never pays for the model stage's imports.
    from slm_rerank.model.cascade import asks_nothing
    from slm_rerank.model.intent import query_intent
    from slm_rerank.model.passages import head_passages
    from slm_rerank.model.stage import judge

    size = len(ranked.chunks) if settings.full else settings.rerank_top
    # A scorer may judge a multiple of the results asked for (listwise's ``multiplier``):
    # at most the head, and 0 or unset leaves the head as it is.
    multiplier = host.options_for(settings.scorer).get("multiplier")
    if isinstance(multiplier, (int, float)) and multiplier > 0 and not settings.full:
        size = min(size, max(1, math.ceil(settings.top_k * multiplier)))
    chosen = head(ranked, size)
    read = head_passages(ranked, chosen, terms, settings.prompt_chars)
    declined = repository.declined if repository and not settings.ask_judge_anyway else None
    judgement = judge(request.query, read, host, settings, request.cache_dir,
                      query_intent(request.query, terms), asks_nothing(ranked, settings.cascade),
                      declined)
    cut = sum(p.cut for p in read)
    if cut:
        # Of the chunks the model gave a verdict on: a run that degraded before judging any
        # (no server) read none of them.
        judged = len(judgement.scores)
        cut = sum(read[j].cut for j in judgement.scores)
        if cut:
            judgement.notes.append(f"{cut} of {judged} judged chunks were longer than "
                                   f"prompt_chars = {settings.prompt_chars}: the model read "
                                   "the part around their best-matching lines")
    return Scored(judgement, chosen, {j: len(p.code) for j, p in enumerate(read)})


def score(request: SearchRequest, host: Host, settings: Settings, terms: QueryTerms,
          ranked: Ranked
          ) -> tuple[Judgement, dict[int, float], dict[int, int], dict[int, str]]:
    """Ask the model about the head, for a caller that fuses the verdicts itself (``fuse``).

    Returns the judgement, then by index into ``ranked.chunks``: the model's P(relevant),
    the length (characters) of the text it read, for length normalisation, and which
    answer side was bounded for the verdicts that are bounds.
    """
    scored = judge_head(request, host, settings, terms, ranked)
    chosen, verdicts = scored.chosen, scored.judgement.scores
    return (scored.judgement, {chosen[j]: v.probability for j, v in verdicts.items()},
            {chosen[j]: n for j, n in scored.lengths.items()},
            {chosen[j]: v.bounded for j, v in verdicts.items() if v.bounded})


# --- select, cite -------------------------------------------------------------------------


def select(fused: Iterable[PlacedChunk], top_k: int, chunks: bool) -> list[PlacedChunk]:
    """The first ``top_k`` results: one per file (its best chunk) unless ``chunks``."""
    chosen: list[PlacedChunk] = []
    seen: set[str] = set()
    for entry in fused:
        if not chunks:
            if entry.item.path in seen:
                continue
            seen.add(entry.item.path)
        chosen.append(entry)
        if len(chosen) >= top_k:
            break
    return chosen


def fewer(ranked: Ranked, shown: int, top_k: int, chunks: bool, dropped: str | None
          ) -> Shortfall | None:
    """Why ``shown`` results are fewer than the ``top_k`` asked for; None when they are not.

    ``dropped`` is what the threshold dropped. The model's head never limits a result: the
    chunks it did not judge follow in lexical order.
    """
    if shown >= top_k:
        return None
    if dropped:
        return Shortfall(top_k, shown, "threshold", dropped)
    found = len(ranked.chunks) if chunks else len({c.path for c in ranked.chunks})
    unit = ("chunk" if chunks else "file") + ("" if found == 1 else "s")
    if not found:
        reason = "no file in scope matches the query"
    else:
        reason = f"only {found} {unit} in scope match{'es' if found == 1 else ''} the query"
    if ranked.skipped:
        # files that matched but were not read: "no file matches" alone would be untrue
        reason += (f" ({ranked.skipped} more file{'' if ranked.skipped == 1 else 's'} with "
                   "evidence could not be read: huge, minified, binary or unreadable; -v "
                   "names them)")
    return Shortfall(top_k, shown, "matches", reason)


def cite(selected: list[PlacedChunk], dirty: dict[str, str] | None = None,
         lexical: dict[tuple[str, int], float] | None = None) -> list[Citation]:
    """Citations as the report carries them, with paths made printable. ``lexical`` holds
    the chunks' lexical scores when the learned ranker replaced them (``Ranked.lexical``)."""
    dirty = dirty or {}
    lexical = lexical or {}
    return [Citation(
        path=display_path(e.item.path), start_line=e.item.chunk.start_line,
        end_line=e.item.chunk.end_line, symbol=e.item.chunk.symbol, score=e.score,
        lexical_score=lexical.get((e.item.path, e.item.chunk.start_line), e.item.score),
        model_score=e.model_score, matched_terms=e.item.matched,
        bounded=e.bounded, dirty=dirty.get(e.item.path), kind=path_kind(e.item.path),
        prior=e.prior,
    ) for e in selected]


def attach_stubs(citations: list[Citation], selected: list[PlacedChunk], ranked: Ranked,
                 root: Path, skeleton: bool, limit: int) -> None:
    """Give each citation the ghost stub of its file (``stubs.py``).

    The stub is built from the text the ranking read, so its line numbers are the
    citation's even if the file changed or vanished since; a file that was not read (none,
    today) is read again.
    """
    from slm_rerank.context.stubs import build_stub, stub_file

    for citation, entry in zip(citations, selected, strict=True):
        cited = [(citation.start_line, citation.end_line)]  # skeleton: marked, not kept
        text = ranked.texts.get(entry.item.path)
        if text is None:
            citation.stub = stub_file(root, entry.item.path, cited, skeleton=skeleton,
                                      limit_bytes=limit)
        else:
            citation.stub = build_stub(entry.item.path, text, cited, skeleton=skeleton)


def group_by_slice(citations: list[Citation], paths: list[str], roots: list[str],
                   in_scope: list[str]) -> list[SliceGroup]:
    """Each citation's slice, and the slices in order of their best result.

    ``in_scope``: every file searched, whose layout says which wrapper folder (``src/pkg``)
    to look through (``grouping.wrapper_of``).
    """
    from slm_rerank.context.grouping import group, slice_of, wrapper_of

    wrapper = wrapper_of(in_scope)
    for citation, path in zip(citations, paths, strict=True):
        name = slice_of(path, roots, wrapper)
        citation.slice = None if name is None else display_path(name)
    return group([c.slice for c in citations], [c.score for c in citations])


# --- the whole query ----------------------------------------------------------------------


def query_terms(query: str) -> QueryTerms:
    terms = extract(query)
    if not terms.terms:
        raise QueryError("the query has no searchable words (only stop words or punctuation)")
    return terms


def run_search(request: SearchRequest, host: Host) -> Report:
    """Rank the chunks of ``request.root`` for ``request.query`` by ``host``'s settings."""
    clock = time.perf_counter
    started = clock()
    notes = list(request.notes)
    timings: dict[str, float] = {}
    terms = planned_terms(query_terms(request.query), request.plan)

    warnings: list[str] = []
    expand(request, host, terms, notes)
    mark = clock()
    from slm_rerank.lexical.ordering import read_ahead  # the history, beside the sources

    ahead = read_ahead(request.root, request.cache_dir, terms, host.settings)
    gathered = gather(request, host, terms, notes)
    dirty = prefer_dirty(request, host, gathered, notes, warnings) if request.dirty else {}
    timings["sources_ms"] = (clock() - mark) * 1000
    if not gathered.hits.files:
        notes.append(f"no searchable text files under {display_path(str(request.root))}")

    mark = clock()
    ranked = rank(request, host, gathered, notes, ahead)
    warnings.extend(ranked.warnings)
    timings["rank_ms"] = (clock() - mark) * 1000

    degraded, model = None, None
    dropped: str | None = None  # what the threshold dropped, if anything
    # the learned ranker's shares, or the fixed order's lexical scores ("fused": see below)
    score_kind = "learned" if ranked.model is not None else "lexical"
    # the lexical order, placed as select reads it (the first few of thousands of chunks)
    fused: Iterable[PlacedChunk] = (PlacedChunk(item, item.score) for item in ranked.chunks)
    settings = host.settings
    if not request.fast and ranked.chunks:
        from slm_rerank.model.fusion import apply_verdicts
        from slm_rerank.model.repository_judge import for_repository

        here = for_repository(request.root, request.cache_dir)  # calibrate --write's finding
        warnings.extend([here.warning] if here.warning else [])
        scored = judge_head(request, host, settings, terms, ranked, here)
        judgement = scored.judgement
        priors = kind_priors(ranked, scored.chosen, terms)
        # by a weight measured here or on the user's code, else the profile's for this query
        verdicts = apply_verdicts([c.score for c in ranked.chunks], judgement, settings,
                                  threshold=settings.threshold, query=request.query,
                                  lengths=scored.lengths, at=scored.chosen, priors=priors,
                                  repository=here)
        weight = verdicts.weight
        notes.extend(judgement.notes)
        notes.append(weight.note)
        warnings.extend(judgement.warnings)  # unjudged chunks, a refused score cache
        if judgement.scores:
            # With no verdict nothing was fused: a run that degraded before any, or a
            # cascade that found the lexical order decisive, shows --fast's scores, not 0s.
            fused = [PlacedChunk(ranked.chunks[f.index], f.score, f.model, f.bounded, f.prior)
                     for f in verdicts.kept]
            score_kind = "fused"
        if judgement.degraded:
            degraded = Degraded(judgement.degraded)
        lowered = sorted({(path_kind(ranked.chunks[i].path), round(priors[i], 2))
                          for j, i in enumerate(scored.chosen)
                          if j in judgement.scores and priors[i] < 0})
        if lowered:
            notes.append("file-kind prior: judged chunks of " + ", ".join(
                f"{kind} files {prior:+.2f}" for kind, prior in lowered) +
                " logits (the query did not ask for them)")
        if verdicts.dropped:
            dropped = (f"threshold {settings.threshold:g} dropped {verdicts.dropped} of "
                       f"{verdicts.judged} judged chunks (the judge's best P(relevant) "
                       f"{verdicts.best:.2f}); lower it with --threshold, or leave it unset")
        model = ModelInfo.of(judgement, settings.threshold if not degraded else None,
                             weight.weight, weight.source)
        timings["model_ms"] = judgement.model_ms
    selected = select(fused, settings.top_k, settings.chunks)
    shortfall = fewer(ranked, len(selected), settings.top_k, settings.chunks, dropped)
    if dropped and shortfall is None:
        notes.append(dropped)  # as many results as asked for: -v alone says it
    citations = cite(selected, dirty, ranked.lexical)
    if ranked.model is not None:
        from slm_rerank.lexical.why import explain_order

        explain_order(citations, [e.item for e in selected], ranked, gathered)
    if request.stubs:
        mark = clock()
        attach_stubs(citations, selected, ranked, request.root, request.stubs == "skeleton",
                     host.settings.max_file_bytes)
        timings["stubs_ms"] = (clock() - mark) * 1000
    slices = None
    if request.by_slice:
        slices = group_by_slice(citations, [e.item.path for e in selected],
                                host.settings.slice_roots, gathered.hits.files)
    notes.insert(0, f"source: {gathered.source}; {len(gathered.hits.files)} files in scope, "
                    f"{len(gathered.evidence)} with evidence; terms: "
                    f"{', '.join(terms.literals())}")
    timings["total_ms"] = (clock() - started) * 1000
    return Report(query=request.query, root=display_path(str(request.root)),
                  mode="fast" if request.fast else "rerank", results=citations,
                  timings=timings, degraded=degraded, notes=notes, model=model,
                  warnings=warnings, slices=slices, shortfall=shortfall, score_kind=score_kind,
                  order=order_of(ranked, notes))
