"""Tier-1 lexical scores: for whole files from path and body evidence, then per chunk.

A term that names the file or a symbol the chunk declares counts most, then a directory
match, then mentions in the body (saturating, BM25-like, weighted by rarity). Tests and docs
rank below implementations unless the query is about them.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from functools import lru_cache
from itertools import accumulate

from slm_rerank.filetypes import is_changelog_path, is_doc_path, is_source_path, is_test_path
from slm_rerank.registrations import SourceHits
from slm_rerank.slicing import Chunk
from slm_rerank.terms import QueryTerms, Term, light, searched_in_bodies, split_identifier

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


#: everything but letters and digits, in any script (a CJK file name keeps its characters)
_NOT_ALNUM = re.compile(r"[\W_]")


@lru_cache(maxsize=65536)
def _key(word: str) -> str:
    return light(_NOT_ALNUM.sub("", word.lower()))


@dataclass
class FileEvidence:
    """Why a file is a candidate: path and body evidence, before chunks are looked at."""

    path: str
    path_score: float = 0.0
    body_score: float = 0.0
    factor: float = 1.0
    matched: dict[str, float] = field(default_factory=dict)
    #: the terms (as written in the query) that the path itself matches
    path_terms: list[str] = field(default_factory=list)

    @property
    def score(self) -> float:
        return (self.path_score + self.body_score) * self.factor


@dataclass
class ScoredChunk:
    path: str
    chunk: Chunk
    score: float
    matched: list[str]


def idf(df: int, n_files: int) -> float:
    return math.log(1.0 + (n_files - df + 0.5) / (df + 0.5))


def saturate(tf: int, length_ratio: float = 1.0) -> float:
    """tf / (tf + k), where k grows with the file's size relative to the average."""
    if tf <= 0:
        return 0.0
    return tf / (tf + SATURATION * (1.0 - LENGTH_B + LENGTH_B * length_ratio))


def kind_factor(path: str, terms: QueryTerms) -> float:
    """Tests, docs and other non-source text rank below implementations unless asked for."""
    if is_test_path(path):
        return 1.0 if terms.about_tests else TEST_FACTOR
    if is_changelog_path(path):
        # A changelog names every feature once: an index of the project, not its answer.
        return DOC_FACTOR if terms.about_docs else CHANGELOG_FACTOR
    if is_doc_path(path):
        return 1.0 if terms.about_docs else DOC_FACTOR
    if not is_source_path(path):
        return OTHER_FACTOR
    return 1.0


@dataclass
class TermStats:
    """Rarity of each term over the files in scope."""

    weights: dict[str, float]  # literal -> term weight * idf

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
        return cls({t.literal: t.weight * rarity.get(t.literal, typical) for t in terms.terms})


@lru_cache(maxsize=65536)
def _tokens(part: str) -> frozenset[str]:
    """Light-normalised tokens of one path component (folders repeat: cached)."""
    return frozenset(light(tok) for tok in split_identifier(part))


def _path_parts(path: str) -> tuple[str, frozenset[str], frozenset[str]]:
    folder, _, name = path.rpartition("/")
    stem_name = name.split(".")[0] if not name.startswith(".") else name
    dir_tokens = frozenset().union(*(_tokens(part) for part in folder.split("/") if part))
    return _key(stem_name), _tokens(stem_name), dir_tokens


def _names_path(path: str, named: list[tuple[str, ...]]) -> int | None:
    """Which path from the query (a traceback frame, a file name) ends like ``path``, if any."""
    parts = path.split("/")
    for index, wanted in enumerate(named):
        k = min(len(wanted), len(parts), 3)
        if k and tuple(parts[-k:]) == wanted[-k:] and (k >= 2 or len(wanted) == 1):
            return index
    return None


def _path_matches(path: str, terms: QueryTerms) -> list[tuple[Term, float]]:
    """The terms that name this file, a token of its name, or one of its folders."""
    name_key, name_tokens, dir_tokens = _path_parts(path)
    found = []
    for term in terms.terms:
        if _key(term.root) == name_key:
            found.append((term, NAMES_FILE))
        elif term.light in name_tokens:
            found.append((term, NAME_TOKEN))
        elif term.light in dir_tokens:
            found.append((term, DIRECTORY))
    return found


def score_files(terms: QueryTerms, hits: SourceHits, stats: TermStats,
                sizes: dict[str, int] | None = None) -> list[FileEvidence]:
    """Every file with any evidence, best first (ties by path, so order never follows I/O).

    ``sizes`` (bytes, for files with body matches) normalises term counts by file length.
    Path evidence is weighted by its own rarity: a term (or a file named in the query) that
    matches the paths of many files (``index``, ``conf.py``) tells little about any of them.
    """
    sizes = sizes or {}
    average = (sum(sizes.values()) / len(sizes)) if sizes else 1.0
    named = [tuple(p for p in m.replace("\\", "/").split("/") if p) for m in terms.paths]
    n_files = max(1, len(hits.files))
    path_evidence = {path: _path_matches(path, terms) for path in hits.files}
    mention = {path: _names_path(path, named) for path in hits.files} if named else {}
    path_df: dict[str, int] = {}
    for found in path_evidence.values():
        for term, _ in found:
            path_df[term.root] = path_df.get(term.root, 0) + 1
    mention_df: dict[int, int] = {}
    for index in mention.values():
        if index is not None:
            mention_df[index] = mention_df.get(index, 0) + 1
    strongest = max(stats.weights.values(), default=1.0)
    out: list[FileEvidence] = []
    for path in hits.files:
        ev = FileEvidence(path)
        for term, bonus in path_evidence[path]:
            gain = stats.weights[term.literal] * bonus * path_rarity(path_df[term.root], n_files)
            ev.path_score += gain
            ev.matched[term.root] = ev.matched.get(term.root, 0.0) + gain
            ev.path_terms.append(term.root)
        index = mention.get(path)
        if index is not None:
            ev.path_score += NAMED_PATH * strongest / mention_df[index]
        counts = hits.body_counts.get(path)
        if counts:
            ratio = sizes.get(path, average) / average if average else 1.0
            for term in terms.terms:
                tf = counts.get(term.literal, 0)
                if tf:
                    gain = stats.weights[term.literal] * saturate(tf, ratio)
                    ev.body_score += gain
                    ev.matched[term.root] = ev.matched.get(term.root, 0.0) + gain
        if not ev.matched and ev.path_score == 0:
            continue
        ev.factor = kind_factor(path, terms)
        out.append(ev)
    out.sort(key=lambda e: (-e.score, e.path))
    return out


def path_rarity(df: int, n_files: int) -> float:
    """1 for a term in one path, falling towards 0 for a term in every path."""
    return math.log(1.0 + n_files / df) / math.log(1.0 + n_files)


def score_chunks(terms: QueryTerms, stats: TermStats, ev: FileEvidence, chunks: list[Chunk],
                 text: str) -> list[ScoredChunk]:
    """Each chunk's score: its file's evidence plus what the chunk itself declares and says."""
    present: list[Term] = [t for t in terms.terms if t.root in ev.matched]
    keys = {t.literal: _key(t.root) for t in present}
    lowered = text.lower()
    # offsets[i] is where line i + 1 starts, so a chunk is one slice of the lowered text
    offsets = [0, *accumulate(len(line) for line in lowered.splitlines(keepends=True))]
    last = len(offsets) - 1
    scored = []
    for chunk in chunks:
        body = lowered[offsets[min(chunk.start_line - 1, last)]: offsets[min(chunk.end_line, last)]]
        local = 0.0
        matched: list[str] = []
        declared = {_key(name) for name in chunk.defines}
        enclosing = {_key(part) for part in (chunk.symbol or "").split(".")[:-1]}
        for term in present:
            weight = stats.weights[term.literal]
            gain = 0.0
            if keys[term.literal] in declared:
                gain += DECLARES * weight
            elif keys[term.literal] in enclosing:
                gain += ENCLOSING * weight
            if searched_in_bodies(term):
                gain += weight * saturate(body.count(term.literal))
            if gain:
                local += gain
                matched.append(term.root)
        score = ev.score + local * ev.factor
        path_terms = [t for t in ev.path_terms if t not in matched]
        scored.append(ScoredChunk(ev.path, chunk, score, matched + path_terms))
    return scored
