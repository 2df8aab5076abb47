"""One query from text to report, as DESIGN.md draws it.

    gather -> rank -> head -> score -> fuse -> select -> cite

Each stage is a function over plain data; ``run_search`` composes them and is the only
place that does. Scoping the user's path arguments against the working directory happens
before, at the CLI/API edge (``scope.py``); the request arrives here already resolved.
"""

from __future__ import annotations

import math
import os
import stat
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING

from slm_rerank.config import Settings
from slm_rerank.errors import (
    ConfigError,
    QueryError,
    SearchError,
    SlmRerankError,
)
from slm_rerank.host import Host
from slm_rerank.lexical.chunk_cache import ChunkCache
from slm_rerank.lexical.chunking import chunk_text
from slm_rerank.lexical.filetypes import SNIFF_BYTES, content_reason, size_reason
from slm_rerank.lexical.scope import globs_matching_nothing
from slm_rerank.lexical.scores import (
    FileEvidence,
    ScoredChunk,
    TermStats,
    score_chunks,
    score_files,
)
from slm_rerank.lexical.terms import QueryTerms, Term, extract
from slm_rerank.registrations import (
    CandidateSource,
    Endpoint,
    ExpandRequest,
    ModelProfile,
    SourceHits,
    SourceQuery,
)
from slm_rerank.report import (
    Citation,
    Degraded,
    ModelInfo,
    Report,
    Shortfall,
    display_path,
)

if TYPE_CHECKING:
    from slm_rerank.context.grouping import SliceGroup
    from slm_rerank.model.stage import Judgement

#: Files sliced and scored per query: the best by file evidence (at least this many, more
#: when -k asks for more), plus the best by path alone.
CANDIDATE_FILES = 50
PATH_CANDIDATES = 20
#: Above this many explicit paths, the source searches the root and results are filtered.
MAX_PATH_ARGS = 200


@dataclass
class SearchRequest:
    """One query, with its scope already resolved against the working directory."""

    query: str
    #: the searched folder, absolute and resolved
    root: Path
    #: regular files or folders inside ``root`` to restrict the search to (empty: all)
    paths: list[Path] = field(default_factory=list)
    #: glob patterns relative to ``root``
    globs: list[str] = field(default_factory=list)
    fast: bool = True
    top_k: int = 10
    chunks: bool = False
    cache_dir: Path | None = None
    #: query expanders to ask for extra recall terms, by name
    expanders: list[str] = field(default_factory=list)
    #: what scoping had to say (skipped piped names, globs matching nothing)
    notes: list[str] = field(default_factory=list)
    #: explain every skipped file (``-v``), even where finding them costs the source work
    explain: bool = False
    #: ghost stubs of the results' files: "stub" (cited chunk in full) or "slice" (skeleton)
    stubs: str | None = None
    #: lift files with uncommitted changes (``--dirty``)
    dirty: bool = False
    #: group the results by architectural slice (``--by-slice``)
    by_slice: bool = False


@dataclass
class Gathered:
    """The candidates' evidence: which source ran, what it found, per-file scores."""

    terms: QueryTerms
    source: str
    hits: SourceHits
    stats: TermStats
    evidence: list[FileEvidence]


@dataclass
class Ranked:
    """Every sliced chunk with its tier-1 lexical score, best first."""

    chunks: list[ScoredChunk]
    #: path -> the file's decoded text, for the stages that need a chunk's code
    texts: dict[str, str] = field(default_factory=dict)
    #: candidate files with evidence that were not read (huge, minified, binary, ...)
    skipped: int = 0


@dataclass
class Fused:
    """One chunk's place in the final order: its fused score and what it came from."""

    item: ScoredChunk
    score: float
    model_score: float | None = None
    #: the answer side the model left out of its top-K (its score is a bound), if any
    bounded: str | None = None


def choose_source(host: Host, root: Path, notes: list[str]) -> CandidateSource:
    """The first source in the ``sources`` setting that can search ``root``."""
    available = host.registry.sources()
    wanted = host.settings.sources
    order = [n for n in wanted if n in available] + sorted(
        (n for n in available if n not in wanted), key=lambda n: available[n].priority)
    reasons = []
    for name in order:
        reason = available[name].unavailable(root)
        if reason is None:
            if reasons:
                notes.append(f"source {name} used because {'; '.join(reasons)}")
            return available[name]
        reasons.append(f"{name}: {reason}")
    if not available:
        disabled = host.settings.disabled_plugins
        if disabled:
            raise SearchError(
                "every candidate source is disabled (disabled_plugins = "
                f"{disabled} from {host.settings.origins.get('disabled_plugins')}); "
                "enable ripgrep or git")
        raise SearchError("no candidate source is installed (pip install slm-rerank-ripgrep)")
    raise SearchError(f"no candidate source can search {display_path(str(root))} "
                      f"({'; '.join(reasons)})")


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


def _sizes(root: Path, paths: Iterable[str]) -> dict[str, int]:
    """Byte sizes of the files with body matches, for length normalisation."""
    base = os.fsencode(root)
    sizes = {}
    for rel in paths:
        try:
            sizes[rel] = os.stat(os.path.join(base, os.fsencode(rel))).st_size
        except OSError:
            continue
    return sizes


def _within(path: str, restrict: set[str]) -> bool:
    """True when ``path`` or one of its parent folders is in ``restrict``."""
    return path in restrict or any(str(parent) in restrict
                                   for parent in PurePosixPath(path).parents)


def gather(request: SearchRequest, host: Host, terms: QueryTerms, notes: list[str]
           ) -> Gathered:
    """Ask the first available source for the files in scope and their term counts."""
    source = choose_source(host, request.root, notes)
    paths, restrict = list(request.paths), set()
    if len(paths) > MAX_PATH_ARGS:
        restrict = {os.path.relpath(p, request.root) for p in paths}
        paths = []
    query = SourceQuery(root=request.root, terms=terms.literals(), paths=paths,
                        globs=request.globs, max_filesize=host.settings.max_file_bytes,
                        explain=request.explain)
    try:
        hits = source.search(query)
    except SlmRerankError:
        raise
    except Exception as exc:
        raise SearchError(f"candidate source '{source.name}' failed on "
                          f"{display_path(str(request.root))}: "
                          f"{type(exc).__name__}: {exc}") from exc
    if restrict:
        kept = [f for f in hits.files if _within(f, restrict)]
        keep = set(kept)
        hits = SourceHits(files=kept, skipped=hits.skipped,
                          body_counts={p: c for p, c in hits.body_counts.items() if p in keep})
    for path, why in sorted(hits.skipped.items()):
        notes.append(f"skipped {display_path(path)}: {why}")
    for glob in globs_matching_nothing(request.globs, hits.files):
        notes.append(f"glob '{display_path(glob)}' matches no file")
    stats = TermStats.from_hits(terms, hits)
    evidence = score_files(terms, hits, stats, _sizes(request.root, hits.body_counts))
    return Gathered(terms, source.name, hits, stats, evidence)


# --- uncommitted work ---------------------------------------------------------------------


def prefer_dirty(request: SearchRequest, host: Host, gathered: Gathered, notes: list[str],
                 warnings: list[str]) -> dict[str, str]:
    """Multiply the lexical score of each changed file with evidence by 1 + dirty_bonus.

    Scaling the file's kind factor scales its file score and every chunk's score alike,
    and leaves a file without evidence at zero. Returns path -> kind for every changed
    file under the root, for the report; outside git, a warning and nothing changes.
    """
    from slm_rerank.context.dirty import find_dirty

    found = find_dirty(request.root)
    if found.reason:
        warnings.append(f"--dirty changes nothing: {found.reason}")
        return {}
    bonus = host.settings.dirty_bonus
    lifted = []
    for ev in gathered.evidence:
        if ev.path in found.kinds and ev.score > 0:
            ev.factor *= 1.0 + bonus
            lifted.append(ev.path)
    gathered.evidence.sort(key=lambda e: (-e.score, e.path))
    counts: dict[str, int] = {}
    for kind in found.kinds.values():
        counts[kind] = counts.get(kind, 0) + 1
    summary = ", ".join(f"{n} {kind}" for kind, n in sorted(counts.items())) or "none"
    notes.append(f"--dirty: uncommitted files under the root: {summary}; "
                 f"{len(lifted)} with evidence scored x{1.0 + bonus:g} (dirty_bonus = "
                 f"{bonus:g}){': ' if lifted else ''}"
                 f"{', '.join(display_path(p) for p in lifted[:10])}"
                 f"{' ...' if len(lifted) > 10 else ''}")
    return found.kinds


# --- rank ---------------------------------------------------------------------------------


#: Opening never waits: a FIFO (or a device) put where a listed file was would otherwise
#: block ``open`` until a writer came, and the search with it. Symlinks are still followed,
#: as they always were: a link inside the repository to a file is read as that file.
_OPEN_FLAGS = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)


def _read(root: Path, rel: str, limit: int) -> tuple[bytes | None, str | None]:
    """A candidate file's bytes, or why it was skipped (``read_regular``, then its content:
    binary, minified and generated files are not worth chunking)."""
    data, reason = read_regular(root, rel, limit)
    if data is None:
        return None, reason
    reason = content_reason(os.path.basename(rel), data[:SNIFF_BYTES], len(data))
    return (None, reason) if reason else (data, None)


def read_regular(root: Path, rel: str, limit: int) -> tuple[bytes | None, str | None]:
    """The bytes of the regular file ``rel`` under ``root`` (at most ``limit``), or why not.

    The file is judged by fstat of the descriptor opened, not by a stat of its name: a file
    swapped for a FIFO, a socket or a device after the listing is skipped, never read.
    """
    full = os.path.join(os.fsencode(root), os.fsencode(rel))
    try:
        fd = os.open(full, _OPEN_FLAGS)
        try:
            status = os.fstat(fd)
            if stat.S_ISDIR(status.st_mode):
                return None, "a directory, not a file"
            if not stat.S_ISREG(status.st_mode):
                return None, "not a regular file (a pipe, socket or device)"
            size = status.st_size
            reason = size_reason(size, limit)
            if reason:
                return None, reason
            with open(fd, "rb", closefd=False) as handle:
                # read(n) allocates n bytes before reading: size it by the file, not the limit
                data = handle.read(size + 1)
                if len(data) > size:  # it grew since fstat
                    data += handle.read(limit + 1 - len(data))
        finally:
            os.close(fd)
    except OSError as exc:
        return None, f"unreadable ({exc.strerror or exc})"
    if len(data) > limit:
        return None, size_reason(len(data), limit)
    return data, None


def candidates(evidence: list[FileEvidence], wanted: int = CANDIDATE_FILES
               ) -> list[FileEvidence]:
    """The files worth chunking: the best ``wanted`` by evidence, and the best by path."""
    chosen = {e.path: e for e in evidence[:max(wanted, CANDIDATE_FILES)]}
    by_path = sorted((e for e in evidence if e.path_score > 0),
                     key=lambda e: (-e.path_score, e.path))
    for e in by_path[:PATH_CANDIDATES]:
        chosen.setdefault(e.path, e)
    return list(chosen.values())


def rank(request: SearchRequest, host: Host, gathered: Gathered, notes: list[str]) -> Ranked:
    """Slice the candidate files and score every chunk lexically, best first."""
    from slm_rerank.lexical.scores import LoweredText

    cache = ChunkCache(request.cache_dir / "chunks") if request.cache_dir else None
    limit = host.settings.max_file_bytes
    scored: list[ScoredChunk] = []
    texts: dict[str, str] = {}
    skipped = 0
    for ev in candidates(gathered.evidence, request.top_k):
        data, reason = _read(request.root, ev.path, limit)
        if data is None:
            notes.append(f"skipped {display_path(ev.path)}: {reason}")
            skipped += 1
            continue
        text = data.decode("utf-8", "replace")
        lowered = LoweredText.of(text)  # once for both: the cache's check and the scores
        chunks = (cache.slice(ev.path, data, text, lowered.line_count) if cache
                  else chunk_text(ev.path, data, text))
        scored.extend(score_chunks(gathered.terms, gathered.stats, ev, chunks, text, lowered))
        texts[ev.path] = text
    scored.sort(key=lambda s: (-s.score, s.path, s.chunk.start_line))
    return Ranked(scored, texts, skipped)


# --- head, score, fuse --------------------------------------------------------------------


def head(ranked: Ranked, size: int) -> list[int]:
    """The chunks a model judges, as indices into ``ranked.chunks``: file-diverse, so the
    head holds as many files as it can.

    The best chunk of each leading file comes first (in lexical order), then further chunks
    of those files: a head taken in plain chunk order holds fewer distinct files, and the
    model cannot lift a file it never sees (DESIGN.md, "Head selection").
    """
    firsts: list[int] = []
    rest: list[int] = []
    seen: set[str] = set()
    for i, item in enumerate(ranked.chunks):
        (rest if item.path in seen else firsts).append(i)
        seen.add(item.path)
    return (firsts + rest)[:size]


def fuse(ranked: Ranked, model_scores: dict[int, float] | None = None, weight: float = 1.0,
         lengths: dict[int, int] | None = None, exponent: float = 0.0,
         bounded: dict[int, str] | None = None) -> list[Fused]:
    """The final order. Without model scores it is the lexical order, unchanged.

    ``model_scores`` maps an index into ``ranked.chunks`` to a model's P(relevant); scored
    chunks then rank by fused score above the unscored tail (``model/fusion.py``).
    """
    if not model_scores:
        return [Fused(item, item.score) for item in ranked.chunks]
    from slm_rerank.model.fusion import fuse_scores

    bounded = bounded or {}
    return [Fused(ranked.chunks[f.index], f.score, f.model, bounded.get(f.index))
            for f in fuse_scores([c.score for c in ranked.chunks], model_scores, weight,
                                 lengths, exponent)]


def score(request: SearchRequest, host: Host, settings: Settings, terms: QueryTerms,
          ranked: Ranked
          ) -> tuple[Judgement, dict[int, float], dict[int, int], dict[int, str]]:
    """Ask the model about the head.

    Returns the judgement, then by index into ``ranked.chunks``: the model's P(relevant),
    the length (characters) of the text it read, for length normalisation, and which
    answer side was bounded for the verdicts that are bounds.
    """
    # Imported here: --fast never pays for the model stage's imports.
    from slm_rerank.model.passages import head_passages
    from slm_rerank.model.stage import judge

    size = len(ranked.chunks) if settings.full else settings.rerank_top
    # A scorer may judge a multiple of the results asked for (listwise's ``multiplier``):
    # at most the head, and 0 or unset leaves the head as it is.
    multiplier = host.options_for(settings.scorer).get("multiplier")
    if isinstance(multiplier, (int, float)) and multiplier > 0 and not settings.full:
        size = min(size, max(1, math.ceil(request.top_k * multiplier)))
    chosen = head(ranked, size)
    read = head_passages(ranked, chosen, terms, settings.prompt_chars)
    judgement = judge(request.query, read, host, settings, request.cache_dir)
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
    verdicts = {chosen[j]: v.probability for j, v in judgement.scores.items()}
    bounded = {chosen[j]: v.bounded for j, v in judgement.scores.items() if v.bounded}
    lengths = {chosen[j]: len(p.code) for j, p in enumerate(read)}
    return judgement, verdicts, lengths, bounded


# --- select, cite -------------------------------------------------------------------------


def select(fused: list[Fused], top_k: int, chunks: bool) -> list[Fused]:
    """The first ``top_k`` results: one per file (its best chunk) unless ``chunks``."""
    chosen: list[Fused] = []
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


def fewer(ranked: Ranked, shown: int, top_k: int, chunks: bool, judged: int | None,
          dropped: str | None) -> Shortfall | None:
    """Why ``shown`` results are fewer than the ``top_k`` asked for; None when they are not.

    ``judged`` is how many chunks the model judged when its order is the result's (only
    judged chunks are shown then), ``dropped`` what the threshold dropped.
    """
    if shown >= top_k:
        return None
    if dropped:
        return Shortfall(top_k, shown, "threshold", dropped)
    found = len(ranked.chunks) if chunks else len({c.path for c in ranked.chunks})
    if judged is not None and judged < len(ranked.chunks):
        where = "" if chunks else f", from {shown} file{'' if shown == 1 else 's'}"
        return Shortfall(top_k, shown, "head",
                         f"the model judged only the first {judged} chunks{where}; raise "
                         "--rerank-top or pass --full to judge more")
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


def cite(selected: list[Fused], dirty: dict[str, str] | None = None) -> list[Citation]:
    """Citations as the report carries them, with paths made printable."""
    dirty = dirty or {}
    return [Citation(
        path=display_path(e.item.path), start_line=e.item.chunk.start_line,
        end_line=e.item.chunk.end_line, symbol=e.item.chunk.symbol, score=e.score,
        lexical_score=e.item.score, model_score=e.model_score, matched_terms=e.item.matched,
        bounded=e.bounded, dirty=dirty.get(e.item.path),
    ) for e in selected]


def attach_stubs(citations: list[Citation], selected: list[Fused], ranked: Ranked,
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


def group_by_slice(citations: list[Citation], paths: list[str], roots: list[str]
                   ) -> list[SliceGroup]:
    """Each citation's slice, and the slices in order of their best result."""
    from slm_rerank.context.grouping import group, slice_of

    for citation, path in zip(citations, paths, strict=True):
        name = slice_of(path, roots)
        citation.slice = None if name is None else display_path(name)
    return group([c.slice for c in citations], [c.score for c in citations])


# --- the whole query ----------------------------------------------------------------------


def query_terms(query: str) -> QueryTerms:
    terms = extract(query)
    if not terms.terms:
        raise QueryError("the query has no searchable words (only stop words or punctuation)")
    return terms


def run_search(request: SearchRequest, host: Host, settings: Settings | None = None) -> Report:
    """Rank the chunks of ``request.root`` for ``request.query`` (``settings``: the host's)."""
    clock = time.perf_counter
    started = clock()
    notes = list(request.notes)
    timings: dict[str, float] = {}
    terms = query_terms(request.query)

    warnings: list[str] = []
    expand(request, host, terms, notes)
    mark = clock()
    gathered = gather(request, host, terms, notes)
    dirty = prefer_dirty(request, host, gathered, notes, warnings) if request.dirty else {}
    timings["sources_ms"] = (clock() - mark) * 1000
    if not gathered.hits.files:
        notes.append(f"no searchable text files under {display_path(str(request.root))}")

    mark = clock()
    ranked = rank(request, host, gathered, notes)
    timings["rank_ms"] = (clock() - mark) * 1000

    degraded, model = None, None
    judged_count: int | None = None  # set when the model's order is the result's
    dropped: str | None = None  # what the threshold dropped, if anything
    fused = fuse(ranked)
    settings = settings or host.settings
    if not request.fast and ranked.chunks:
        judgement, verdicts, lengths, bounded = score(request, host, settings, terms, ranked)
        notes.extend(judgement.notes)
        warnings.extend(judgement.warnings)  # unjudged chunks, a refused score cache
        profile = judgement.profile.profile if judgement.profile else None
        fused = fuse(ranked, verdicts, profile.judge_weight if profile else 1.0, lengths,
                     profile.length_exponent if profile else 0.0, bounded)
        if judgement.degraded:
            degraded = Degraded(judgement.degraded)
        else:
            judged = [f for f in fused if f.model_score is not None]
            fused = [f for f in judged if f.score >= settings.threshold]
            judged_count = len(judged)
            if len(fused) < len(judged):
                best = max((f.score for f in judged), default=0.0)
                dropped = (f"threshold {settings.threshold:g} dropped "
                           f"{len(judged) - len(fused)} of {len(judged)} judged chunks "
                           f"(best fused score {best:.2f}); lower it with --threshold")
        model = ModelInfo.of(judgement, settings.threshold if not degraded else None)
        timings["model_ms"] = judgement.model_ms
    selected = select(fused, request.top_k, request.chunks)
    shortfall = fewer(ranked, len(selected), request.top_k, request.chunks, judged_count,
                      dropped)
    if dropped and shortfall is None:
        notes.append(dropped)  # as many results as asked for: -v alone says it
    citations = cite(selected, dirty)
    if request.stubs:
        mark = clock()
        attach_stubs(citations, selected, ranked, request.root, request.stubs == "slice",
                     host.settings.max_file_bytes)
        timings["stubs_ms"] = (clock() - mark) * 1000
    slices = None
    if request.by_slice:
        slices = group_by_slice(citations, [e.item.path for e in selected],
                                host.settings.slice_roots)
    notes.insert(0, f"source: {gathered.source}; {len(gathered.hits.files)} files in scope, "
                    f"{len(gathered.evidence)} with evidence; terms: "
                    f"{', '.join(terms.literals())}")
    timings["total_ms"] = (clock() - started) * 1000
    return Report(query=request.query, root=display_path(str(request.root)),
                  mode="fast" if request.fast else "rerank", results=citations,
                  timings=timings, degraded=degraded, notes=notes, model=model,
                  warnings=warnings, slices=slices, shortfall=shortfall)
