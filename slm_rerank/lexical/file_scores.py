"""Each file's evidence before its chunks are looked at: a term naming it, a word of its
name or a folder (``_PathMatcher``), a path the query names, and its body counts, summed
into ``FileEvidence`` by ``score_files``; the whole-file BM25 the learned ranker reads.

The constants and the term weights are ``scores``'s, which scores the chunks.
"""

from __future__ import annotations

import math
from functools import lru_cache

from slm_rerank.lexical.filetypes import path_kind
from slm_rerank.lexical.scores import (
    DIRECTORY,
    FILE_B,
    FILE_K1,
    LENGTH_B,
    NAME_TOKEN,
    NAMED_PATH,
    NAMES_FILE,
    SATURATION,
    TermStats,
    _factor_of_kind,
    _key,
    _tokens,
)
from slm_rerank.lexical.terms import QueryTerms, Term
from slm_rerank.registrations import SourceHits

#: where a file's path score comes from, by the bonus ``_PathMatcher`` gives it
_PATH_PART = {NAMES_FILE: "names_file", NAME_TOKEN: "name_token", DIRECTORY: "directory"}


class FileEvidence:
    """Why a file is a candidate: path and body evidence, before chunks are looked at.

    One for every file with any evidence: on a large tree and a long query, most of its
    files (ten copies of sympy: 12,000 a query). ``score_files`` gives each its scores
    and what it needs to say where they came from; ``matched``, ``path_terms`` and
    ``parts`` are worked out when first asked for, which the few files a query chunks
    are: a dict or two a file for all of them took 9 MiB a query there (issue 30).
    """

    __slots__ = ("path", "path_score", "body_score", "factor", "_matched", "_path_terms",
                 "_parts", "_source")

    def __init__(self, path: str, path_score: float = 0.0, body_score: float = 0.0,
                 factor: float = 1.0, matched: dict[str, float] | None = None,
                 path_terms: list[str] | None = None, parts: dict[str, float] | None = None,
                 ) -> None:
        self.path = path
        self.path_score = path_score
        self.body_score = body_score
        self.factor = factor
        self._matched = matched
        self._path_terms = path_terms
        self._parts = parts
        self._source: _Sums | None = None

    @classmethod
    def summed(cls, path: str, path_score: float, body_score: float, factor: float,
               sums: _Sums) -> FileEvidence:
        """A file's evidence whose ``matched``, ``path_terms`` and ``parts`` ``sums`` works
        out when first asked for."""
        evidence = cls(path, path_score, body_score, factor)
        evidence._source = sums
        return evidence

    @property
    def score(self) -> float:
        return (self.path_score + self.body_score) * self.factor

    @property
    def matched(self) -> dict[str, float]:
        """term root -> what it added to the file's score (path and body)"""
        if self._matched is None:
            self._work_out()
        return self._matched  # type: ignore[return-value]  # worked out

    @property
    def path_terms(self) -> list[str]:
        """the terms (as written in the query) that the path itself matches"""
        if self._path_terms is None:
            self._work_out()
        return self._path_terms  # type: ignore[return-value]  # worked out

    @property
    def parts(self) -> dict[str, float]:
        """the score by where it came from (``PARTS``): the learned ranker's features"""
        if self._parts is None:
            self._work_out()
        return self._parts  # type: ignore[return-value]  # worked out

    @property
    def file_bm25(self) -> float:
        """``parts["file_bm25"]`` (0 without one), summed alone while the parts are not
        worked out: the learned ranker asks every file's, to rank each candidate's."""
        if self._parts is None and self._source is not None:
            return self._source.file_bm25()
        return self.parts.get("file_bm25", 0.0)

    def _work_out(self) -> None:
        """Sums what was left to be summed when asked for (``summed``), or makes empty
        what the caller gave none of."""
        source = self._source
        if source is not None:
            self._source = None
            self._matched, self._path_terms, self._parts = source.work_out()
            return
        if self._matched is None:
            self._matched = {}
        if self._path_terms is None:
            self._path_terms = []
        if self._parts is None:
            self._parts = {}

    def __repr__(self) -> str:
        return (f"FileEvidence(path={self.path!r}, path_score={self.path_score!r}, "
                f"body_score={self.body_score!r}, factor={self.factor!r}, "
                f"matched={self.matched!r}, path_terms={self.path_terms!r}, "
                f"parts={self.parts!r})")

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, FileEvidence):
            return NotImplemented
        return (self.path, self.path_score, self.body_score, self.factor, self.matched,
                self.path_terms, self.parts) == (
                    other.path, other.path_score, other.body_score, other.factor,
                    other.matched, other.path_terms, other.parts)

    __hash__ = None  # type: ignore[assignment]  # mutable, as the dataclass it was


@lru_cache(maxsize=65536)
def _folder_tokens(folder: str) -> tuple[str, ...]:
    """The tokens of every component of ``folder``, each once (a tree's files share a few
    folders). A tuple: a frozenset took 225 bytes a folder, 0.9 MiB kept for the 4,200
    folders of ten copies of sympy, and a folder has a few tokens only."""
    return tuple(dict.fromkeys(token for part in folder.split("/") if part
                               for token in _tokens(part)))


@lru_cache(maxsize=65536)
def _name_parts(name: str) -> tuple[str, frozenset[str]]:
    """A file name's key and tokens. Each query asks of every path in scope: a long-lived
    process keeps them by name (and ``_folder_tokens`` by folder), not by path, as a tree
    holds far fewer names and folders than paths (issue 30)."""
    stem_name = name.split(".")[0] if not name.startswith(".") else name
    return _key(stem_name), _tokens(stem_name)


def _names_path(path: str, named: list[tuple[str, ...]]) -> int | None:
    """Which path from the query (a traceback frame, a file name) ends like ``path``, if any."""
    parts = path.split("/")
    for index, wanted in enumerate(named):
        k = min(len(wanted), len(parts), 3)
        if k and tuple(parts[-k:]) == wanted[-k:] and (k >= 2 or len(wanted) == 1):
            return index
    return None


#: a path no term matches
_NO_MATCH: list[tuple[Term, float]] = []


class _PathMatcher:
    """The terms that name a file, a token of its name, or one of its folders.

    Most paths match no term: one set test per path says so before any per-term loop.
    """

    def __init__(self, terms: QueryTerms) -> None:
        self.terms = [(term, _key(term.root), term.light) for term in terms.terms]
        self.keys = {key for _, key, _ in self.terms}
        self.lights = {term.light for term in terms.terms}

    def __call__(self, path: str) -> list[tuple[Term, float]]:
        folder, _, name = path.rpartition("/")
        name_key, name_tokens = _name_parts(name)
        dir_tokens = _folder_tokens(folder)
        if name_key not in self.keys and self.lights.isdisjoint(name_tokens) \
                and self.lights.isdisjoint(dir_tokens):
            return _NO_MATCH
        found = []
        for term, key, token in self.terms:
            if key == name_key:
                found.append((term, NAMES_FILE))
            elif token in name_tokens:
                found.append((term, NAME_TOKEN))
            elif token in dir_tokens:
                found.append((term, DIRECTORY))
        return found


#: one planned term of a file's body sum: (literal, root, weight, rarity or None)
_Planned = tuple[str, str, float, "float | None"]


class _Sums:
    """What one file's evidence is summed from: the terms its path matches (each with its
    bonus), the gain of the query's path it is (None: none), its body counts with the
    query's terms they hold (``_body_plan``), and its length over the average. The
    weights by literal and the path gains by root are the query's, shared by every file."""

    __slots__ = ("on_path", "named", "counts", "plan", "ratio", "weights", "path_gain")

    def __init__(self, on_path: list[tuple[Term, float]], named: float | None,
                 counts: dict[str, int] | None, plan: list[_Planned], ratio: float,
                 weights: dict[str, float], path_gain: dict[str, float]) -> None:
        self.on_path, self.named, self.counts, self.plan = on_path, named, counts, plan
        self.ratio, self.weights, self.path_gain = ratio, weights, path_gain

    def scores(self) -> tuple[float, float, bool]:
        """The path score, the body score, and whether any term matched (path or body)."""
        weights, path_gain = self.weights, self.path_gain
        path_score = body_score = 0.0
        for term, bonus in self.on_path:
            path_score += weights[term.literal] * bonus * path_gain[term.root]
        if self.named is not None:
            path_score += self.named
        found = bool(self.on_path)
        counts = self.counts
        if counts:
            sat = SATURATION * (1.0 - LENGTH_B + LENGTH_B * self.ratio)
            for literal, _, weight, _ in self.plan:
                tf = counts[literal]
                if tf:
                    body_score += weight * (tf / (tf + sat))
                    found = True
        return path_score, body_score, found

    def work_out(self) -> tuple[dict[str, float], list[str], dict[str, float]]:
        """``matched``, ``path_terms`` and ``parts``, summed as ``scores`` sums (the same
        floats, in the same order)."""
        weights, path_gain = self.weights, self.path_gain
        matched: dict[str, float] = {}
        path_terms: list[str] = []
        parts: dict[str, float] = {}
        for term, bonus in self.on_path:
            root = term.root
            gain = weights[term.literal] * bonus * path_gain[root]
            matched[root] = matched.get(root, 0.0) + gain
            path_terms.append(root)
            part = _PATH_PART[bonus]
            parts[part] = parts.get(part, 0.0) + gain
        if self.named is not None:
            parts["named_path"] = self.named
        counts = self.counts
        if counts:
            # saturate's constant for this file's length
            sat = SATURATION * (1.0 - LENGTH_B + LENGTH_B * self.ratio)
            body_score = 0.0
            for literal, root, weight, _ in self.plan:
                tf = counts[literal]
                if tf:
                    gain = weight * (tf / (tf + sat))
                    body_score += gain
                    matched[root] = matched.get(root, 0.0) + gain
            parts["body"] = body_score
            parts["file_bm25"] = self.file_bm25()
        return matched, path_terms, parts

    def file_bm25(self) -> float:
        """The file's whole-file BM25 (``parts["file_bm25"]``), summed as ``file_bm25_term``
        sums it: each literal once, in query order."""
        counts = self.counts
        if not counts:
            return 0.0
        k = FILE_K1 * (1.0 - FILE_B + FILE_B * self.ratio)  # file_bm25_k for its length
        mass = 0.0
        for literal, _, _, rare in self.plan:
            tf = counts[literal]
            if tf and rare is not None:  # a literal's later terms add none
                mass += rare * tf * (FILE_K1 + 1.0) / (tf + k)
        return mass


def score_files(terms: QueryTerms, hits: SourceHits, stats: TermStats,
                sizes: dict[str, int] | None = None) -> list[FileEvidence]:
    """Every file with any evidence, best first (ties by path, so order never follows I/O).

    ``sizes`` (bytes, for files with body matches) normalises term counts by file length.
    Path evidence is weighted by its own rarity: a term (or a file named in the query) that
    matches the paths of many files (``index``, ``conf.py``) tells little about any of them.

    What depends on the query alone (a term's gain for a path match, the order a file's
    found terms are summed in, each kind's factor) is worked out once, not per file; the
    sums are made as ``saturate``, ``path_rarity`` and ``file_bm25_term`` make them.
    A file's ``parts`` and ``matched`` are summed only when asked for (``_Sums``).
    """
    sizes = sizes or {}
    average = (sum(sizes.values()) / len(sizes)) if sizes else 1.0
    named = [tuple(p for p in m.replace("\\", "/").split("/") if p) for m in terms.paths]
    n_files = max(1, len(hits.files))
    path_matches = _PathMatcher(terms)
    # the files whose path matches a term, and those a path in the query names: few
    path_evidence = {path: found for path in hits.files if (found := path_matches(path))}
    mention = {path: index for path in hits.files
               if (index := _names_path(path, named)) is not None} if named else {}
    path_df: dict[str, int] = {}
    for found in path_evidence.values():
        for term, _ in found:
            path_df[term.root] = path_df.get(term.root, 0) + 1
    mention_df: dict[int, int] = {}
    for index in mention.values():
        mention_df[index] = mention_df.get(index, 0) + 1
    strongest = max(stats.weights.values(), default=1.0)
    weights = stats.weights
    # a path match's gain depends on the term and the bonus, not on the file
    path_gain = {root: path_rarity(df, n_files) for root, df in path_df.items()}
    factors = {kind: _factor_of_kind(kind, terms)
               for kind in ("test", "changelog", "doc", "other", "source")}
    # the terms a file's counts hold, in query order (the order the sums are made in), each
    # with what its sums need; files share a few sets of found literals
    plans: dict[tuple[str, ...], list[_Planned]] = {}
    by_literal = _terms_by_literal(terms)
    no_plan: list[_Planned] = []
    out: list[FileEvidence] = []
    for path in hits.files:
        counts = hits.body_counts.get(path)
        index = mention.get(path)
        on_path = path_evidence.get(path, _NO_MATCH)
        if not (counts or on_path or index is not None):
            continue  # no evidence of any kind: most of a large tree
        plan = no_plan
        ratio = 1.0
        if counts:
            ratio = sizes.get(path, average) / average if average else 1.0
            literals = tuple(counts)
            plan = plans.get(literals)  # type: ignore[assignment]
            if plan is None:
                plan = plans[literals] = _body_plan(literals, terms, by_literal, weights,
                                                 stats.rarity)
        sums = _Sums(on_path, None if index is None
                     else NAMED_PATH * strongest / mention_df[index],
                     counts, plan, ratio, weights, path_gain)
        path_score, body_score, any_term = sums.scores()
        if not any_term and path_score == 0:
            continue
        out.append(FileEvidence.summed(path, path_score, body_score,
                                       factors[path_kind(path)], sums))
    out.sort(key=lambda e: (-e.score, e.path))
    return out


def _terms_by_literal(terms: QueryTerms) -> dict[str, list[int]]:
    """Each literal's terms, as indices into ``terms.terms``."""
    by_literal: dict[str, list[int]] = {}
    for i, term in enumerate(terms.terms):
        by_literal.setdefault(term.literal, []).append(i)
    return by_literal


def _body_plan(found: tuple[str, ...], terms: QueryTerms, by_literal: dict[str, list[int]],
               weights: dict[str, float], rarity: dict[str, float]
               ) -> list[tuple[str, str, float, float | None]]:
    """For a file whose counts hold the literals ``found``: the terms to add up, in query
    order, each as (literal, root, weight, rarity for the file's BM25 or None: a literal's
    later terms, and one not searched in bodies, add none)."""
    indices = sorted(i for literal in found for i in by_literal.get(literal, ()))
    plan = []
    for i in indices:
        term = terms.terms[i]
        first = by_literal[term.literal][0] == i
        plan.append((term.literal, term.root, weights[term.literal],
                     rarity[term.literal] if first and term.literal in rarity else None))
    return plan


def file_bm25(counts: dict[str, int], rarity: dict[str, float], length_ratio: float) -> float:
    """Whole-file BM25 of one file from the counts the matching pass made: every query
    literal once, however many definitions of the file its occurrences are spread over
    (the chunk scores see one definition at a time). ``score_files`` sums the same terms
    in its own pass over the counts, in query order (``FileEvidence.parts["file_bm25"]``)."""
    k = file_bm25_k(length_ratio)
    return sum(file_bm25_term(rarity[literal], counts[literal], k)
               for literal in rarity if counts.get(literal, 0) > 0)


def file_bm25_k(length_ratio: float) -> float:
    """BM25's saturation constant for a file ``length_ratio`` times the average length."""
    return FILE_K1 * (1.0 - FILE_B + FILE_B * length_ratio)


def file_bm25_term(rarity: float, tf: int, k: float) -> float:
    """One term's share of a file's BM25: its rarity, saturated by its count."""
    return rarity * tf * (FILE_K1 + 1.0) / (tf + k)


def path_rarity(df: int, n_files: int) -> float:
    """1 for a term in one path, falling towards 0 for a term in every path."""
    return math.log(1.0 + n_files / df) / math.log(1.0 + n_files)
