"""Tier-1 lexical scores: for whole files from path and body evidence (``file_scores``),
then per chunk (here, with the constants, the file kinds' factors and each term's rarity).

A term that names the file or a symbol the chunk declares counts most, then a directory
match, then mentions in the body (saturating, BM25-like, weighted by rarity). Tests and docs
rank below implementations unless the query is about them.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache, partial
from operator import itemgetter
from typing import TYPE_CHECKING, Protocol

from slm_rerank.lexical.chunk_counts import LoweredText, chunk_bounds, counts_per_chunk
from slm_rerank.lexical.chunking import Chunk
from slm_rerank.lexical.filetypes import path_kind
from slm_rerank.lexical.terms import QueryTerms, light, searched_in_bodies, split_identifier
from slm_rerank.registrations import SourceHits

if TYPE_CHECKING:
    from slm_rerank.lexical.file_memo import ChunkCounts, FileMemo

NAMES_FILE = 4.0
NAME_TOKEN = 2.0
DIRECTORY = 1.0
NAMED_PATH = 6.0
DECLARES = 3.0
ENCLOSING = 1.0
SATURATION = 1.2
TEST_FACTOR = 0.5
DOC_FACTOR = 0.4
CHANGELOG_FACTOR = 0.2
#: configuration, data, message catalogs: text that is neither source nor docs
OTHER_FACTOR = 0.4
#: BM25's length normalisation: 0 ignores file size, 1 divides by it fully
LENGTH_B = 0.5
#: the whole-file score's constants (``FileEvidence.parts["file_bm25"]``): textbook BM25,
#: unweighted by what kind of word a term is, a feature of the learned ranker beside the
#: weighted body score the fixed order adds up
FILE_K1 = 1.5
FILE_B = 0.75


#: everything but letters and digits, in any script (a CJK file name keeps its characters)
_NOT_ALNUM = re.compile(r"[\W_]")


@lru_cache(maxsize=65536)
def _key(word: str) -> str:
    return light(_NOT_ALNUM.sub("", word.lower()))


@dataclass(slots=True)
class ScoredChunk:
    """One chunk of a candidate file with its lexical score (thousands a query: slots)."""

    path: str
    chunk: Chunk
    score: float
    matched: list[str]
    #: what the chunk adds to its file's evidence, by where it came from: a term it
    #: declares, a term naming its enclosing class, and its own mentions of the terms
    declares: float = 0.0
    enclosing: float = 0.0
    mentions: float = 0.0


def idf(df: int, n_files: int) -> float:
    return math.log(1.0 + (n_files - df + 0.5) / (df + 0.5))


def saturate(tf: int, length_ratio: float = 1.0) -> float:
    """tf / (tf + k), where k grows with the file's size relative to the average."""
    if tf <= 0:
        return 0.0
    return tf / (tf + SATURATION * (1.0 - LENGTH_B + LENGTH_B * length_ratio))


def kind_factor(path: str, terms: QueryTerms) -> float:
    """Tests, docs and other non-source text rank below implementations unless asked for."""
    return _factor_of_kind(path_kind(path), terms)


def _factor_of_kind(kind: str, terms: QueryTerms) -> float:
    if kind == "test":
        return 1.0 if terms.about_tests else TEST_FACTOR
    if kind == "changelog":
        # A changelog names every feature once: an index of the project, not its answer.
        return DOC_FACTOR if terms.about_docs else CHANGELOG_FACTOR
    if kind == "doc":
        return 1.0 if terms.about_docs else DOC_FACTOR
    if kind == "other":
        return OTHER_FACTOR
    return 1.0


def kind_prior(path: str, terms: QueryTerms) -> float:
    """The file-kind prior fusion adds to a judged chunk's logit: ln of ``kind_factor``, so
    0 for source (and for a test or doc page the query asks for), -0.69 for a test, -0.92
    for a doc page or data file, -1.61 for a changelog."""
    return math.log(kind_factor(path, terms))


@dataclass
class TermStats:
    """Rarity of each term over the files in scope."""

    weights: dict[str, float]  # literal -> term weight * idf
    #: literal -> idf alone, for the terms searched in bodies
    rarity: dict[str, float] = field(default_factory=dict)

    @classmethod
    def from_hits(cls, terms: QueryTerms, hits: SourceHits) -> TermStats:
        n = max(1, len(hits.files))
        df: dict[str, int] = {}
        for counts in hits.body_counts.values():
            for literal in counts:
                df[literal] = df.get(literal, 0) + 1
        rarity = {t.literal: idf(df.get(t.literal, 0), n)
                  for t in terms.terms if searched_in_bodies(t)}
        # A path-only term has no document frequency: give it a typical rarity.
        typical = sum(rarity.values()) / len(rarity) if rarity else 1.0
        return cls({t.literal: t.weight * rarity.get(t.literal, typical) for t in terms.terms},
                   rarity)


@lru_cache(maxsize=65536)
def _tokens(part: str) -> frozenset[str]:
    """Light-normalised tokens of one path component (folders repeat: cached)."""
    return frozenset(light(tok) for tok in split_identifier(part))


def name_tokens(path: str) -> frozenset[str]:
    """The light-normalised words of a path's file name (``parser_v2.py``: parser, v2)."""
    name = path.rpartition("/")[2]
    return _tokens(name.split(".")[0] if not name.startswith(".") else name)


#: ``saturate``'s constant at the average length, as it computes it (the same float).
_K_AVERAGE = SATURATION * (1.0 - LENGTH_B + LENGTH_B * 1.0)

#: a chunk's names as ``score_chunks`` matches them against the terms: the keys of what it
#: declares, and of the classes around it
ChunkKeys = tuple[tuple[str, ...], tuple[str, ...]]


def chunk_keys(chunk: Chunk) -> ChunkKeys:
    """What ``chunk`` declares and which classes enclose it, as term keys (each key once,
    in the order the chunk names them); the same for every query, so a process that keeps
    a file's chunks keeps these too. Tuples, not sets: a chunk declares one name or a few,
    and a tuple of one takes a quarter of a set's memory."""
    declared = tuple(dict.fromkeys(map(_key, chunk.defines)))
    enclosing = tuple(dict.fromkeys(map(_key, (chunk.symbol or "").split(".")[:-1])))
    return declared, enclosing


class Evidence(Protocol):
    """What ``score_chunks`` reads of a file's evidence (``file_scores.FileEvidence``)."""

    path: str
    factor: float

    @property
    def score(self) -> float: ...
    @property
    def matched(self) -> dict[str, float]: ...
    @property
    def path_terms(self) -> list[str]: ...


def score_chunks(terms: QueryTerms, stats: TermStats, ev: Evidence, chunks: list[Chunk],
                 text: str, lowered: LoweredText | Callable[[], LoweredText] | None = None,
                 names: Sequence[ChunkKeys] | None = None,
                 memo: FileMemo | None = None) -> list[ScoredChunk]:
    """Each chunk's score: its file's evidence plus what the chunk itself declares and says.

    ``lowered`` is ``LoweredText.of(text)``, or what makes it when it is first needed (a
    call whose counts ``memo`` holds needs none), and ``names`` each chunk's
    ``chunk_keys``, when the caller has them already; ``memo`` keeps each literal's
    ``ChunkCounts`` in this file (and where its chunks start and end) from one query to
    the next.
    """
    made: list[LoweredText] = []

    def low() -> LoweredText:
        if not made:
            made.append(lowered if isinstance(lowered, LoweredText)
                        else lowered() if lowered is not None else LoweredText.of(text))
        return made[0]

    terms_here = [t for t in terms.terms if t.root in ev.matched]
    # Keyed by literal: two words with one stem share the key of the last of them.
    keys = {t.literal: _key(t.root) for t in terms_here}
    bounds: list[tuple[Sequence[int], Sequence[int]]] = []

    def count(literal: str) -> ChunkCounts:
        if not bounds:  # where each chunk starts and ends in the text, once per call
            bounds.append(memo(("bounds",), lambda: chunk_bounds(low(), chunks))
                          if memo is not None else chunk_bounds(low(), chunks))
        found = counts_per_chunk(literal, low().text, *bounds[0])
        return dict(filter(itemgetter(1), enumerate(found)))  # the chunks holding it

    # Per term, once per file: its weight, its key, and its count in the chunks holding it.
    present = [(t.root, keys[t.literal], stats.weights[t.literal],
                (memo(t.literal, partial(count, t.literal)) if memo is not None
                 else count(t.literal)) if searched_in_bodies(t) else None)
               for t in terms_here]
    # the chunks that mention any term (the others count 0 for every term)
    said: set[int] = set()
    for *_, found in present:
        if found:
            said.update(found)
    scored = []
    if names is None:
        names = [chunk_keys(chunk) for chunk in chunks]
    wanted = {key for _, key, _, _ in present}
    # what a chunk that neither names nor mentions a term scores: its file's evidence
    bare = ev.score + 0.0 * ev.factor
    # and the terms it matched: its path's, one list for all such chunks (no caller
    # changes a chunk's list; a file of generated rules has thousands of them)
    bare_terms = list(ev.path_terms)
    for i, (chunk, (declared, enclosing)) in enumerate(zip(chunks, names, strict=True)):
        if i not in said and wanted.isdisjoint(declared) and wanted.isdisjoint(enclosing):
            # the loop below would add nothing: most chunks of a long file
            scored.append(ScoredChunk(ev.path, chunk, bare, bare_terms))
            continue
        local = declares = enclosed = mentions = 0.0
        matched: list[str] = []
        for root, key, weight, found in present:
            gain = 0.0
            if key in declared:
                gain += DECLARES * weight
                declares += DECLARES * weight
            elif key in enclosing:
                gain += ENCLOSING * weight
                enclosed += ENCLOSING * weight
            tf = found.get(i, 0) if found else 0
            if tf:
                # saturate(tf) inline; a zero count adds nothing (gain + 0.0 is gain)
                mention = weight * (tf / (tf + _K_AVERAGE))
                gain += mention
                mentions += mention
            if gain:
                local += gain
                matched.append(root)
        score = ev.score + local * ev.factor
        path_terms = [t for t in ev.path_terms if t not in matched]
        scored.append(ScoredChunk(ev.path, chunk, score, matched + path_terms, declares,
                                  enclosed, mentions))
    return scored
