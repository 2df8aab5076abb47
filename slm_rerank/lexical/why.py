"""Why the learned ranker put a file where it did, in words (``-v`` and JSON's ``why``).

``ranker.explain`` picks the few features that moved a file's score most (``Placed.why``:
the feature and its signed effect); this says each of them the way a person reads it, from
the file's feature values and the query's terms it matched: "path names 'templating'",
"defines 'find_best_app'", "comment or docstring (80 % of the chunk)", "a test file".
A feature is said whatever the sign of its effect: "a test file" with -0.9 is why it fell,
"not a test file" with +0.3 why it did not.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from slm_rerank.lexical.features import FEATURES, MIN_STEM, digit_words
from slm_rerank.lexical.file_scores import FileEvidence
from slm_rerank.lexical.gather import Gathered
from slm_rerank.lexical.rank import Ranked
from slm_rerank.lexical.ranker import Placed
from slm_rerank.lexical.scores import ScoredChunk, TermStats, name_tokens
from slm_rerank.lexical.terms import QueryTerms
from slm_rerank.report import Citation, OrderInfo, Reason, display_path

#: how many of a feature's terms a reason names
NAMED_TERMS = 3


class _File:
    """What the reasons of one file read: its feature values, evidence, best chunk, and
    the query's terms and their rarity."""

    def __init__(self, placed: Placed, evidence: FileEvidence | None,
                 best: ScoredChunk | None, terms: QueryTerms, stats: TermStats) -> None:
        self.placed = placed
        self.evidence = evidence or FileEvidence(placed.path)
        self.best = best
        self.terms = terms
        self.stats = stats
        self.rarity = {t.root: stats.weights.get(t.literal, 0.0) for t in terms.terms}

    def value(self, feature: str) -> float:
        return self.placed.value(feature)

    def path_terms(self, where: str) -> list[str]:
        """The query's terms the path matches, those found in ``where`` ("name", "folder")
        first; all of them when none is found there as written."""
        path = self.placed.path.lower()
        folder, _, name = path.rpartition("/")
        part = name if where == "name" else folder
        terms = list(dict.fromkeys(self.evidence.path_terms))
        there = [t for t in terms if t.lower() in part]
        return there or terms

    def body_terms(self) -> list[str]:
        """The query's terms found in the file's text, rarest first."""
        found = [t for t in self.evidence.matched if t not in self.evidence.path_terms]
        return sorted(found, key=lambda t: -self.rarity.get(t, 0.0))

    def declared(self) -> list[str]:
        """The chunk's definitions that are query terms."""
        if self.best is None:
            return []
        roots = {_key(t.root) for t in self.terms.terms}
        return [name for name in self.best.chunk.defines if _key(name) in roots]

    def enclosing(self) -> str | None:
        if self.best is None or not self.best.chunk.symbol:
            return None
        parts = self.best.chunk.symbol.split(".")[:-1]
        return ".".join(parts) or None


def _key(word: str) -> str:
    return "".join(ch for ch in word.lower() if ch.isalnum())


def _quoted(words: list[str]) -> str:
    shown = [f"'{w}'" for w in words[:NAMED_TERMS]]
    more = len(words) - len(shown)
    return ", ".join(shown) + (f" (+{more})" if more > 0 else "")


def _percent(share: float) -> str:
    return f"{round(share * 100)} %"


def _count(value: float) -> int:
    """A count a feature holds as log1p(count)."""
    return max(0, round(math.expm1(value)))


def _path_names(f: _File) -> str:
    terms = f.path_terms("name")
    if not terms:
        return "path names no query term"
    rarest = max(f.rarity.values(), default=0.0)
    rare = rarest > 0 and f.rarity.get(terms[0], 0.0) >= rarest
    return f"path names {_quoted(terms)}" + (" (rare here)" if rare else "")


def _name_token(f: _File) -> str:
    terms = f.path_terms("name")
    return (f"file name has {_quoted(terms)}" if terms
            else "no word of the file name is in the query")


def _directory(f: _File) -> str:
    terms = f.path_terms("folder")
    return f"folder {_quoted(terms)}" if terms and f.value("directory") else \
        "no folder name is in the query"


def _name_stem(f: _File) -> str:
    words = name_tokens(f.placed.path)
    shared = [t.root for t in f.terms.terms
              if len(t.stem) >= MIN_STEM and any(w.startswith(t.stem) for w in words)]
    if not shared or not f.value("name_stem"):
        return "no word of the file name shares a query word's stem"
    return f"file name shares a stem with {_quoted(shared)}"


def _named_path(f: _File) -> str:
    return "the query names this file" if f.value("named_path") else \
        "the query names no file of it"


def _body(f: _File) -> str:
    terms = f.body_terms()
    return f"body mentions {_quoted(terms)}" if terms else "body mentions no query term"


def _declares(f: _File) -> str:
    names = f.declared()
    return f"defines {_quoted(names)}" if names else "defines no query term"


def _enclosing(f: _File) -> str:
    owner = f.enclosing()
    if owner and f.value("enclosing"):
        return f"in class '{owner}', a query term"
    return "its class is no query term"


def _mentions(f: _File) -> str:
    if f.best is None or not f.best.matched:
        return "its best chunk mentions no query term"
    return f"its best chunk mentions {_quoted(list(f.best.matched))}"


def _coverage(f: _File) -> str:
    total = len({t.root for t in f.terms.terms})
    found = len(set(f.evidence.matched) | set(f.evidence.path_terms))
    return (f"has {found} of the query's {total} terms ({_percent(f.value('coverage'))} of "
            "their weight)")


def _rare_term(f: _File) -> str:
    found = [t for t in f.evidence.matched if f.rarity.get(t)]
    if not found:
        return "matches none of the query's rarer words"
    rarest = max(found, key=lambda t: f.rarity[t])
    if f.value("rare_term") >= 0.99:
        return f"matches '{rarest}', the query's rarest word here"
    return (f"its rarest match is '{rarest}' ({_percent(f.value('rare_term'))} of the "
            "rarest's weight)")


def _common_name(f: _File) -> str:
    terms = list(dict.fromkeys(f.evidence.path_terms))
    if not terms:
        return "path matches no query term"
    commonest = min(terms, key=lambda t: f.rarity.get(t, 0.0))
    if f.value("common_name") >= 0.5:
        return f"path matches '{commonest}', a common word here"
    return f"path matches '{commonest}', not a common word here"


def _kind(label: str) -> Callable[[_File], str]:
    feature = {"a test file": "kind_test", "a doc page": "kind_doc",
               "a changelog": "kind_changelog", "a config or data file": "kind_other"}[label]

    def say(f: _File) -> str:
        return label if f.value(feature) else f"not {label}"

    return say


def _test_like(f: _File) -> str:
    return ("a test, benchmark or example by its path" if f.value("test_like")
            else "not a test, benchmark or example by its path")


def _vendored(f: _File) -> str:
    return "vendored or third-party code" if f.value("vendored") else "not vendored code"


def _chunk_lines(f: _File) -> str:
    return f"its best chunk is {_count(f.value('chunk_lines'))} lines long"


def _chunk_comment(f: _File) -> str:
    share = f.value("chunk_comment")
    if not share:
        return "its best chunk is code, no comment"
    what = "comment or docstring"
    if f.best is not None and f.best.chunk.symbol and f.best.chunk.defines and share > 0.5:
        what = f"docstring or comment of '{f.best.chunk.symbol}'"
    return f"{what} ({_percent(share)} of the chunk)"


def _chunk_defines(f: _File) -> str:
    count = _count(f.value("chunk_defines"))
    return f"its best chunk defines {count} name{'' if count == 1 else 's'}"


def _file_lines(f: _File) -> str:
    return f"the file is {_count(f.value('file_lines'))} lines long"


def _depth(f: _File) -> str:
    depth = round(f.value("depth"))
    return "at the top" if depth == 0 else \
        f"{depth} folder{'' if depth == 1 else 's'} deep"


def _changes(f: _File) -> str:
    count = _count(f.value("changes"))
    return (f"changed in {count} recent commit{'' if count == 1 else 's'}" if count
            else "not changed in recent commits")


def _recent(f: _File) -> str:
    value = f.value("recent")
    if value <= 0:
        return "not changed lately"
    age = round(1 / value - 1)
    return "changed in the latest commit" if age == 0 else f"last changed {age} commits ago"


def _together(f: _File) -> str:
    count = _count(f.value("together"))
    return (f"changed with files the query names, {count} time{'' if count == 1 else 's'}"
            if count else "never changed with files the query names")


def _messages(f: _File) -> str:
    share = f.value("messages")
    if not share:
        return "no message of a commit that changed it says the query's words"
    said = f"say {_quoted(list(f.placed.said))}" if f.placed.said else "say the query's words"
    return (f"the messages of the commits that changed it {said} "
            f"({_percent(share)} of the file they say most of)")


def _file_bm25(f: _File) -> str:
    return f"whole-file match {_percent(f.value('file_bm25'))} of the best"


def _file_bm25_rank(f: _File) -> str:
    return f"whole-file match rank {_count(f.value('file_bm25_rank')) + 1}"


def _digit_name(f: _File) -> str:
    words = sorted(digit_words(f.placed.path))
    return (f"file name's {_quoted(words)} is in the query" if words and f.value("digit_name")
            else "no word with digits of the file name is in the query")


def _stub(f: _File) -> str:
    return "a type declaration stub" if f.value("stub") else "not a type declaration stub"


def _bundle(f: _File) -> str:
    return ("a generated single-file copy of the sources" if f.value("bundle")
            else "not a generated copy of the sources")


def _test_partner(f: _File) -> str:
    share = f.value("test_partner")
    return (f"a test file named for it matches the query ({_percent(share)} of the best)"
            if share else "no test file named for it matches the query")


def _test_partner_top(f: _File) -> str:
    return ("the best-matching test file is named for it" if f.value("test_partner_top")
            else "the best-matching test file is not named for it")


def _first_line(f: _File) -> str:
    share = f.value("first_line")
    return (f"the query's first line alone scores it {_percent(share)} of the best" if share
            else "the query's first line alone does not find it")


def _first_line_top(f: _File) -> str:
    return ("first for the query's first line alone" if f.value("first_line_top")
            else "not first for the query's first line alone")


def _lexical(f: _File) -> str:
    return f"lexical score {_percent(f.value('lexical'))} of the best"


def _lexical_rank(f: _File) -> str:
    return f"lexical rank {_count(f.value('lexical_rank')) + 1}"


#: how each feature is said; a feature missing here is said by its ``FEATURES`` text
SAYS: dict[str, Callable[[_File], str]] = {
    "lexical": _lexical,
    "lexical_rank": _lexical_rank,
    "file_bm25": _file_bm25,
    "file_bm25_rank": _file_bm25_rank,
    "digit_name": _digit_name,
    "names_file": _path_names,
    "name_token": _name_token,
    "directory": _directory,
    "name_stem": _name_stem,
    "named_path": _named_path,
    "body": _body,
    "declares": _declares,
    "enclosing": _enclosing,
    "mentions": _mentions,
    "coverage": _coverage,
    "rare_term": _rare_term,
    "common_name": _common_name,
    "kind_test": _kind("a test file"),
    "kind_doc": _kind("a doc page"),
    "kind_changelog": _kind("a changelog"),
    "kind_other": _kind("a config or data file"),
    "test_like": _test_like,
    "vendored": _vendored,
    "stub": _stub,
    "bundle": _bundle,
    "chunk_lines": _chunk_lines,
    "chunk_comment": _chunk_comment,
    "chunk_defines": _chunk_defines,
    "file_lines": _file_lines,
    "depth": _depth,
    "changes": _changes,
    "recent": _recent,
    "together": _together,
    "messages": _messages,
    "test_partner": _test_partner,
    "test_partner_top": _test_partner_top,
    "first_line": _first_line,
    "first_line_top": _first_line_top,
}


def reasons(placed: Placed, evidence: FileEvidence | None, best: ScoredChunk | None,
            terms: QueryTerms, stats: TermStats) -> list[Reason]:
    """``placed.why`` in words: each feature that moved the file, largest effect first.

    ``best`` is the file's best chunk (the one its chunk features describe). A term or a
    name from the repository is printable (``display_path``); the formatters escape the rest.
    """
    f = _File(placed, evidence, best, terms, stats)
    out = []
    for feature, effect in placed.why:
        say = SAYS.get(feature)
        text = say(f) if say is not None and placed.values else FEATURES.get(feature, feature)
        out.append(Reason(feature, effect, display_path(text)))
    return out


def why_line(path: str, why: list[Reason]) -> str:
    """``-v``'s line for one result: ``why PATH: path names 'io' +1.8; a test file -0.9``."""
    said = "; ".join(f"{r.says} {r.effect:+.1f}" for r in why) or "no feature moved it"
    return f"why {path}: {said}"


def explain_order(citations: list[Citation], cited: list[ScoredChunk], ranked: Ranked,
                  gathered: Gathered) -> None:
    """Give each citation (of the chunk ``cited`` at the same index) the features that
    placed its file, when the learned ranker ordered the files; with the fixed order
    ``why`` stays None."""
    best: dict[str, ScoredChunk] = {}
    for item in ranked.chunks:  # a file's chunks keep their lexical order: its best first
        best.setdefault(item.path, item)
    evidence = {e.path: e for e in gathered.evidence}
    for citation, item in zip(citations, cited, strict=True):
        placed = ranked.placed.get(item.path)
        if placed is not None:
            citation.why = reasons(placed, evidence.get(item.path), best.get(item.path),
                                   gathered.terms, gathered.stats)


def order_of(ranked: Ranked, notes: list[str]) -> OrderInfo:
    """What ordered the candidate files, for the report: the learned ranker's model, or
    the fixed factors and why (the setting, an unusable model file: the search's
    ``order:`` note)."""
    model = ranked.model
    if model is not None:
        shipped = model.origin == "shipped"
        version = model.meta.get("version")
        return OrderInfo("learned", model.name, "shipped" if shipped else "this repository",
                         None if shipped else model.origin,
                         None if version is None else str(version))
    said = next((n for n in reversed(notes) if n.startswith("order: ")), None)
    if not ranked.chunks:
        reason = "no candidate file to order"
    else:
        reason = said.removeprefix("order: ") if said else "fixed lexical factors"
    return OrderInfo("fixed", reason=reason)
