"""The two deterministic gates: is the quote on disk, and are the claim's names in the chunk.

Both are pure functions of a :class:`Candidate` and ``chunk_text``, the text of the cited
chunk's lines (``candidate.start_line`` .. ``candidate.end_line``) as they are on disk.
Reading that text is the caller's (``chunk_text`` in ``reading.py``); a gate never opens a
file, so the trust benchmark runs them over its corpus exactly as a review does.

Evidence: the quote must be one line, or consecutive whole lines, of the chunk. Whitespace
is the only difference tolerated (indentation, spacing, line breaks: a multi-line quote
collapsed onto one line still matches); a partial line, a changed character, a line of
another chunk or file is not found. A quote too short to pin a line is refused first: fewer
than ``MIN_EVIDENCE_CHARS`` non-whitespace characters or fewer than ``MIN_EVIDENCE_WORDS``
words (``}``, ``else:``, ``x = 0``, ``return;`` occur in most chunks, so they prove nothing).

Identifiers: every code name the claim uses must occur, as a whole token and with its case,
in the chunk. A code name is any word in backticks, a camelCase or PascalCase word with
an inner capital (``onSkip``, ``HttpClient``), a snake_case or SCREAMING_CASE word
(``max_tokens``, ``MAX_SIZE``), a word written as a call (``close()``), and every name the
model listed in ``identifiers``. Language keywords and literals (``None``, ``null``,
``true``, ``if``, ...) inside a backticked span are not asked for, nor a few product names
written in camelCase (``JavaScript``, ``GitHub``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from slm_rerank_review.code_text import code_only, has_code
from slm_rerank_review.findings import Candidate, Dropped, EvidenceSpan, Finding, GateScores, Reason

#: a quote with fewer non-whitespace characters than this proves no line
MIN_EVIDENCE_CHARS = 8
#: ... or with fewer words (identifiers, keywords or numbers)
MIN_EVIDENCE_WORDS = 2
#: identifiers named in a detail line before it is cut ("... and N more")
DETAIL_NAMES = 5

_WORD = re.compile(r"[A-Za-z0-9_$]+")
_TOKEN = re.compile(r"[A-Za-z_$][A-Za-z0-9_$]*")
_CODE_SPAN = re.compile(r"`([^`\n]{1,200})`")
_CAMEL = re.compile(r"(?<![\w$])(?:[a-z][a-z0-9]*[A-Z]|[A-Z][a-z0-9]+[A-Z])[A-Za-z0-9_]*")
_SNAKE = re.compile(r"(?<![\w$])_*[A-Za-z][A-Za-z0-9]*(?:_+[A-Za-z0-9]+)+_*(?![\w$])"
                    r"|(?<![\w$])_+[A-Za-z][A-Za-z0-9]*(?![\w$])")
_CALL = re.compile(r"(?<![\w$.])([A-Za-z_$][A-Za-z0-9_$]*)\(\)")
#: a dotted name (``this.queue``, ``os.path.join``), spaces around its dots allowed
_DOTTED = re.compile(r"[A-Za-z_$][A-Za-z0-9_$]*(?:[ \t]*\.[ \t]*[A-Za-z_$][A-Za-z0-9_$]*)+")
_DOT_SPACE = re.compile(r"[ \t]*\.[ \t]*")

#: words a backticked span may hold that are the language's, not the code's names
KEYWORDS = frozenset("""
None True False null nil true false undefined NaN and or not is in if else elif for while
return def function fn func const let var new class self this await async yield try except
catch finally raise throw import from as with pass break continue void int str bool float
""".split())
#: camelCase words of prose, not of code
PROSE_CAMEL = frozenset("""
JavaScript TypeScript CoffeeScript GitHub GitLab BitBucket PyPI NumPy SciPy PyTorch
TensorFlow OpenAI PostgreSQL MySQL SQLite MongoDB GraphQL macOS iOS iPhone iPad YouTube
LinkedIn PowerShell DevOps OAuth
""".split())


def split_lines(text: str) -> list[str]:
    """The lines of ``text`` as the search numbers them: split at ``\\n`` only, a ``\\r``
    ending a line dropped (``str.splitlines`` also splits at form feeds and U+2028, which
    would shift every later line number)."""
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return [line[:-1] if line.endswith("\r") else line for line in lines]


def squash(text: str) -> str:
    """``text`` without any whitespace: what two quotes must share to be the same."""
    return "".join(text.split())


def check_evidence(candidate: Candidate, chunk_text: str) -> EvidenceSpan | Dropped:
    """The lines of the chunk the candidate's evidence is, else why it is dropped.

    The first whole-line match wins; line numbers are the file's (the chunk's first line is
    ``candidate.start_line``).
    """
    quote = squash(candidate.evidence)
    if not quote:
        return Dropped(candidate, Reason.EMPTY_EVIDENCE, "the candidate quotes no code",
                       GateScores(evidence=False))
    if len(quote) < MIN_EVIDENCE_CHARS or len(_WORD.findall(candidate.evidence)) < \
            MIN_EVIDENCE_WORDS:
        return Dropped(candidate, Reason.EVIDENCE_TOO_SHORT,
                       f"the quote has {len(quote)} non-blank characters; at least "
                       f"{MIN_EVIDENCE_CHARS} and {MIN_EVIDENCE_WORDS} words pin a line",
                       GateScores(evidence=False))
    lines = split_lines(chunk_text)
    span = _find_lines(quote, [squash(line) for line in lines])
    if span is None:
        return Dropped(candidate, Reason.EVIDENCE_NOT_FOUND,
                       f"the quote is not a line or run of lines of {candidate.path}:"
                       f"{candidate.start_line}-{candidate.end_line}",
                       GateScores(evidence=False))
    first, last = span
    return EvidenceSpan(candidate.start_line + first, candidate.start_line + last,
                        tuple(lines[first:last + 1]))


def _find_lines(quote: str, squashed: list[str]) -> tuple[int, int] | None:
    """The first (first, last) line indexes whose squashed text, joined, is ``quote``.

    The joined text is searched only at the start of a non-blank line, and a hit counts only
    if it ends at the end of one: a quote of part of a line is not a line. The cost is at most
    one comparison of the quote per line.
    """
    joined = "".join(squashed)
    ends: dict[int, int] = {}  # offset where a non-blank line ends -> its index
    starts: list[tuple[int, int]] = []
    offset = 0
    for index, text in enumerate(squashed):
        if text:
            starts.append((offset, index))
            offset += len(text)
            ends[offset] = index
    for start, index in starts:
        if joined.startswith(quote, start):
            last = ends.get(start + len(quote))
            if last is not None:
                return index, last
    return None


def claim_identifiers(claim: str, listed: Iterable[str] = ()) -> tuple[str, ...]:
    """The code names ``claim`` uses and the model ``listed``, in order, each once."""
    names: list[str] = []
    for span in _CODE_SPAN.findall(claim):
        names.extend(_code_names(span))
    prose = _CODE_SPAN.sub(" ", claim)
    names.extend(m for m in _CAMEL.findall(prose) if m not in PROSE_CAMEL)
    names.extend(_SNAKE.findall(prose))
    names.extend(_CALL.findall(prose))
    for item in listed:
        names.extend(_code_names(item))
    return tuple(dict.fromkeys(names))


#: the receivers of an attribute: ``this.queue`` names an attribute of the object, and the
#: word "queue" elsewhere in the chunk (a comment) does not show that it exists
RECEIVERS = frozenset({"this", "self", "cls"})


def _code_names(code: str) -> list[str]:
    """The names of a piece of code, each that is no keyword: a dotted name part by part
    (``Range.__call__`` is there when ``class Range`` and ``def __call__`` are), except an
    attribute of ``this``, ``self`` or ``cls``, which is asked for whole."""
    names: list[str] = []
    for match in _DOTTED.finditer(code):
        parts = _DOT_SPACE.split(match.group())
        if parts[0] in RECEIVERS:
            names.append(".".join(parts[:2]))
            parts = parts[2:]
        names.extend(p for p in parts if p not in KEYWORDS)
    rest = _DOTTED.sub(" ", code)
    return names + [t for t in _TOKEN.findall(rest) if t not in KEYWORDS]


def _present(name: str, chunk_text: str, tokens: set[str]) -> bool:
    """Whether the chunk holds ``name``: a name as a token, an attribute of a receiver as
    that receiver, a dot and that attribute (spaces around the dot allowed)."""
    if "." not in name:
        return name in tokens
    receiver, attribute = name.split(".", 1)
    pattern = rf"(?<![\w$]){re.escape(receiver)}[ \t]*\.[ \t]*{re.escape(attribute)}(?![\w$])"
    return re.search(pattern, chunk_text) is not None


def check_identifiers(candidate: Candidate, chunk_text: str) -> Dropped | None:
    """None when every name of the claim occurs in the chunk, else why it is dropped."""
    names = claim_identifiers(candidate.claim, candidate.identifiers)
    present = set(_TOKEN.findall(chunk_text))
    missing = [name for name in names if not _present(name, chunk_text, present)]
    if not missing:
        return None
    shown = ", ".join(f"'{name[:40]}'" for name in missing[:DETAIL_NAMES])
    more = f" and {len(missing) - DETAIL_NAMES} more" if len(missing) > DETAIL_NAMES else ""
    return Dropped(candidate, Reason.CLAIM_SYMBOL_NOT_IN_CHUNK,
                   f"the claim names {shown}{more}, not in {candidate.path}:"
                   f"{candidate.start_line}-{candidate.end_line}",
                   GateScores(evidence=True, identifiers=False))


def check_code(candidate: Candidate, chunk_text: str, span: EvidenceSpan) -> Dropped | None:
    """None when the quoted lines (``span``, found by :func:`check_evidence`) hold code and
    the claim names some of the chunk's code, else why the candidate is dropped.

    A comment or a string is on disk like code, so the evidence gate finds a quote of it;
    but it is the repository's words, not what the code does (a comment telling the model
    what to report is quoted exactly). And a claim that names nothing of the code it cites
    ("the password check is disabled"), or names only what a comment mentions, leaves the
    identifier gate nothing to check.
    """
    code = code_only(chunk_text, candidate.path)
    first = span.start_line - candidate.start_line
    quoted = split_lines(code)[first:first + len(span.lines)]
    where = f"{candidate.path}:{span.start_line}-{span.end_line}"
    scores = GateScores(evidence=True, identifiers=True)
    if not any(has_code(line) for line in quoted):
        return Dropped(candidate, Reason.EVIDENCE_NOT_CODE,
                       f"the quoted lines {where} are only comment or string text, not code",
                       scores)
    names = claim_identifiers(candidate.claim, candidate.identifiers)
    tokens = set(_TOKEN.findall(code))
    if any(_present(name, code, tokens) for name in names):
        return None
    chunk = f"{candidate.path}:{candidate.start_line}-{candidate.end_line}"
    if not names:
        why = f"the claim names no code (no identifier in backticks, none listed) of {chunk}"
    else:
        shown = ", ".join(f"'{name[:40]}'" for name in names[:DETAIL_NAMES])
        more = f" and {len(names) - DETAIL_NAMES} more" if len(names) > DETAIL_NAMES else ""
        why = (f"the claim's names ({shown}{more}) are in no code of {chunk}, only in its "
               "comments or strings")
    return Dropped(candidate, Reason.CLAIM_NAMES_NO_CODE, why, scores)


def deterministic_gates(candidate: Candidate, chunk_text: str) -> Finding | Dropped:
    """Evidence, identifiers, then code (the quote is code and the claim names some of it):
    the candidate as a finding, or the first gate's drop."""
    span = check_evidence(candidate, chunk_text)
    if isinstance(span, Dropped):
        return span
    dropped = check_identifiers(candidate, chunk_text) or check_code(candidate, chunk_text, span)
    if dropped is not None:
        return dropped
    return Finding(candidate, span, GateScores(evidence=True, identifiers=True))
