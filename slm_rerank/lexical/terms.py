"""From a query (a phrase or a whole bug report) to weighted search terms.

Identifiers, file names and English prose are read from the ASCII text. Words in other
scripts are searched too, literally (no stemming, no stop words):

- CJK (Chinese, Japanese, Korean) writes no spaces between words, so each run of CJK
  characters is one term; a run longer than two characters also gives its overlapping
  two-character pieces (bigrams) at half weight, the way CJK search engines index text,
  since a question written as one run rarely appears verbatim in the tree.
- Cyrillic, Greek, accented Latin and other alphabets: each word is a term.
- Emoji are kept as terms, one per emoji (skin tones and ZWJ sequences stay whole,
  variation selectors are dropped so that ❤️ also finds ❤), at half weight: someone who
  typed one may be looking for where it is printed, and it is too rare to mislead much.

Other symbols (arrows, math, box drawing) are dropped like punctuation; ``-v`` prints the
terms searched, so a dropped word is visible. A query that is pure ASCII never reaches
this code and gives exactly the terms it always did.
"""

from __future__ import annotations

import math
import re
import unicodedata
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
#: The extensions a file name in a query is recognised by.
_EXTENSIONS = (r"(?:py|pyx|pyi|c|h|cc|cpp|hpp|js|jsx|ts|tsx|go|rs|rb|java|kt|cs|php|swift|m|"
               r"scala|sh|toml|cfg|ini|yaml|yml|json|md|rst|txt)\b")
#: A file name, with the folders before it: ``app/store/writer.py``. Only for whole-string
#: tests; searching text with it is quadratic (see ``file_names``).
_FILE = re.compile(r"(?:[\w.-]+/)*[\w-]+\." + _EXTENSIONS)
#: What a path is made of, so a file name never reaches past such a run.
_PATH_RUN = re.compile(r"[\w./-]+")
#: A name with its extension at the start of a path component (after a ``/``).
_HEAD = re.compile(r"[\w-]+\." + _EXTENSIONS)
#: The same, starting where a name begins; a start inside a name would scan it again.
_NAME = re.compile(r"(?<![\w-])[\w-]+\." + _EXTENSIONS)
_FRAME = re.compile(r'File "([^"]+)", line \d+, in ([A-Za-z_]\w*)')
_BACKTICK = re.compile(r"`([^`\n]{1,80})`")
_SEPARATORS = re.compile(r"[^A-Za-z0-9]+")
_CAMEL = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|\d+")
#: Han (with extensions and compatibility forms), kana, Hangul, CJK iteration marks.
_CJK_CHARS = ("\u3005\u3007\u3021-\u3029\u3040-\u30ff\u31f0-\u31ff\u3400-\u4dbf"
              "\u4e00-\u9fff\uf900-\ufaff\uff66-\uff9f\u1100-\u11ff\u3130-\u318f"
              "\uac00-\ud7af\U00020000-\U0003134f")
_CJK_RUN = re.compile(f"[{_CJK_CHARS}]+")
#: Pictographs: symbols, dingbats and emoji blocks, without the dingbat ornament brackets
#: and arrows (❯, ➜, ➤) that people paste from shell prompts rather than ask about.
_EMOJI_CHARS = ("\u2600-\u2767\u2776-\u2797\u27a1\u27b0\u27bf\u2b05-\u2b07\u2b1b\u2b1c"
                "\u2b50\u2b55\U0001f000-\U0001faff")
#: One emoji: a pictograph with its skin tone, or several joined by ZERO WIDTH JOINER.
_EMOJI = re.compile(f"[{_EMOJI_CHARS}][\U0001f3fb-\U0001f3ff]?"
                    f"(?:\u200d[{_EMOJI_CHARS}][\U0001f3fb-\U0001f3ff]?)*")
_VARIATION_SELECTORS = re.compile("[\ufe0e\ufe0f]")
#: A word in any script that holds at least one non-ASCII letter (café, повтор, naïve_x).
#: Only word characters count: a symbol (⋅, ’) or a no-break space between two ASCII words
#: separates them, as punctuation does.
#: Such a word is a whole run of word characters that is not ASCII (``str.isascii``);
#: a pattern that finds the non-ASCII letter inside the run rescans the run from each
#: of its characters, quadratic in a long ASCII run (a hex dump).
_WORD_RUN = re.compile(r"\w+")
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


# compiled once: a long pasted log holds hundreds of thousands of tokens
_LOWER_UPPER = re.compile(r"[a-z][A-Z]")
_INNER_CAPITAL = re.compile(r"[A-Z][a-z0-9]+[A-Z]")
_LETTER_DIGIT = re.compile(r"[A-Za-z]\d|\d[A-Za-z]")


def looks_like_code(token: str) -> bool:
    """snake_case, camelCase, CamelCase with an inner capital, or letters with digits."""
    inner = token.strip("_")
    return (
        "_" in inner
        or bool(_LOWER_UPPER.search(token))
        or bool(_INNER_CAPITAL.match(token))
        or bool(_LETTER_DIGIT.search(token)) and not token.isdigit()
    )


def file_names(text: str) -> list[str]:
    """The file names in ``text`` (``app/store/writer.py``, ``setup.cfg``), in order.

    The same list as ``_FILE.findall(text)``, in time linear in ``text``: the pattern,
    tried from every position, rescans the rest of a run of path characters from each of
    them (80,000 characters of one word took 31 s). A name lies inside one run of path
    characters, so each run is read once, one ``/``-separated component at a time.
    """
    found: list[str] = []
    for run in _PATH_RUN.finditer(text):
        if "." in run.group():
            found += _run_file_names(run.group())
    return found


def _run_file_names(run: str) -> list[str]:
    """``_FILE.findall(run)`` for one run of path characters (``[\\w./-]+``).

    What the pattern matches, leftmost first: from a start inside component ``i``, folders
    (each the rest of a component, then ``/``), as many as it can, then a name with its
    extension at the head of the next component; with no such head within reach, a
    name with its extension inside component ``i`` itself. The first case does not depend
    on where in component ``i`` the match starts, so it starts as early as it can.
    """
    starts = [0]
    starts += [i + 1 for i, char in enumerate(run) if char == "/"]
    ends = [start - 1 for start in starts[1:]] + [len(run)]
    last = len(starts) - 1
    heads = [_HEAD.match(run, start) if i else None for i, start in enumerate(starts)]
    # deepest[i]: the last component whose head a match starting in component i ends at;
    # a chain of folders stops at an empty component (``//``) or at the run's last one.
    deepest: list[int | None] = [None] * (last + 1)
    for i in range(last - 1, -1, -1):
        chain_goes_on = i + 1 < last and starts[i + 1] < ends[i + 1]
        further = deepest[i + 1] if chain_goes_on else None
        deepest[i] = further if further is not None else (i + 1 if heads[i + 1] else None)
    found: list[str] = []
    at, i = 0, 0
    while i <= last:
        at = max(at, starts[i])
        if at >= ends[i]:
            i += 1
            continue
        target = deepest[i]
        if target is not None:
            head = heads[target]
            assert head is not None
            found.append(run[at:head.end()])
            at, i = head.end(), target
            continue
        # A match ending where ``at`` is may be followed at once by another (``a.py-b.py``),
        # which the look-behind of _NAME would refuse.
        name = _HEAD.match(run, at, ends[i]) or _NAME.search(run, at, ends[i])
        while name:
            found.append(name.group())
            at = name.end()
            name = _HEAD.match(run, at, ends[i]) or _NAME.search(run, at, ends[i])
        i += 1
    return found


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
#: Longer words are not searched: no name in a tree is longer than a file name may be
#: (255 bytes), and the sources pass each term to rg or git as one argument, which the
#: system refuses beyond 128 KiB (a pasted hex dump or base64 blob is one such word).
MAX_TERM_CHARS = 255


def searched_in_bodies(term: Term) -> bool:
    # Counted in UTF-8 bytes: the same as characters for ASCII, while one CJK character
    # (three bytes) is a word worth searching.
    return len(term.literal.encode("utf-8", "surrogatepass")) >= MIN_BODY_LITERAL


@dataclass
class QueryTerms:
    terms: list[Term] = field(default_factory=list)
    #: path fragments named in the query (traceback files, file names)
    paths: list[str] = field(default_factory=list)
    #: a word of its first line names tests or docs (the fixed factors do not demote them)
    about_tests: bool = False
    about_docs: bool = False
    #: its first line asks for tests or docs as the thing to find (``ASKS_TESTS``,
    #: ``ASKS_DOCS``), not merely names them: the learned order then stands aside
    asks_tests: bool = False
    asks_docs: bool = False

    def literals(self) -> list[str]:
        """What to look for in file bodies: shorter literals match nearly everywhere."""
        return list(dict.fromkeys(t.literal for t in self.terms if searched_in_bodies(t)))


TEST_WORDS = frozenset({"test", "tests", "testing", "unittest", "testcase", "fixture",
                        "fixtures", "conftest"})
DOC_WORDS = frozenset({"doc", "docs", "documentation", "docstring", "readme", "tutorial",
                       "typo", "changelog"})

#: tests asked for as the thing to find ("tests for X", "fixtures for X", "where are the
#: tests of X", "what tests cover X", "add a test", a keyword query that starts or ends
#: with them: "retry backoff tests", "retry backoff test cases"), not a query that only
#: mentions them (a test runner's own issue says "test" in every line)
ASKS_TESTS = re.compile(
    r"\b(?:tests?|test\s*cases?|unit\s+tests?|fixtures?|conftest)\s+"
    r"(?:for|of|that|which|covering|about)\b|"
    r"\b(?:where|which|find|show|add|write|missing)\b(?:\W+\w+){0,3}?\W+(?:unit\s+)?"
    r"tests?\b|\bwhat\s+(?:unit\s+)?tests?\b", re.IGNORECASE)
#: a keyword query that starts or ends with tests ("retry backoff tests"); only a first line
#: of at most ``KEYWORD_WORDS`` words is read so: a sentence that ends in "test" ("caplog
#: fixture doesn't restore log level after test") reports a fault
KEYWORD_TESTS = re.compile(r"^\s*(?:unit\s+)?tests?\b|\b(?:unit\s+)?tests?(?:\s+cases?)?\W*$",
                           re.IGNORECASE)
KEYWORD_WORDS = 5
#: how much of the first line ``asks_tests`` / ``asks_docs`` read: a pasted megabyte on one
#: line asks for nothing, and the regexes' cost stays bounded
ASKS_CHARS = 2000
#: documentation asked for by name; "docstring", "typo" or "changelog" alone are about code
ASKS_DOCS = re.compile(r"\b(?:docs?|documentation|documented|readme|tutorial|user\s+guide)\b",
                       re.IGNORECASE)

_TEST_LIGHT = frozenset(light(w) for w in TEST_WORDS)
_DOC_LIGHT = frozenset(light(w) for w in DOC_WORDS)


#: the most of a query's first line read as its title (``first_line``): a longer line is
#: pasted text, and reading all of it a second time would double a 1 MB query's cost
FIRST_LINE_CHARS = 2000


#: what ends a line, as ``str.splitlines`` reads it (and so ``extract``'s first line)
_LINE_END = re.compile(r"\r\n|[\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]")


def _head_and_rest(query: str) -> tuple[str, str]:
    """The stripped query's first line and what follows it ("" when it is one line)."""
    text = query.strip()
    end = _LINE_END.search(text)
    return (text, "") if end is None else (text[:end.start()], text[end.end():])


def first_line(query: str) -> str | None:
    """The query's first line (at most ``FIRST_LINE_CHARS`` of it), when more text follows
    it; None when the query is one line, whose own order is its first line's."""
    head, rest = _head_and_rest(query)
    head = head[:FIRST_LINE_CHARS].strip()
    return head if head and rest.strip() else None


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
    for name in file_names(query):
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
    if not prose.isascii():
        prose = _foreign_terms(prose, scores)
    for match in _IDENT.finditer(prose):
        token = match.group()
        code = looks_like_code(token) or prose[match.end(): match.end() + 1] == "("
        add(token, 1.5 if code else 1.0, code)
        if code:
            for part in split_identifier(token):
                add(part, 0.5, False)
    searchable = [(word, score) for word, score in scores.items()
                  if len(word) <= MAX_TERM_CHARS]
    ranked = sorted(searchable, key=lambda kv: (-(kv[1] * (2.0 if kv[0] in strong else 1.0)),
                                                    -len(kv[0]), kv[0]))[:max_terms]
    terms = [
        Term(root=word, weight=(2.0 if word in strong else 1.0) * (1.0 + math.log(score)),
             strong=word in strong)
        for word, score in ranked if score > 0
    ]
    first = _head_and_rest(query)[0]
    headline = {light(w.lower()) for w in _IDENT.findall(first)}
    about_tests = bool(headline & _TEST_LIGHT)
    about_docs = bool(headline & _DOC_LIGHT)
    return QueryTerms(
        terms=terms,
        paths=list(dict.fromkeys(paths)),
        about_tests=about_tests,
        about_docs=about_docs,
        asks_tests=about_tests and _asks_tests(first[:ASKS_CHARS]),
        asks_docs=about_docs and bool(ASKS_DOCS.search(first[:ASKS_CHARS])),
    )


def _asks_tests(first: str) -> bool:
    """The first line ``first`` asks for tests (``ASKS_TESTS``, ``KEYWORD_TESTS``)."""
    if ASKS_TESTS.search(first):
        return True
    return len(first.split(None, KEYWORD_WORDS)) <= KEYWORD_WORDS \
        and bool(KEYWORD_TESTS.search(first))


def _foreign_terms(prose: str, scores: dict[str, float]) -> str:
    """Add the non-ASCII words of ``prose`` to ``scores``; return the prose without them.

    What is taken out is replaced by spaces, so the ASCII pass that follows neither sees
    the ASCII fragments of a foreign word (``caf`` of ``café``) nor joins its neighbours.
    """
    prose = unicodedata.normalize("NFC", prose)

    def add(word: str, weight: float) -> None:
        scores[word] = scores.get(word, 0.0) + weight

    def take_emoji(match: re.Match[str]) -> str:
        add(_VARIATION_SELECTORS.sub("", match.group()), 0.5)
        return " "

    def take_cjk(match: re.Match[str]) -> str:
        run = match.group()
        add(run, 1.0)
        if len(run) > 2:
            for i in range(len(run) - 1):
                add(run[i:i + 2], 0.5)
        return " "

    def take_word(match: re.Match[str]) -> str:
        word = match.group().lower().strip("_")
        if len(word) >= 3 and not word.isdigit():
            add(word, 1.0)
        return " "

    def take_foreign_word(match: re.Match[str]) -> str:
        return match.group() if match.group().isascii() else take_word(match)

    prose = _EMOJI.sub(take_emoji, prose)
    prose = _CJK_RUN.sub(take_cjk, prose)
    return _WORD_RUN.sub(take_foreign_word, prose)
