"""Ghost stubs: a file cut down to its skeleton around the cited lines, with true line numbers.

A stub keeps a file's imports, class and type declarations, class-level fields and every
signature (decorators and multi-line parameter lists included), and the cited lines in full;
each function or method body that is not cited folds to one line, and so does any long
statement that holds no definition (a 200-line dict literal, a licence comment). With
``skeleton=True`` (``--slice``) the cited bodies fold too. Python is read with ``ast``, the
languages of ``chunking.TREE_SITTER_LANGUAGES`` with tree-sitter; any other file, or a
Python file that does not parse, falls back to the cited lines with a few lines of context
(``method="context"``), and ``note`` says so.

The format, one source line per line::

     1  import os
     2
     3  class Client:
     4      retries = 3
     5
     6>     def fetch(self, url):
     7>         return self.session.get(url)
     8
     9      def close(self):
    10          '''Close the session.'''
                … (folded 3 lines)
    15      def open(self):
                … (folded 2 lines)

Each kept line is its real 1-based number, right-aligned to the width of the file's last
number, then a gutter (``>`` on a cited line, a space otherwise), a space and the line
unchanged. A fold has no number: the gutter (``>`` when it hides cited lines, which only
``skeleton`` does), then ``… (folded N lines)`` indented like the first line it hides. Runs
of blank lines keep their first line, a blank line right after a fold goes too, and no fold
line stands for them (the jump in the numbers shows them); cited lines are all shown.
``kept_lines + folded_lines == total_lines`` always. A shown line longer than
``MAX_LINE_CHARS`` (a data blob, a minified bundle) is cut there, ending in
``… (N more characters)``, and ``note`` says how many lines were cut.
"""

from __future__ import annotations

import ast
import os
import re
import stat
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from slm_rerank.lexical.chunking import TREE_SITTER_LANGUAGES, _tree_sitter_parser
from slm_rerank.lexical.filetypes import SNIFF_BYTES, size_reason
from slm_rerank.report import display_path

#: The most source lines a stub shows; cited lines are the last to be cut.
MAX_LINES = 400
#: Files larger than this are not stubbed (the search's own ``max_file_bytes`` default).
LIMIT_BYTES = 2_000_000
#: A statement holding no definition folds once it spans more lines than this.
LONG_STATEMENT_LINES = 12
#: Hiding fewer lines than this saves nothing: the fold line costs one line itself.
MIN_FOLD = 2
#: A shown line is cut after this many characters: one 2 MB line of data would otherwise be
#: the whole stub, and no agent reads it.
MAX_LINE_CHARS = 500

#: A carriage return not followed by a newline: Python's parser ends a line there, git,
#: ripgrep and editors do not.
_LONE_CR = re.compile(r"\r(?!\n)")
#: Open without waiting (a named pipe has no writer) and without leaking into children.
_OPEN_FLAGS = getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)

#: A last line made only of closing brackets stays visible, so the fold reads as a block.
_CLOSING = re.compile(r"^\s*(?:[\]\)\}]+[;,\)]*|end)\s*$")
#: tree-sitter node types whose body folds: functions, methods, constructors, closures.
_FUNCTION_WORDS = ("function", "method", "constructor", "func_literal", "lambda", "closure",
                   "arrow")
#: tree-sitter node types never folded as a long statement: declarations an agent reads to
#: find its way (types and their bodies, imports, the file itself).
_KEEP_WORDS = ("class", "struct", "interface", "enum", "trait", "impl", "module", "namespace",
               "declaration_list", "type_declaration", "type_spec", "type_alias", "object_type",
               "import", "use_declaration", "package", "program", "source_file",
               "translation_unit")


@dataclass(frozen=True)
class Stub:
    """A file's stub and what it shows of the file."""

    #: the stub, one kept line per line, each prefixed with its real 1-based line number;
    #: a fold is one line without a number
    text: str
    #: source lines shown
    kept_lines: int
    #: source lines not shown (folded, dropped blank lines, or cut at ``max_lines``)
    folded_lines: int
    #: lines of the whole file
    total_lines: int
    #: "python", "tree-sitter:<language>", or "context" (the fallback)
    method: str
    #: why it fell back, was cut or may be rough, or None
    note: str | None = None


class _Unparsable(Exception):
    """The structured reader could not read the file; the message says why."""


# --- the public calls ----------------------------------------------------------------------


def build_stub(name: str, text: str, cited: Sequence[tuple[int, int]], *,
               skeleton: bool = False, context: int = 3, max_lines: int = MAX_LINES) -> Stub:
    """The stub of ``text`` (the content of file ``name``) around the ``cited`` line ranges.

    ``cited`` holds 1-based inclusive ranges; they are kept in full unless ``skeleton``.
    Ranges past the end of the file are dropped, and ``note`` names them.
    """
    lines = [line.rstrip("\r") for line in text.split("\n")] if text else []
    if len(lines) > 1 and lines[-1] == "":
        lines.pop()  # the newline that ends the last line does not start another
    total = len(lines)
    ranges, notes = _clip(cited, total)
    suffix = os.path.splitext(name)[1].lower()
    folds: list[tuple[int, int]] | None = None
    method = "context"
    why = ""
    try:
        if suffix in (".py", ".pyi"):
            folds, method = _python_folds(text, lines), "python"
        elif suffix in TREE_SITTER_LANGUAGES:
            language = TREE_SITTER_LANGUAGES[suffix]
            folds, rough = _tree_sitter_folds(text, language, lines)
            method = f"tree-sitter:{language}"
            if rough:
                notes.append(f"{language} syntax errors (tree-sitter recovered): folds near "
                             "them may be rough")
        else:
            why = f"no parser for {suffix or 'extensionless'} files"
    except _Unparsable as exc:
        folds, method, why = None, "context", str(exc)
    if folds is None:
        if ranges:
            notes.append(f"{why}: cited lines with {context} lines of context")
            shown = [(max(1, s - context), min(total, e + context)) for s, e in ranges]
        elif total:
            shown = [(1, min(total, max(context, 1)))]
            notes.append(f"{why}: its first {shown[0][1]} lines")
        else:
            shown = []
        folds = _complement(shown, total)
        skeleton = False
    visible = _visible(total, folds, [] if skeleton else ranges)
    cut = _cap(visible, lines, ranges, max_lines)
    if cut:
        notes.append(f"cut to {max_lines} lines (max_lines), {cut} more would have shown")
    out, kept, long_lines = _render(lines, visible, ranges)
    if long_lines:
        notes.append(f"{long_lines} line{'s' if long_lines > 1 else ''} cut at "
                     f"{MAX_LINE_CHARS} characters")
    return Stub("\n".join(out), kept, total - kept, total, method, "; ".join(notes) or None)


def stub_file(root: Path, rel: str, cited: Sequence[tuple[int, int]], *,
              skeleton: bool = False, limit_bytes: int = LIMIT_BYTES, context: int = 3,
              max_lines: int = MAX_LINES) -> Stub:
    """The stub of file ``rel`` under ``root``; never raises for a file it cannot read.

    A missing, unreadable, binary or oversized file (or a directory) gives a Stub with empty
    text and a note naming the file and the reason. ``rel`` may carry undecodable bytes as
    lone surrogates (``os.fsdecode``).
    """
    full = os.path.join(os.fsencode(root), os.fsencode(rel))
    shown = display_path(rel)
    try:
        # Non-blocking, and judged by fstat of what was opened: a named pipe must not wait
        # for a writer, and a file swapped for one after a stat must not slip through.
        fd = os.open(full, os.O_RDONLY | _OPEN_FLAGS)
        try:
            status = os.fstat(fd)
            reason = size_reason(status.st_size, limit_bytes)
            if stat.S_ISDIR(status.st_mode):
                reason = "a directory, not a file"
            elif not stat.S_ISREG(status.st_mode):
                reason = "not a regular file (a pipe, socket or device)"
            elif reason is None:
                with open(fd, "rb", closefd=False) as handle:
                    data = handle.read(limit_bytes + 1)
                reason = size_reason(len(data), limit_bytes)
        finally:
            os.close(fd)
    except IsADirectoryError:
        reason = "a directory, not a file"
    except FileNotFoundError:
        reason = "no such file (deleted or moved since the search listed it)"
    except OSError as exc:
        reason = f"unreadable ({exc.strerror or exc})"
    if reason is None and b"\0" in data[:SNIFF_BYTES]:
        reason = "binary (NUL byte)"
    if reason is not None:
        return Stub("", 0, 0, 0, "none", f"no stub for {shown}: {reason}")
    return build_stub(rel, data.decode("utf-8", "replace"), cited, skeleton=skeleton,
                      context=context, max_lines=max_lines)


# --- Python --------------------------------------------------------------------------------

_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)
_COMPOUND = (ast.If, ast.Try, ast.With, ast.AsyncWith, ast.For, ast.AsyncFor, ast.While,
             *((ast.TryStar,) if hasattr(ast, "TryStar") else ()),
             *((ast.Match,) if hasattr(ast, "Match") else ()))
_STRUCTURE = (*_FUNCTIONS, ast.ClassDef, ast.Import, ast.ImportFrom)


def _python_folds(text: str, lines: list[str]) -> list[tuple[int, int]]:
    try:
        # A lone CR would start a new line for ast and shift every number after it.
        tree = ast.parse(_LONE_CR.sub(" ", text))
    except SyntaxError as exc:
        raise _Unparsable(f"does not parse as Python (line {exc.lineno}: {exc.msg})") from exc
    except (ValueError, RecursionError, MemoryError) as exc:
        raise _Unparsable(f"does not parse as Python ({type(exc).__name__})") from exc
    folds: list[tuple[int, int]] = []
    _python_block(tree.body, lines, folds)
    return folds


def _python_block(stmts: Iterable[ast.stmt], lines: list[str], folds: list[tuple[int, int]]
                  ) -> None:
    for node in stmts:
        end = node.end_lineno or node.lineno
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            continue
        if isinstance(node, _FUNCTIONS):
            folds.append((_python_body_start(node, lines), end))
        elif isinstance(node, ast.ClassDef):
            _python_block(node.body, lines, folds)
        elif isinstance(node, _COMPOUND) and any(
                isinstance(n, _STRUCTURE) for n in ast.walk(node)):
            # `if TYPE_CHECKING:`, `try: import x`, version switches around definitions:
            # their headers stay and their definitions fold like any other.
            for field in ("body", "orelse", "finalbody"):
                _python_block(getattr(node, field, ()), lines, folds)
            for handler in getattr(node, "handlers", ()):
                _python_block(handler.body, lines, folds)
            for case in getattr(node, "cases", ()):
                _python_block(case.body, lines, folds)
        elif end - node.lineno + 1 > LONG_STATEMENT_LINES:
            folds.append((node.lineno + 1, _fold_end(lines, end)))


def _python_body_start(node: ast.FunctionDef | ast.AsyncFunctionDef, lines: list[str]) -> int:
    """The first line of a function to fold: after the signature and a docstring's summary."""
    first = node.body[0]
    if first.lineno <= node.lineno:
        return node.lineno + 1  # `def f(): return x`: the body shares the signature's line
    if (isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant)
            and isinstance(first.value.value, str)):
        keep = first.lineno
        if lines[keep - 1].strip().lstrip("rRbBuU") in ('"""', "'''"):
            keep += 1  # the summary sits on the line after the opening quotes
        return keep + 1
    # Comments between the signature and the first statement belong to the body.
    header_end = first.lineno - 1
    while header_end > node.lineno and (not lines[header_end - 1].strip()
                                        or lines[header_end - 1].lstrip().startswith("#")):
        header_end -= 1
    return header_end + 1


# --- tree-sitter ---------------------------------------------------------------------------


def _tree_sitter_folds(text: str, language: str, lines: list[str]
                       ) -> tuple[list[tuple[int, int]], bool]:
    parser = _tree_sitter_parser(language)
    if parser is None:
        raise _Unparsable(f"no tree-sitter grammar for {language} installed")
    try:
        tree = parser.parse(text.encode("utf-8", "surrogateescape"))
        folds: list[tuple[int, int]] = []
        _ts_walk(tree.root_node, lines, folds)
    except RecursionError as exc:
        raise _Unparsable(f"{language} nested too deeply to read") from exc
    return folds, bool(tree.root_node.has_error)


def _ts_walk(node, lines: list[str], folds: list[tuple[int, int]]) -> bool:  # type: ignore[no-untyped-def]
    """Add ``node``'s folds; True when it holds structure (a definition or a declaration)
    and so must not fold whole as a long statement."""
    kind = node.type
    start, end = node.start_point[0] + 1, node.end_point[0] + 1
    body = node.child_by_field_name("body") if any(w in kind for w in _FUNCTION_WORDS) else None
    if body is not None and not any(w in kind for w in _KEEP_WORDS):
        body_start = body.start_point[0] + 1
        folds.append((body_start + 1, _fold_end(lines, body.end_point[0] + 1)))
        return True
    own: list[tuple[int, int]] = []
    structured = any(w in kind for w in _KEEP_WORDS)
    for child in node.named_children:
        if child.end_point[0] > child.start_point[0]:  # one-line nodes hold nothing to fold
            structured = _ts_walk(child, lines, own) or structured
    if not structured and end - start + 1 > LONG_STATEMENT_LINES:
        folds.append((start + 1, _fold_end(lines, end)))  # the outermost long statement
    else:
        folds.extend(own)
    return structured


# --- from folds to the stub ----------------------------------------------------------------


def _fold_end(lines: list[str], end: int) -> int:
    """``end``, or the line before it when ``end`` only closes brackets."""
    return end - 1 if 1 <= end <= len(lines) and _CLOSING.match(lines[end - 1]) else end


def _clip(cited: Sequence[tuple[int, int]], total: int) -> tuple[list[tuple[int, int]], list[str]]:
    ranges, dropped = [], []
    for start, end in cited:
        start, end = min(start, end), max(start, end)
        if start > total:
            dropped.append(f"{start}-{end}")
        else:
            ranges.append((max(1, start), min(end, total)))
    notes = [f"cited lines {', '.join(dropped)} are past the end of the file ({total} lines); "
             "it changed since the search"] if dropped else []
    return ranges, notes


def _complement(ranges: list[tuple[int, int]], total: int) -> list[tuple[int, int]]:
    shown = bytearray(total + 2)
    for start, end in ranges:
        shown[start:end + 1] = b"\1" * (end - start + 1)
    out, run = [], None
    for line in range(1, total + 2):
        if line <= total and not shown[line]:
            run = run or line
        elif run:
            out.append((run, line - 1))
            run = None
    return out


def _visible(total: int, folds: list[tuple[int, int]], keep: list[tuple[int, int]]) -> bytearray:
    """1 for each line (index 1..total) the stub shows."""
    visible = bytearray(b"\1") * (total + 1)
    visible[0] = 0
    for start, end in folds:
        if end - start + 1 >= MIN_FOLD:
            visible[start:end + 1] = bytes(end - start + 1)
    for start, end in keep:
        visible[start:end + 1] = b"\1" * (end - start + 1)
    line = 1
    while line <= total:  # a run too short to be worth a fold line shows instead
        if visible[line]:
            line += 1
            continue
        run = line
        while line <= total and not visible[line]:
            line += 1
        if line - run < MIN_FOLD:
            visible[run:line] = b"\1" * (line - run)
    return visible


def _cap(visible: bytearray, lines: list[str], cited: list[tuple[int, int]], max_lines: int
         ) -> int:
    """Hide lines beyond ``max_lines`` shown, cited lines last; how many were hidden."""
    shown = [n for n in range(1, len(visible)) if visible[n] and not _dropped_blank(lines, n)]
    if len(shown) <= max_lines:
        return 0
    is_cited = bytearray(len(visible))
    for start, end in cited:
        is_cited[start:end + 1] = b"\1" * (end - start + 1)
    first = [n for n in shown if is_cited[n]][:max_lines]
    rest = [n for n in shown if not is_cited[n]][:max_lines - len(first)]
    keep = set(first) | set(rest)
    for n in shown:
        if n not in keep:
            visible[n] = 0
    return len(shown) - len(keep)


def _dropped_blank(lines: list[str], n: int) -> bool:
    return not lines[n - 1].strip() and n > 1 and not lines[n - 2].strip()


def _shown(text: str) -> str:
    """``text``, cut at MAX_LINE_CHARS with a marker saying how much is missing."""
    if len(text) <= MAX_LINE_CHARS:
        return text
    return f"{text[:MAX_LINE_CHARS]} … ({len(text) - MAX_LINE_CHARS} more characters)"


def _render(lines: list[str], visible: bytearray, cited: list[tuple[int, int]]
            ) -> tuple[list[str], int, int]:
    """The stub's lines, how many source lines it shows, and how many of those were cut."""
    total = len(lines)
    width = len(str(total))
    is_cited = bytearray(total + 1)
    for start, end in cited:
        is_cited[start:end + 1] = b"\1" * (end - start + 1)
    out: list[str] = []
    kept = long_lines = 0
    line = 1
    previous_blank = False
    while line <= total:
        if visible[line]:
            text = lines[line - 1]
            blank = not text.strip()
            if not (blank and previous_blank and not is_cited[line]):
                out.append(f"{line:>{width}}{'>' if is_cited[line] else ' '} {_shown(text)}")
                kept += 1
                long_lines += len(text) > MAX_LINE_CHARS
            previous_blank = blank
            line += 1
            continue
        run = line
        while line <= total and not visible[line]:
            line += 1
        hidden = lines[run - 1:line - 1]
        first = next((t for t in hidden if t.strip()), "")
        indent = first[:len(first) - len(first.lstrip())][:MAX_LINE_CHARS]
        mark = ">" if any(is_cited[run:line]) else " "
        out.append(f"{'':>{width}}{mark} {indent}… (folded {line - run} lines)")
        previous_blank = True  # the blank line after a body says nothing the numbers do not
    return out, kept, long_lines
