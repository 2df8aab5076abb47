"""One query from text to report: terms, sources, slicing, lexical ranking."""

from __future__ import annotations

import os
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from slm_rerank.config import repo_root
from slm_rerank.errors import QueryError, SearchError
from slm_rerank.filetypes import SNIFF_BYTES, content_reason, size_reason
from slm_rerank.host import Host
from slm_rerank.lexical import FileEvidence, ScoredChunk, TermStats, score_chunks, score_files
from slm_rerank.registrations import CandidateSource, SourceHits, SourceQuery
from slm_rerank.report import Citation, Degraded, Report
from slm_rerank.slicing import SliceCache, slice_text
from slm_rerank.terms import extract

#: Files sliced and scored per query: the best by file evidence, plus the best by path alone.
CANDIDATE_FILES = 50
PATH_CANDIDATES = 20
#: Above this many explicit paths, the source searches the root and results are filtered.
MAX_PATH_ARGS = 200
GLOB_CHARS = frozenset("*?[")


@dataclass
class SearchRequest:
    query: str
    root: Path | None = None
    #: files, directories or globs given as arguments (must exist)
    paths: list[str] = field(default_factory=list)
    #: file names piped on stdin (missing ones are skipped with a note)
    piped_paths: list[str] = field(default_factory=list)
    fast: bool = True
    top_k: int = 10
    chunks: bool = False
    cache_dir: Path | None = None


def display_path(path: str) -> str:
    """A path as text that always encodes: undecodable bytes become \\x escapes."""
    return path.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def _resolve_root(request: SearchRequest) -> Path:
    if request.root is not None:
        root = request.root.expanduser()
        if not root.is_dir():
            raise SearchError(f"root {root} does not exist or is not a directory")
        return root.resolve()
    here = Path.cwd()
    return repo_root(here) or here.resolve()


def _scope(request: SearchRequest, root: Path, notes: list[str]
           ) -> tuple[list[Path], list[str]]:
    paths: list[Path] = []
    globs: list[str] = []
    for arg, must_exist in [(a, True) for a in request.paths] + [
            (a, False) for a in request.piped_paths]:
        candidate = Path(arg).expanduser()
        if not candidate.is_absolute():
            candidate = Path.cwd() / candidate
        if not candidate.exists() and GLOB_CHARS & set(arg):
            # a glob is written relative to where the user stands, like any other path
            globs.append(os.path.relpath(os.path.abspath(arg), root))
            continue
        if not candidate.exists():
            if must_exist:
                raise SearchError(f"path '{arg}' does not exist")
            notes.append(f"skipped piped path '{arg}': it does not exist")
            continue
        resolved = candidate.resolve()
        if resolved != root and root not in resolved.parents:
            raise SearchError(f"path '{arg}' is outside the searched root {root}; "
                              "pass --root to search another repository")
        paths.append(resolved)
    if (request.paths or request.piped_paths) and not paths and not globs:
        raise SearchError("none of the given paths exist")
    return paths, globs


def choose_source(host: Host, root: Path) -> CandidateSource:
    """The first source in the ``sources`` setting that can search ``root``."""
    available = host.registry.sources()
    order = [n for n in host.settings.sources if n in available] + sorted(
        (n for n in available if n not in host.settings.sources),
        key=lambda n: available[n].priority,
    )
    reasons = []
    for name in order:
        reason = available[name].unavailable(root)
        if reason is None:
            return available[name]
        reasons.append(f"{name}: {reason}")
    if not available:
        raise SearchError("no candidate source is installed (pip install slm-rerank-ripgrep)")
    raise SearchError(f"no candidate source can search {root} ({'; '.join(reasons)})")


def _read(root: Path, rel: str, limit: int) -> tuple[bytes | None, str | None]:
    """A file's bytes, or why it was skipped."""
    full = os.path.join(os.fsencode(root), os.fsencode(rel))
    try:
        size = os.stat(full).st_size
        reason = size_reason(size, limit)
        if reason:
            return None, reason
        with open(full, "rb") as handle:
            data = handle.read()
    except OSError as exc:
        return None, f"unreadable ({exc.strerror})"
    reason = content_reason(os.path.basename(rel), data[:SNIFF_BYTES], len(data))
    return (None, reason) if reason else (data, None)


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


def _candidates(evidence: list[FileEvidence]) -> list[FileEvidence]:
    chosen = {e.path: e for e in evidence[:CANDIDATE_FILES]}
    by_path = sorted((e for e in evidence if e.path_score > 0),
                     key=lambda e: (-e.path_score, e.path))
    for e in by_path[:PATH_CANDIDATES]:
        chosen.setdefault(e.path, e)
    return list(chosen.values())


def _within(path: str, restrict: set[str]) -> bool:
    """True when ``path`` or one of its parent folders is in ``restrict``."""
    return path in restrict or any(str(parent) in restrict
                                   for parent in PurePosixPath(path).parents)


def run_search(request: SearchRequest, host: Host) -> Report:
    """Rank the chunks of ``request.root`` for ``request.query``, lexically."""
    clock = time.perf_counter
    started = clock()
    timings: dict[str, float] = {}
    notes: list[str] = []
    root = _resolve_root(request)
    terms = extract(request.query)
    if not terms.terms:
        raise QueryError("the query has no searchable words (only stop words or punctuation)")
    paths, globs = _scope(request, root, notes)
    source = choose_source(host, root)
    restrict = set()
    if len(paths) > MAX_PATH_ARGS:
        restrict = {os.path.relpath(p, root) for p in paths}
        paths = []
    query = SourceQuery(root=root, terms=terms.literals(), paths=paths, globs=globs,
                        max_filesize=host.settings.max_file_bytes)
    mark = clock()
    try:
        hits = source.search(query)
    except Exception as exc:
        raise SearchError(f"candidate source '{source.name}' failed on {root}: "
                          f"{type(exc).__name__}: {exc}") from exc
    if restrict:
        kept = [f for f in hits.files if _within(f, restrict)]
        keep = set(kept)
        hits = SourceHits(
            files=kept,
            body_counts={p: c for p, c in hits.body_counts.items() if p in keep},
        )
    timings["sources_ms"] = (clock() - mark) * 1000
    if not hits.files:
        notes.append(f"no searchable text files under {root}")

    mark = clock()
    stats = TermStats.from_hits(terms, hits)
    evidence = score_files(terms, hits, stats, _sizes(root, hits.body_counts))
    cache = SliceCache(request.cache_dir / "chunks") if request.cache_dir else None
    scored: list[ScoredChunk] = []
    for ev in _candidates(evidence):
        data, reason = _read(root, ev.path, host.settings.max_file_bytes)
        if data is None:
            notes.append(f"skipped {display_path(ev.path)}: {reason}")
            continue
        text = data.decode("utf-8", "replace")
        chunks = cache.slice(ev.path, data, text) if cache else slice_text(ev.path, data, text)
        scored.extend(score_chunks(terms, stats, ev, chunks, text))
    timings["rank_ms"] = (clock() - mark) * 1000

    scored.sort(key=lambda s: (-s.score, s.path, s.chunk.start_line))
    results: list[Citation] = []
    seen: set[str] = set()
    for item in scored:
        if not request.chunks:
            if item.path in seen:
                continue
            seen.add(item.path)
        results.append(Citation(
            path=display_path(item.path), start_line=item.chunk.start_line,
            end_line=item.chunk.end_line, symbol=item.chunk.symbol, score=item.score,
            lexical_score=item.score, model_score=None, matched_terms=item.matched,
        ))
        if len(results) >= request.top_k:
            break
    notes.insert(0, f"source: {source.name}; {len(hits.files)} files in scope, "
                    f"{len(evidence)} with evidence; terms: {', '.join(terms.literals())}")
    timings["total_ms"] = (clock() - started) * 1000
    degraded = None
    if not request.fast:
        degraded = Degraded("no model scorer is installed yet; results are lexical only "
                            "(pass --fast to ask for that explicitly)")
    return Report(query=request.query, root=str(root), mode="fast" if request.fast else "rerank",
                  results=results, timings=timings, degraded=degraded, notes=notes)
