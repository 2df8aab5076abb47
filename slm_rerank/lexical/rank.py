"""Rank: the candidate files chunked and every chunk scored lexically, best first, and the
head of that ranking a model judges."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import partial
from operator import attrgetter
from pathlib import Path

from slm_rerank.lexical.chunk_cache import ChunkCache
from slm_rerank.lexical.chunk_memory import (
    CHUNK_MEMORY,
    SLICED_MEMO,
    ChunkMemory,
    SlicedFile,
    slice_data,
)
from slm_rerank.lexical.file_scores import FileEvidence
from slm_rerank.lexical.gather import Gathered
from slm_rerank.lexical.ranker import Placed, RankerModel
from slm_rerank.lexical.reading import read_candidate
from slm_rerank.lexical.scores import ScoredChunk, TermStats, score_chunks
from slm_rerank.lexical.terms import QueryTerms
from slm_rerank.report import display_path

#: Files chunked and scored per query: the best by file evidence (at least this many, more
#: when -k asks for more), plus the best by path alone.
CANDIDATE_FILES = 50
PATH_CANDIDATES = 20


@dataclass
class Ranked:
    """Every sliced chunk with its tier-1 lexical score, best first."""

    chunks: list[ScoredChunk]
    #: path -> the file's decoded text, for the stages that need a chunk's code
    texts: dict[str, str] = field(default_factory=dict)
    #: candidate files with evidence that were not read (huge, minified, binary, ...)
    skipped: int = 0
    #: how the learned ranker placed each file (empty: the fixed lexical order)
    placed: dict[str, Placed] = field(default_factory=dict)
    #: the model that placed them, if any
    model: RankerModel | None = None
    #: what went wrong choosing the order (an unusable model file), for the user
    warnings: list[str] = field(default_factory=list)
    #: each chunk's lexical score by (path, start line), kept when the learned ranker gave
    #: ``chunks`` its own scores (empty: ``chunks`` hold the lexical scores)
    lexical: dict[tuple[str, int], float] = field(default_factory=dict)
    #: path -> the sliced file each of ``texts`` is of (what the features keep their work by)
    files: dict[str, SlicedFile] = field(default_factory=dict)



def candidates(evidence: list[FileEvidence], wanted: int = CANDIDATE_FILES
               ) -> list[FileEvidence]:
    """The files worth chunking: the best ``wanted`` by evidence, and the best by path."""
    chosen = {e.path: e for e in evidence[:max(wanted, CANDIDATE_FILES)]}
    by_path = sorted((e for e in evidence if e.path_score > 0),
                     key=lambda e: (-e.path_score, e.path))
    for e in by_path[:PATH_CANDIDATES]:
        chosen.setdefault(e.path, e)
    return list(chosen.values())


def slice_candidate(root: Path, rel: str, limit: int, cache: ChunkCache | None,
                    memory: ChunkMemory | None) -> tuple[SlicedFile | None, str | None]:
    """The candidate file ``rel`` decoded and chunked, or why it was skipped
    (``read_candidate``): from ``memory`` without reading it when it kept the file and the
    file is unchanged, else read (and kept there)."""
    look = memory.look(root, rel, limit) if memory is not None else None
    if look is not None and look.hit is not None:
        return look.hit, None
    data, reason = read_candidate(root, rel, limit)
    if data is None:
        if look is not None and memory is not None:
            memory.forget(look)
        return None, reason
    sliced = slice_data(rel, data, cache, look.known if look is not None else None)
    if look is not None and memory is not None:
        memory.keep(look, sliced)
    return sliced, None


def score_sliced(terms: QueryTerms, stats: TermStats, ev: FileEvidence, sliced: SlicedFile,
                 memo: bool = True) -> list[ScoredChunk]:
    """``score_chunks`` of a sliced file's chunks; ``memo``: keep each literal's counts in
    its chunks with the file, for the next query (``chunk_memory.SLICED_MEMO``)."""
    return score_chunks(terms, stats, ev, sliced.chunks, sliced.text, sliced.lowered,
                        sliced.keys, partial(SLICED_MEMO.get, sliced) if memo else None)


def rank_chunks(root: Path, gathered: Gathered, notes: list[str], *, top_k: int,
                limit: int, cache_dir: Path | None = None,
                memory: ChunkMemory | None = CHUNK_MEMORY) -> Ranked:
    """Chunk the candidate files and score every chunk lexically, best first.

    ``top_k`` widens the candidate files when more results are asked for; a file over
    ``limit`` bytes is skipped; ``cache_dir`` keeps the chunks of files seen before;
    ``memory`` keeps this process's files read, so a warm query reads none it has sliced
    unless it changed, and (beside it) each literal's counts in their chunks
    (``chunk_memory.py``).
    """
    cache = ChunkCache(cache_dir / "chunks") if cache_dir else None
    scored: list[list[ScoredChunk]] = []
    texts: dict[str, str] = {}
    files: dict[str, SlicedFile] = {}
    skipped = 0
    for ev in candidates(gathered.evidence, top_k):
        sliced, reason = slice_candidate(root, ev.path, limit, cache, memory)
        if sliced is None:
            note = f"skipped {display_path(ev.path)}: {reason}"
            if note not in notes:  # the source may have said it already (-v)
                notes.append(note)
            skipped += 1
            continue
        scored.append(score_sliced(gathered.terms, gathered.stats, ev, sliced,
                                   memo=memory is not None))
        texts[ev.path] = sliced.text
        files[ev.path] = sliced
    return Ranked(lexical_order(scored), texts, skipped, files=files)


_START_LINE = attrgetter("chunk.start_line")


def lexical_order(files: list[list[ScoredChunk]]) -> list[ScoredChunk]:
    """The scored chunks of ``files`` (one list a file, in chunk order, each file once) best
    first: by score, then path, then start line, ties as they come (as sorting them all by
    ``(-score, path, start line)``). Put in path and line order first, a sort by score
    alone that keeps ties in order gives that order without a Python call per chunk."""
    chunks = [item for items in files for item in items]
    if any(map(math.isnan, map(_SCORE, chunks))):  # no order: sorted as it always was
        chunks.sort(key=lambda s: (-s.score, s.path, s.chunk.start_line))
        return chunks
    files = sorted(files, key=lambda items: items[0].path if items else "")
    chunks = []
    for items in files:
        chunks.extend(sorted(items, key=_START_LINE))
    chunks.sort(key=_SCORE, reverse=True)
    return chunks


_SCORE = attrgetter("score")


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


def lead(ranked: Ranked) -> float | None:
    """How far the first file leads: its best chunk's lexical score over the next file's
    best chunk's lexical score (1.0: a tie). The files are taken in the order shown (the
    learned ranker's, when it ran), the scores are the lexical ones the cascade's
    ``DECISIVE_LEAD`` was set on: a first file the ranker lifted above a lexically
    stronger one leads by less than 1, a close race the judge is asked about. None with
    fewer than two files or no positive, finite score to compare with (NaN or inf is no
    evidence of a lead)."""
    def lexical(item: ScoredChunk) -> float:
        return ranked.lexical.get((item.path, item.chunk.start_line), item.score)

    first = ranked.chunks[0] if ranked.chunks else None
    if first is None or not 0 < lexical(first) < math.inf:
        return None
    for item in ranked.chunks[1:]:
        if item.path != first.path:
            score = lexical(item)
            ratio = lexical(first) / score if 0 < score < math.inf else math.nan
            return ratio if math.isfinite(ratio) else None
    return None
