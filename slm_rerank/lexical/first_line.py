"""The query's first line searched alone, for the learned ranker's ``first_line`` features.

A pasted issue (or a commit message with a body) says in its first line, in a few words,
what its body says at length among logs, code and asides. Which files that line alone
ranks first is evidence the whole text's order blurs: the ranker weighs both.

The line is not searched again: its words' counts are taken from what the source found
for the whole query (``Gathered.hits``), which also counted the words of the line the
whole query's terms leave out (a long issue keeps only its strongest words;
``Gathered.first_line_counts``), so no second source search starts. The files are
chunked as a search chunks them (``rank.rank_chunks``, with the same memory and cache),
and each file's best chunk score is taken as a share of the best.
"""

from __future__ import annotations

from pathlib import Path

from slm_rerank.lexical.features import FirstLine
from slm_rerank.lexical.file_scores import score_files
from slm_rerank.lexical.gather import Gathered, file_sizes
from slm_rerank.lexical.rank import rank_chunks
from slm_rerank.lexical.scores import TermStats
from slm_rerank.lexical.terms import extract, first_line
from slm_rerank.registrations import SourceHits


def first_line_view(query: str, root: Path, gathered: Gathered, *, top_k: int, limit: int,
                    cache_dir: Path | None = None) -> FirstLine | None:
    """Rank ``gathered``'s files for the query's first line alone (see the module's
    docstring); ``top_k`` and ``limit`` as the search's own ranking. None when the query is
    one line: its own order is its first line's."""
    line = first_line(query)
    if line is None:
        return None
    terms = extract(line)
    if not terms.terms:
        return FirstLine()
    wanted = set(terms.literals())
    hits = gathered.hits
    counts: dict[str, dict[str, int]] = {}
    for found in (hits.body_counts, gathered.first_line_counts):
        for path, said in found.items():
            kept = {literal: n for literal, n in said.items() if literal in wanted}
            if kept:
                counts.setdefault(path, {}).update(kept)
    sizes = {p: n for p, n in hits.sizes.items() if p in counts}
    sizes.update(file_sizes(root, [p for p in counts if p not in sizes]))
    alone = SourceHits(files=hits.files, skipped={}, body_counts=counts, sizes=sizes)
    stats = TermStats.from_hits(terms, alone)
    evidence = score_files(terms, alone, stats, sizes)
    ranked = rank_chunks(root, Gathered(terms, gathered.source, alone, stats, evidence), [],
                         top_k=top_k, limit=limit, cache_dir=cache_dir)
    if not ranked.chunks or ranked.chunks[0].score <= 0:
        return FirstLine()
    best = ranked.chunks[0].score
    shares: dict[str, float] = {}
    for item in ranked.chunks:
        shares.setdefault(item.path, item.score / best)
    return FirstLine(shares, ranked.chunks[0].path)
