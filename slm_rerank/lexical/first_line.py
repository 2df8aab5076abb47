"""The query's first line ranked alone, for the learned ranker's ``first_line`` features.

A pasted issue (or a commit message with a body) says in its first line, in a few words,
what its body says at length among logs, code and asides. How the line alone ranks the
candidate files is evidence the whole text's order blurs: the ranker weighs both.

Nothing is searched or read again. The line's words are counted where the source counted
the whole query's (``Gathered.hits``; a word of the line the whole query left out, as a
long issue keeps only its 40 strongest, is found on paths only), and only the files the
whole query's ranking chunked are ranked for it, from the texts it holds
(``Ranked.files``). So the view costs a pass over the counts and the scoring of chunks
already in memory, and the query's own evidence is untouched.
"""

from __future__ import annotations

from dataclasses import replace

from slm_rerank.lexical.features import FirstLine
from slm_rerank.lexical.file_scores import score_files
from slm_rerank.lexical.gather import Gathered
from slm_rerank.lexical.rank import Ranked, lexical_order, score_sliced
from slm_rerank.lexical.scores import TermStats
from slm_rerank.lexical.terms import QueryTerms, extract, first_line
from slm_rerank.registrations import SourceHits


def first_line_view(query: str, gathered: Gathered, ranked: Ranked) -> FirstLine | None:
    """How the query's first line alone ranks ``ranked``'s files (see the module's
    docstring). None when the query is one line: its own order is its first line's."""
    line = first_line(query)
    if line is None:
        return None
    terms = extract(line)
    if not terms.terms:
        return FirstLine()
    return ranked_alone(terms, gathered, ranked)


def strong_view(gathered: Gathered, ranked: Ranked) -> FirstLine | None:
    """How the query's strong terms alone (identifiers, file names, dotted paths) rank
    ``ranked``'s files: None when every term is strong (the query's own order)."""
    terms = gathered.terms
    strong = [t for t in terms.terms if t.strong]
    if len(strong) == len(terms.terms):
        return None
    if not strong:
        return FirstLine()
    return ranked_alone(replace(terms, terms=strong), gathered, ranked)


def ranked_alone(terms: QueryTerms, gathered: Gathered, ranked: Ranked) -> FirstLine:
    """How ``terms`` alone rank the files ``ranked`` chunked: each one's best chunk score as
    a share of the best, from the counts ``gathered`` holds and the texts ``ranked`` does."""
    wanted = set(terms.literals())
    hits = gathered.hits
    counts: dict[str, dict[str, int]] = {}
    for path, found in hits.body_counts.items():
        kept = {literal: n for literal, n in found.items() if literal in wanted}
        if kept:
            counts[path] = kept
    alone = SourceHits(files=hits.files, body_counts=counts)
    stats = TermStats.from_hits(terms, alone)
    sizes = {p: n for p, n in gathered.sizes.items() if p in counts}
    scored = []
    for ev in score_files(terms, alone, stats, sizes):
        sliced = ranked.files.get(ev.path)
        if sliced is None or sliced.text is not ranked.texts.get(ev.path):
            continue  # not chunked for the whole query: never read for its first line
        scored.append(score_sliced(terms, stats, ev, sliced))
    chunks = lexical_order(scored)
    if not chunks or chunks[0].score <= 0:
        return FirstLine()
    best = chunks[0].score
    shares: dict[str, float] = {}
    for item in chunks:
        shares.setdefault(item.path, item.score / best)
    return FirstLine(shares)
