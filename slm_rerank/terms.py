"""From a query (a phrase or a whole bug report) to weighted search terms."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

STOP_WORDS = frozenset("""
a about above after again against all also am an and any are aren as at be because been
before being below between both but by can cannot could couldn did didn do does doesn doing
don down during each either else even ever every few for from further get gets getting got
had hadn has hasn have haven having he her here hers herself him himself his how however i
if in into is isn it its itself just let like ll me might more most much must mustn my
myself need needs no nor not now of off on once one only or other ought our ours ourselves
out over own per please quite rather re really same say says shall shan she should shouldn
since so some still such than that the their theirs them themselves then there these they
this those though through thus to too under until up upon us use used uses using very via
want wants was wasn way we well were weren what when where whether which while who whom
whose why will with within without won would wouldn yes yet you your yours yourself
yourselves ve etc eg ie thing things something anything way also able seem seems seen
see looks look make makes made go goes going went come comes know think thanks thank
dear regards sure maybe probably actually basically simply currently instead
self cls def elif lambda args kwargs
""".split())
_TRACEBACK_NOISE = re.compile(r'Traceback \(most recent call last\):|File "[^"]+", line \d+, in ')

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_DOTTED = re.compile(r"\b[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+\b")
_FILE = re.compile(r"(?:[\w.-]+/)*[\w-]+\.(?:py|pyx|pyi|c|h|cc|cpp|hpp|js|jsx|ts|tsx|go|rs|rb|"
                   r"java|kt|cs|php|swift|m|scala|sh|toml|cfg|ini|yaml|yml|json|md|rst|txt)\b")
_FRAME = re.compile(r'File "([^"]+)", line \d+, in ([A-Za-z_]\w*)')
_BACKTICK = re.compile(r"`([^`\n]{1,80})`")
_SEPARATORS = re.compile(r"[^A-Za-z0-9]+")
_CAMEL = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|\d+")
_SUFFIXES = ("ions", "ion", "ings", "ing", "ments",
             "ment", "ness", "ies", "es", "ed", "ly", "ers", "er", "s", "e")


def light(word: str) -> str:
    """Strip a plural ending only: classes -> class, migrations -> migration, shared stays."""
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 4 and word.endswith(("sses", "xes", "ches", "shes")):
        return word[:-2]
    if len(word) > 3 and word.endswith("s") and not word.endswith(("ss", "us", "is")):
        return word[:-1]
    return word


def stem(word: str) -> str:
    """A crude suffix stripper: migration, migrate -> migrat; configured -> configur."""
    for suffix in _SUFFIXES:
        if word.endswith(suffix) and len(word) - len(suffix) >= 4:
            base = word[: -len(suffix)]
            return base[:-1] if suffix == "ies" else base
    return word


def split_identifier(name: str) -> list[str]:
    """Parts of snake_case, camelCase and dotted names, lower-cased."""
    parts: list[str] = []
    for piece in _SEPARATORS.split(name):
        parts += [p.lower() for p in _CAMEL.findall(piece)]
    return [p for p in parts if p]


def looks_like_code(token: str) -> bool:
    """snake_case, camelCase, CamelCase with an inner capital, or letters with digits."""
    inner = token.strip("_")
    return (
        "_" in inner
        or bool(re.search(r"[a-z][A-Z]", token))
        or bool(re.match(r"[A-Z][a-z0-9]+[A-Z]", token))
        or bool(re.search(r"[A-Za-z]\d|\d[A-Za-z]", token)) and not token.isdigit()
    )


@dataclass
class Term:
    """One search term: the word as written, its light (plural-free) form and its stem."""

    root: str
    weight: float
    strong: bool
    light: str = ""
    stem: str = ""
    #: searched in bodies (a prefix for inflected words)
    literal: str = ""

    def __post_init__(self) -> None:
        self.light = self.light or light(self.root)
        self.stem = self.stem or stem(self.root)
        if not self.literal:
            self.literal = self.root if self.strong or len(self.stem) < 4 else self.stem


#: Terms shorter than this (``io``, ``np``) match paths only, never bodies.
MIN_BODY_LITERAL = 3


def searched_in_bodies(term: Term) -> bool:
    return len(term.literal) >= MIN_BODY_LITERAL


@dataclass
class QueryTerms:
    terms: list[Term] = field(default_factory=list)
    #: path fragments named in the query (traceback files, file names)
    paths: list[str] = field(default_factory=list)
    about_tests: bool = False
    about_docs: bool = False

    def literals(self) -> list[str]:
        """What to look for in file bodies: shorter literals match nearly everywhere."""
        return list(dict.fromkeys(t.literal for t in self.terms if searched_in_bodies(t)))


TEST_WORDS = frozenset({"test", "tests", "testing", "unittest", "testcase", "fixture",
                        "fixtures", "conftest"})
DOC_WORDS = frozenset({"doc", "docs", "documentation", "docstring", "readme", "tutorial",
                       "typo", "changelog"})

_TEST_LIGHT = frozenset(light(w) for w in TEST_WORDS)
_DOC_LIGHT = frozenset(light(w) for w in DOC_WORDS)


def extract(query: str, max_terms: int = 40) -> QueryTerms:
    """Weighted terms of ``query``: identifiers and file names strong, prose words weak."""
    scores: dict[str, float] = {}
    strong: set[str] = set()
    paths: list[str] = []

    def add(word: str, weight: float, is_strong: bool) -> None:
        low = word.lower().strip("_")
        if len(low) < (2 if is_strong else 3) or low in STOP_WORDS or low.isdigit():
            return
        scores[low] = scores.get(low, 0.0) + weight
        if is_strong:
            strong.add(low)

    for path, func in _FRAME.findall(query):
        paths.append(path)
        add(func, 2.0, True)
    for name in _FILE.findall(query):
        paths.append(name)
        base = name.rsplit("/", 1)[-1].rsplit(".", 1)[0]
        add(base, 2.0, True)
    for quoted in _BACKTICK.findall(query):
        for ident in _IDENT.findall(quoted):
            add(ident, 1.0, True)
    for dotted in _DOTTED.findall(query):
        if _FILE.fullmatch(dotted):
            continue
        for part in dotted.split("."):
            add(part, 1.0, True)
    prose = _TRACEBACK_NOISE.sub(" ", query)
    for match in _IDENT.finditer(prose):
        token = match.group()
        code = looks_like_code(token) or prose[match.end(): match.end() + 1] == "("
        add(token, 1.5 if code else 1.0, code)
        if code:
            for part in split_identifier(token):
                add(part, 0.5, False)
    ranked = sorted(scores.items(), key=lambda kv: (-(kv[1] * (2.0 if kv[0] in strong else 1.0)),
                                                    -len(kv[0]), kv[0]))[:max_terms]
    terms = [
        Term(root=word, weight=(2.0 if word in strong else 1.0) * (1.0 + math.log(score)),
             strong=word in strong)
        for word, score in ranked if score > 0
    ]
    headline = {light(w.lower()) for w in _IDENT.findall(query.strip().splitlines()[0])} \
        if query.strip() else set()
    return QueryTerms(
        terms=terms,
        paths=list(dict.fromkeys(paths)),
        about_tests=bool(headline & _TEST_LIGHT),
        about_docs=bool(headline & _DOC_LIGHT),
    )
