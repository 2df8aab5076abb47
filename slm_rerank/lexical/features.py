"""Features of a candidate file: what the lexical stage knows of it, split by where it came
from, as numbers a learned ranker weighs (``lexical/ranker.py``).

A file is described by its evidence (``FileEvidence.parts``: a term naming the file, a token
of its name, a folder, a path the query names, mentions in its body, and a whole-file BM25
of the matching pass's counts, whose share and rank are taken among every file with
evidence), by its best chunk (what that chunk declares, its own mentions, its length, how
much of it is comment or docstring), by its kind and path (a test, vendored code, a type
stub, a generated bundle), by how the lexical order placed it, and, when the repository's
history was read,
by how often and how recently it changed and whether it changed with the files the query
names. Scores are divided by the query's best chunk score, so a long query's larger sums
and a title's small ones weigh alike.

The names in ``FEATURES`` are the model file's vocabulary: a model names the features it
was trained on, and one naming a feature this version does not compute is refused.
"""

from __future__ import annotations

import math
import re
from bisect import bisect_right
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache, partial
from typing import Protocol

from slm_rerank.lexical.chunk_memory import SLICED_MEMO, SlicedFile
from slm_rerank.lexical.file_scores import FileEvidence
from slm_rerank.lexical.filetypes import path_kind
from slm_rerank.lexical.scores import ScoredChunk, TermStats, name_tokens
from slm_rerank.lexical.terms import QueryTerms, split_identifier

#: every feature this version computes, in a fixed order, with what it means (for ``-v``)
FEATURES: dict[str, str] = {
    "lexical": "lexical score (share of the best)",
    "lexical_rank": "lexical rank",
    "file_bm25": "the query's words over the whole file (share of the best)",
    "file_bm25_rank": "rank by the query's words over the whole file",
    "names_file": "path names a query term",
    "name_token": "a word of the file name is in the query",
    "directory": "a folder name is in the query",
    "name_stem": "a word of the file name shares a query word's stem",
    "digit_name": "a word with digits of the file name is in the query",
    "named_path": "the query names this file",
    "body": "the query's words in the file",
    "declares": "the chunk defines a query term",
    "enclosing": "the chunk's class is a query term",
    "mentions": "the query's words in the chunk",
    "coverage": "share of the query's terms found",
    "rare_term": "its rarest matching term",
    "common_name": "its path matches a common word",
    "kind_test": "a test file",
    "kind_doc": "a doc page",
    "kind_changelog": "a changelog",
    "kind_other": "a config or data file",
    "test_like": "a test, benchmark or example by its path",
    "vendored": "vendored or third-party code",
    "stub": "a type declaration stub (.pyi, .d.ts)",
    "bundle": "a generated single-file copy of the sources (amalgamated, dist/, .min.js)",
    "chunk_lines": "chunk length",
    "chunk_comment": "comment or docstring",
    "chunk_defines": "definitions in the chunk",
    "file_lines": "file length",
    "depth": "folder depth",
    "changes": "changes in recent history",
    "recent": "changed lately",
    "together": "changed with files the query names",
    "messages": "the messages of the commits that changed it say the query's words",
    "test_partner": "a test file named for it matches the query",
    "test_partner_top": "the best-matching test file is named for it",
    "first_line": "lexical score for the query's first line alone (share of the best)",
    "first_line_top": "first for the query's first line alone",
    "strong_terms": "lexical score for the query's identifiers alone (share of the best)",
    "strong_top": "first for the query's identifiers alone",
}

#: the history features: 0 when no history was read
HISTORY_FEATURES = frozenset({"changes", "recent", "together", "messages"})
#: the features of how the query's first line, or its strong terms, alone rank the
#: candidates (``first_line.py``)
FIRST_LINE_FEATURES = frozenset({"first_line", "first_line_top"})
STRONG_FEATURES = frozenset({"strong_terms", "strong_top"})

#: words of a path that mark test, benchmark and example code the file kinds miss (a test
#: module inside a Java ``src/`` tree, ``FooTest.java``, ``bench/``)
TEST_LIKE = frozenset({"test", "tests", "testing", "bench", "benches", "benchmark",
                       "benchmarks", "example", "examples", "fixture", "fixtures", "mock",
                       "mocks", "spec", "specs", "testdata", "testutil", "e2e", "jmh"})
VENDORED = frozenset({"vendor", "vendored", "third_party", "thirdparty", "3rdparty",
                      "external", "extern", "node_modules", "deps", "_vendor", "_vendored"})
#: folders and file name words of a generated copy of a project's sources: one file that
#: holds all of them (``single_include/json.hpp``, ``catch_amalgamated.cpp``) or a build's
#: output (``dist/``), which matches every query word its sources match
BUNDLE_FOLDERS = frozenset({"single_include", "amalgamated", "amalgamation", "dist", "bundle",
                            "bundles"})
BUNDLE_WORDS = frozenset({"amalgamated", "amalgamation", "bundle", "bundled"})
STUB_SUFFIXES = (".pyi", ".d.ts", ".d.mts", ".d.cts")

#: shortest stem that may match the start of a word of a file's name
MIN_STEM = 5

#: the marks a test file's name puts around the name of what it tests, at a separator or
#: a capital: ``test_x``, ``tests-x``, ``TestX``, ``x_test``, ``x-spec``, ``XTest``,
#: ``XTests`` (``x.test.js`` and ``x.spec.ts`` have ``x`` as their stem already), never
#: inside a word (``test_latest.py`` tests ``latest``)
_TEST_MARK = re.compile(r"^(?:[Tt]ests?[_-]|Tests?(?=[A-Z0-9]))|"
                        r"(?:[_-](?:[Tt]ests?|[Ss]pecs?)|(?<=[a-z0-9])(?:Tests?|Specs?))$")
#: names too generic to tie a test file to one source file
_GENERIC_NAMES = frozenset({"__init__", "index", "main", "mod", "lib", "conftest", "utils",
                            "util", "common", "helpers", "helper", "test", "tests", "spec",
                            "setup"})

_COMMENT_STARTS = ("#", "//", "/*", "*", "--", ";", "%", '"""', "'''", "<!--")


class History(Protocol):
    """What the features read of a repository's recent history (``lexical/history.py``)."""

    @property
    def commits(self) -> int: ...

    def changes(self, path: str) -> int: ...

    def age(self, path: str) -> int | None: ...

    def together(self, path: str, others: set[str]) -> int: ...

    def told(self, paths: list[str], words: set[str]) -> list[tuple[float, tuple[str, ...]]]: ...


@dataclass(frozen=True)
class FirstLine:
    """How a part of the query alone ranks the candidates (``first_line.py``): each file's
    best chunk score as a share of the best one's (1.0: first, with any tied there; empty
    when the part has no searchable word or matches nothing)."""

    shares: Mapping[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class Candidate:
    """One candidate file: its path, its best chunk (an index into the ranked chunks) and
    its feature values, in ``FEATURES`` order."""

    path: str
    best: int
    values: tuple[float, ...]
    #: the query's words (light forms) the messages of the commits that changed it say, the
    #: most telling first (what ``messages`` counts, for ``-v``)
    said: tuple[str, ...] = ()

    def named(self) -> dict[str, float]:
        return dict(zip(FEATURES, self.values, strict=True))


#: a word of a name with its digits kept on: ``NewParserV2`` gives new, parser, v2
_DIGIT_CAMEL = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+\d*|[A-Z]+\d*|\d+")
_NOT_ALNUM = re.compile(r"[^A-Za-z0-9]+")
_DIGIT = re.compile(r"\d")


@lru_cache(maxsize=65536)
def digit_words(path: str) -> frozenset[str]:
    """The words of a file's name that hold letters and digits (``parser_v2.go``: v2), which
    the lexical stage's tokens split apart (parser, v, 2)."""
    name = path.rpartition("/")[2]
    stem = name.split(".")[0] if not name.startswith(".") else name
    words = (w.lower() for piece in _NOT_ALNUM.split(stem) for w in _DIGIT_CAMEL.findall(piece))
    return frozenset(w for w in words if _DIGIT.search(w) and not w.isdigit())


def split_words(folder: str) -> set[str]:
    return {w.lower() for w in split_identifier(folder)}


def comment_share(text: str, start: int, end: int) -> float:
    """The share of lines ``start..end`` (1-based, inclusive) of ``text`` that are comment
    or docstring: a line that starts with a comment marker, or one inside a triple-quoted
    block."""
    lines = text.split("\n", end)[start - 1:end]
    if not lines:
        return 0.0
    inside = False
    said = 0
    for line in lines:
        stripped = line.strip()
        quotes = stripped.count('"""') + stripped.count("'''")
        if inside or stripped.startswith(_COMMENT_STARTS):
            said += 1
        if quotes % 2:
            inside = not inside
    return said / len(lines)


def _share(value: float, top: float) -> float:
    return value / top if top > 0 else 0.0


@dataclass(frozen=True, slots=True)
class _PathFacts:
    """What a candidate's path alone says (a warm process asks of the same paths query
    after query)."""

    tokens: frozenset[str]
    kind: str
    test_like: float
    vendored: float
    stub: float
    bundle: float
    depth: float


@lru_cache(maxsize=65536)
def _path_facts(path: str) -> _PathFacts:
    tokens = name_tokens(path)
    folders = path.lower().split("/")[:-1]
    words = set(tokens).union(*(split_words(f) for f in folders)) if folders else tokens
    return _PathFacts(
        tokens, path_kind(path),
        float(not TEST_LIKE.isdisjoint(words)),
        float(not VENDORED.isdisjoint(folders)),
        float(path.lower().endswith(STUB_SUFFIXES)),
        float(not BUNDLE_FOLDERS.isdisjoint(folders) or not BUNDLE_WORDS.isdisjoint(tokens)
              or path.lower().endswith((".min.js", ".bundle.js"))),
        float(path.count("/")))


@lru_cache(maxsize=65536)
def partner_name(path: str, is_test: bool) -> str:
    """The name that ties a test file to the source file it tests: the file's stem, lower
    case, less a test file's marks (``tests/test_parser.py``, ``parser_test.go``,
    ``ParserTest.java``, ``parser.test.js`` and ``src/parser.rs`` all give ``parser``); ""
    for a name too short or too generic to tie one file to another."""
    stem = path.rpartition("/")[2].split(".", 1)[0]
    if is_test and stem.lower() not in _GENERIC_NAMES:
        stem = _TEST_MARK.sub("", stem)
    stem = stem.lower()
    return "" if len(stem) < 3 or stem in _GENERIC_NAMES else stem


def _test_partners(chunks: Sequence[ScoredChunk], best: Mapping[str, int], top: float
                   ) -> tuple[dict[str, float], set[str]]:
    """The test files among the candidates, by ``partner_name``: the best lexical share of
    the ones with each name, and the names of the lexically best test files (tied ones
    alike)."""
    shares: dict[str, float] = {}
    leaders: set[str] = set()
    leading = -math.inf
    for path, index in best.items():
        facts = _path_facts(path)
        if facts.kind != "test" and not facts.test_like:
            continue
        name = partner_name(path, True)
        share = _share(chunks[index].score, top)
        if share > leading:
            leaders, leading = {name}, share
        elif share == leading:
            leaders.add(name)
        if name and share > shares.get(name, 0.0):
            shares[name] = share
    leaders.discard("")
    return shares, leaders


def _file_lines(text: str) -> int:
    return text.count("\n") + 1 if text else 1


def _messages(history: History | None, paths: list[str], terms: QueryTerms
              ) -> dict[str, tuple[float, tuple[str, ...]]]:
    """path -> how strongly the messages of the commits that changed it say the query's
    terms (``FileHistory.told``), as a share of the candidate they say most of, and which
    terms they say."""
    if history is None or not history.commits:
        return {}
    words = {t.light for t in terms.terms if len(t.root) >= 3 and not t.root.isdigit()}
    told = history.told(paths, words)
    top = max((v for v, _ in told), default=0.0)
    return ({p: (v / top, said) for p, (v, said) in zip(paths, told, strict=True) if v > 0}
            if top > 0 else {})


def candidates(chunks: Sequence[ScoredChunk], evidence: Mapping[str, FileEvidence],
               terms: QueryTerms, stats: TermStats, texts: Mapping[str, str],
               history: History | None = None,
               files: Mapping[str, SlicedFile] | None = None,
               first: FirstLine | None = None,
               strong: FirstLine | None = None) -> list[Candidate]:
    """The features of each file among ``chunks`` (best first, as ``rank_chunks`` orders
    them), in the order their best chunks come.

    ``files`` (path -> the sliced file whose text ``texts`` holds) lets what a file's text
    alone gives (its length, a chunk's comment lines) be kept from one query to the next
    (``chunk_memory.SLICED_MEMO``). ``first``: what the query's first line alone ranks
    (``first_line.first_line_view``); None for a one-line query, whose own order it is.

    The judge's verdict is no feature here: only the head is judged, after this order is
    made, and fusion (``model/fusion.py``) adds it to the learned score with its own
    coefficient, the judge weight.
    """
    best: dict[str, int] = {}
    for i, item in enumerate(chunks):
        best.setdefault(item.path, i)
    top = chunks[0].score if chunks and chunks[0].score > 0 else 1.0
    total = sum(stats.weights.values()) or 1.0
    strongest = max(stats.weights.values(), default=1.0) or 1.0
    named = {p for p in best
             if evidence.get(p) and (evidence[p].parts.get("named_path")
                                     or evidence[p].parts.get("names_file"))}
    stems = {t.stem: stats.weights.get(t.literal, 0.0) for t in terms.terms
             if len(t.stem) >= MIN_STEM}
    # the whole-file scores of every file with evidence, for each candidate's share and rank
    masses = sorted(ev.file_bm25 for ev in evidence.values())
    most = masses[-1] if masses else 0.0
    with_digits = [t.root for t in terms.terms if _DIGIT.search(t.root) and not t.root.isdigit()]
    told = _messages(history, list(best), terms)
    tests, leading_tests = _test_partners(chunks, best, top)
    weights = stats.weights
    out = []
    above = 0  # files whose best chunk scores strictly higher: tied files share a rank
    previous = math.inf
    for position, (path, index) in enumerate(best.items()):
        if chunks[index].score < previous:
            above, previous = position, chunks[index].score
        rank = above
        item = chunks[index]
        ev = evidence.get(path) or FileEvidence(path)
        parts = ev.parts
        facts = _path_facts(path)
        kind = facts.kind
        chunk = item.chunk
        text = texts.get(path, "")
        sliced = files.get(path) if files is not None else None
        if sliced is not None and sliced.text is not text:
            sliced = None  # not the text the features are of
        lines = chunk.end_line - chunk.start_line + 1
        ev_matched, ev_path_terms = ev.matched, ev.path_terms
        matched = {t.literal for t in terms.terms if t.root in ev_matched}
        rarities = [weights[t.literal] for t in terms.terms
                    if t.root in ev_matched and t.literal in weights]
        path_rarity = [weights[t.literal] for t in terms.terms
                       if t.root in ev_path_terms and t.literal in weights]
        file_lines = (_file_lines(text) if sliced is None
                      else SLICED_MEMO.get(sliced, ("lines",), partial(_file_lines, text)))
        if not text:
            comment = 0.0
        elif sliced is None:
            comment = comment_share(text, chunk.start_line, chunk.end_line)
        else:
            comment = SLICED_MEMO.get(
                sliced, ("comment", chunk.start_line, chunk.end_line),
                partial(comment_share, text, chunk.start_line, chunk.end_line))
        tokens = facts.tokens
        stemmed = max((w for stem, w in stems.items()
                       if any(tok.startswith(stem) for tok in tokens)), default=0.0)
        mass = ev.file_bm25  # as ``masses`` read it
        digits = digit_words(path) if with_digits else frozenset()
        # a source file's name, when some test file may be named for it
        is_test = kind == "test" or bool(facts.test_like)
        partner = partner_name(path, False) if tests and not is_test else ""
        own = _share(item.score, top)
        values: dict[str, float] = {
            "lexical": own,
            "lexical_rank": math.log1p(rank),
            "file_bm25": _share(mass, most),
            "file_bm25_rank": math.log1p(len(masses) - bisect_right(masses, mass)),
            "names_file": _share(parts.get("names_file", 0.0), top),
            "name_token": _share(parts.get("name_token", 0.0), top),
            "directory": _share(parts.get("directory", 0.0), top),
            "name_stem": stemmed / strongest,
            "digit_name": float(any(w in root for w in digits for root in with_digits)),
            "named_path": _share(parts.get("named_path", 0.0), top),
            "body": _share(parts.get("body", 0.0), top),
            "declares": _share(item.declares, top),
            "enclosing": _share(item.enclosing, top),
            "mentions": _share(item.mentions, top),
            "coverage": sum(weights.get(lit, 0.0) for lit in matched) / total,
            "rare_term": max(rarities, default=0.0) / strongest,
            "common_name": (1.0 - min(path_rarity) / strongest) if path_rarity else 0.0,
            "kind_test": float(kind == "test"),
            "kind_doc": float(kind == "doc"),
            "kind_changelog": float(kind == "changelog"),
            "kind_other": float(kind == "other"),
            "test_like": facts.test_like,
            "vendored": facts.vendored,
            "stub": facts.stub,
            "bundle": facts.bundle,
            "chunk_lines": math.log1p(lines),
            "chunk_comment": comment,
            "chunk_defines": math.log1p(len(chunk.defines)),
            "file_lines": math.log1p(file_lines),
            "depth": facts.depth,
            "changes": 0.0,
            "recent": 0.0,
            "together": 0.0,
            "messages": 0.0,
            "test_partner": tests.get(partner, 0.0) if partner else 0.0,
            "test_partner_top": float(partner in leading_tests),
            "first_line": own if first is None else first.shares.get(path, 0.0),
            "strong_terms": own if strong is None else strong.shares.get(path, 0.0),
        }
        # first for a view: its best share, shared by the files tied there
        values["first_line_top"] = float(values["first_line"] >= 1.0)
        values["strong_top"] = float(values["strong_terms"] >= 1.0)
        said: tuple[str, ...] = ()
        if history is not None and history.commits:
            values["changes"] = math.log1p(history.changes(path))
            age = history.age(path)
            values["recent"] = 1.0 / (1.0 + age) if age is not None else 0.0
            others = named - {path}
            values["together"] = math.log1p(history.together(path, others)) if others else 0.0
            values["messages"], said = told.get(path, (0.0, ()))
        out.append(Candidate(path, index, tuple(values[name] for name in FEATURES), said))
    return out

