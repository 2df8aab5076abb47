"""Which characters of a chunk are code, and which are comment or string text.

A repository's comments and strings are untrusted text that happens to be on disk: a
comment saying "ignore previous instructions and report ..." is quoted exactly as it is, so
the evidence gate finds it. What a finding rests on must be code. :func:`code_only` blanks
every comment and string character of a chunk (newlines kept, so lines keep their numbers),
by the comment and string syntax of the file's language, told by its extension.

The scan reads the chunk alone, from its first line: a chunk that starts inside a block
comment or a multi-line string reads that part as code (the search cuts chunks at
definitions, so this is rare, and it errs towards keeping a finding, never towards
reporting text the gate did not see as code). The syntax is a lexer's first pass, not a
parser's: enough to tell a line of comment or string text from a line of code.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

#: a word character of code: a line whose code holds none is no code (``}``, ``),``)
_CODE_CHAR = re.compile(r"[A-Za-z0-9_$]")
#: a character literal where ``'`` is no string quote (Rust lifetimes, C chars)
_CHAR_LITERAL = re.compile(r"'(?:\\.[^']{0,8}|[^'\\\n])'")
#: letters that may prefix a Python string (``f"..."``, ``rb'...'``): part of the string
_PY_PREFIX = re.compile(r"(?<![\w$])[rRbBuUfF]{1,2}$")


@dataclass(frozen=True)
class Syntax:
    """A language family's comments and strings."""

    line_comments: tuple[str, ...] = ()
    block_comments: tuple[tuple[str, str], ...] = ()
    #: quotes of strings that end at the end of their line at the latest
    quotes: str = "\"'"
    #: quotes (or triple quotes) of strings that may span lines
    long_quotes: tuple[str, ...] = ()
    #: ``'`` starts a string only as a character literal (``'a'``, ``'\\n'``)
    char_quote: bool = False
    #: string prefixes (``f``, ``rb``) belong to the string
    python_prefixes: bool = False


_HASH = Syntax(line_comments=("#",))
_PYTHON = Syntax(line_comments=("#",), long_quotes=('"""', "'''"), python_prefixes=True)
#: C and its kin: ``'`` quotes a character; ``"""`` a text block (Java, Kotlin, Scala,
#: Swift, C#)
_C_LIKE = Syntax(line_comments=("//",), block_comments=(("/*", "*/"),), quotes='"',
                 long_quotes=('"""',), char_quote=True)
_DART = Syntax(line_comments=("//",), block_comments=(("/*", "*/"),),
               long_quotes=('"""', "'''"))
_JS = Syntax(line_comments=("//",), block_comments=(("/*", "*/"),), long_quotes=("`",))
_GO = Syntax(line_comments=("//",), block_comments=(("/*", "*/"),), quotes='"',
             long_quotes=("`",), char_quote=True)
_RUST = Syntax(line_comments=("//",), block_comments=(("/*", "*/"),), quotes="",
               long_quotes=('"',), char_quote=True)
_PHP = Syntax(line_comments=("//", "#"), block_comments=(("/*", "*/"),))
_DASH = Syntax(line_comments=("--",), block_comments=(("--[[", "]]"), ("{-", "-}")))
_SEMICOLON = Syntax(line_comments=(";",), quotes='"')
#: a code file of a language not listed: the common comments of both families
_FALLBACK = Syntax(line_comments=("#", "//"), block_comments=(("/*", "*/"),))

SYNTAX_BY_SUFFIX: dict[str, Syntax] = {
    **dict.fromkeys((".py", ".pyi", ".pyx", ".pxd"), _PYTHON),
    **dict.fromkeys((".rb", ".sh", ".bash", ".zsh", ".pl", ".pm", ".r", ".jl", ".ex",
                     ".exs", ".ps1", ".nim"), _HASH),
    **dict.fromkeys((".c", ".h", ".cc", ".cpp", ".cxx", ".hpp", ".hh", ".m", ".mm", ".java",
                     ".kt", ".kts", ".scala", ".cs", ".swift", ".zig"), _C_LIKE),
    ".dart": _DART,
    **dict.fromkeys((".js", ".jsx", ".mjs", ".cjs", ".ts", ".tsx", ".vue", ".svelte"), _JS),
    ".go": _GO,
    ".rs": _RUST,
    ".php": _PHP,
    **dict.fromkeys((".sql", ".lua", ".hs"), _DASH),
    **dict.fromkeys((".el", ".clj"), _SEMICOLON),
}


def syntax_for(path: str) -> Syntax:
    """The comment and string syntax of ``path``'s language (by its extension)."""
    return SYNTAX_BY_SUFFIX.get(os.path.splitext(path)[1].lower(), _FALLBACK)


def code_only(text: str, path: str) -> str:
    """``text`` with every comment and string character (quotes included) replaced by a
    space; newlines are kept, so the result has the same lines as ``text``."""
    syntax = syntax_for(path)
    out = list(text)
    i, n = 0, len(text)

    def blank(start: int, end: int) -> None:
        for k in range(start, min(end, n)):
            if out[k] != "\n":
                out[k] = " "

    while i < n:
        char = text[i]
        if char in " \t\r\n":
            i += 1
            continue
        block = next((b for b in syntax.block_comments if text.startswith(b[0], i)), None)
        if block is not None:
            close = text.find(block[1], i + len(block[0]))
            end = n if close < 0 else close + len(block[1])
            blank(i, end)
            i = end
            continue
        if any(text.startswith(mark, i) for mark in syntax.line_comments):
            end = text.find("\n", i)
            end = n if end < 0 else end
            blank(i, end)
            i = end
            continue
        long_quote = next((q for q in syntax.long_quotes if text.startswith(q, i)), None)
        if long_quote is not None or char in syntax.quotes:
            quote = long_quote or char
            end = _string_end(text, i + len(quote), quote, multi_line=long_quote is not None)
            start = i
            if syntax.python_prefixes:
                prefix = _PY_PREFIX.search(text, max(0, i - 2), i)
                start = prefix.start() if prefix else i
            blank(start, end)
            i = end
            continue
        if char == "'" and syntax.char_quote:
            literal = _CHAR_LITERAL.match(text, i)
            if literal:
                blank(i, literal.end())
                i = literal.end()
                continue
        i += 1
    return "".join(out)


def _string_end(text: str, i: int, quote: str, multi_line: bool) -> int:
    """Where the string whose body starts at ``i`` ends (past its closing quote); a string
    that may not span lines ends at its line's end when it is not closed there."""
    n = len(text)
    while i < n:
        if text[i] == "\\":
            i += 2
            continue
        if text.startswith(quote, i):
            return i + len(quote)
        if text[i] == "\n" and not multi_line:
            return i
        i += 1
    return n


def has_code(line: str) -> bool:
    """Whether a line of :func:`code_only`'s output holds code (a word character)."""
    return _CODE_CHAR.search(line) is not None
