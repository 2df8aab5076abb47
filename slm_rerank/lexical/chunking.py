"""Cuts a file into chunks with line ranges and the symbol each chunk belongs to.

Python is chunked with the stdlib ``ast``; other languages with tree-sitter (through
``tree-sitter-language-pack``, when installed); anything else, or a file that does not
parse, in overlapping line windows.
"""

from __future__ import annotations

import ast
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from itertools import accumulate

from slm_rerank import digests

#: Bump when chunking changes, so that cached chunk boundaries are not reused.
SLICER_VERSION = "3"
MAX_CHUNK_LINES = 120
WINDOW_LINES = 60
WINDOW_OVERLAP = 10

TREE_SITTER_LANGUAGES = {
    ".js": "javascript", ".jsx": "javascript", ".mjs": "javascript", ".cjs": "javascript",
    ".ts": "typescript", ".tsx": "tsx", ".go": "go", ".rs": "rust", ".java": "java",
    ".c": "c", ".h": "c", ".cc": "cpp", ".cpp": "cpp", ".cxx": "cpp", ".hpp": "cpp",
    ".hh": "cpp", ".rb": "ruby", ".php": "php", ".cs": "csharp", ".kt": "kotlin",
    ".scala": "scala", ".swift": "swift", ".lua": "lua", ".pyx": "cython",
}
_DEF_WORDS = ("function", "method", "class", "struct", "interface", "impl", "enum", "trait",
              "module", "namespace", "constructor")


@dataclass(frozen=True, slots=True)
class Chunk:
    """Lines ``start_line``..``end_line`` (1-based, inclusive) of a file."""

    start_line: int
    end_line: int
    symbol: str | None = None
    #: names this chunk declares (a function, a class, module-level assignments)
    defines: tuple[str, ...] = ()


@dataclass
class _Def:
    name: str
    start: int
    end: int
    children: list[_Def] = field(default_factory=list)


# --- Python --------------------------------------------------------------------------------


def _python_defs(nodes: Iterable[ast.stmt]) -> tuple[list[_Def], dict[int, list[str]]]:
    defs: list[_Def] = []
    assigned: dict[int, list[str]] = {}
    for node in nodes:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            start = min([node.lineno, *(d.lineno for d in node.decorator_list)])
            children = _python_defs(node.body)[0] if isinstance(node, ast.ClassDef) else []
            defs.append(_Def(node.name, start, node.end_lineno or node.lineno, children))
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names = [t.id for t in targets if isinstance(t, ast.Name)]
            if names:
                assigned.setdefault(node.lineno, []).extend(names)
    return defs, assigned


_PARSE_ERRORS = (SyntaxError, ValueError, RecursionError, MemoryError)
#: a line that may start a top-level statement: where a long file may be cut to be parsed
_TOP_LINE = re.compile(r"^(?:def |class |async def |@)", re.MULTILINE)
#: a file this long (characters) is parsed a few top-level statements at a time: a
#: syntax tree takes 60-200 times its text (sympy's rubi rules: 6 MiB for a part of 16K)
SEGMENTS_FROM = 8 * 1024
#: the characters one parse is given at least (the statements of a cut, joined)
SEGMENT_CHARS = 4 * 1024


def _continued(text: str) -> bool:
    """Whether the last line of ``text`` (a part or a piece, up to a cut) is continued by a
    backslash: the cut is then inside a statement, although the text before it may parse
    (``ast`` takes a backslash and a CRLF at the end of its text as a line's end)."""
    return text.endswith(("\\\n", "\\\r\n", "\\\r"))


def _shifted(defs: list[_Def], by: int) -> list[_Def]:
    for d in defs:
        d.start += by
        d.end += by
        _shifted(d.children, by)
    return defs


def _last_line_before(text: str, at: int) -> str:
    """The last line before offset ``at`` (a line start) that is not blank."""
    end = at - 1
    while end > 0:
        start = text.rfind("\n", 0, end) + 1
        if text[start:end].strip():
            return text[start:end]
        end = start - 1
    return ""


def _cuts(text: str) -> list[int]:
    """Offsets where ``text`` may be cut between top-level statements: lines that start
    a definition or a decorator at the margin, not right after a decorator (a
    decorator's own definition stays with it), about ``SEGMENT_CHARS`` apart."""
    cuts = [0]
    for found in _TOP_LINE.finditer(text):
        at = found.start()
        if at - cuts[-1] >= SEGMENT_CHARS and not _last_line_before(text, at).startswith("@"):
            cuts.append(at)
    return cuts


def _body_cuts(part: str) -> list[int]:
    """Offsets in ``part`` (a part of ``_cuts``, starting at the margin) where it may be
    cut inside the body of a statement that starts at the margin (a definition, an
    ``if``): lines indented as the first indented line after that statement's first line,
    not right after a decorator, about ``SEGMENT_CHARS`` apart. What is cut here is
    checked by ``_python_defs_of_part``: a cut inside a string, a bracket or a continued
    line leaves the text before it unparseable, as in ``_cuts``, and a cut whose line is
    not indented as the statement's last block is not taken."""
    cuts: list[int] = []
    last = 0
    #: 0: not after a line at the margin; 1: after one; 2: in the body it began
    state = 0
    indent = previous = ""  # previous: the last line that is neither blank nor a comment
    at, size = 0, len(part)
    while at < size:
        end = part.find("\n", at)
        if end < 0:
            end = size
        line = part[at:end]
        stripped = line.strip()
        if stripped and not stripped.startswith("#"):
            if line[0] not in " \t\f":
                state = 1
            elif state == 1:
                indent = line[:len(line) - len(line.lstrip(" \t"))]
                state = 2
            elif (state == 2 and at - last >= SEGMENT_CHARS and line.startswith(indent)
                  and line[len(indent)] not in " \t\f"
                  and not previous.lstrip().startswith("@")):
                cuts.append(at)
                last = at
            previous = line
        at = end + 1
    return cuts


_DEF_NODES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
#: statements with a body, which a piece under ``if 1:`` may go on with (not ``match``: a
#: piece of its body under ``if 1:`` would take statements that are not ``case``)
_TRY_NODES = (ast.Try, *((ast.TryStar,) if hasattr(ast, "TryStar") else ()))
_LOOP_NODES = (ast.If, ast.For, ast.AsyncFor, ast.While)  # with an ``else`` of their own
_BODY_NODES = (*_LOOP_NODES, ast.With, ast.AsyncWith, *_TRY_NODES)
#: pieces that do not parse joined to the next one before the part is given up on
_JOINS = 2
_LINE_END = re.compile(r"\r\n|\r|\n")


def _ast_lines(text: str) -> int:
    """The line ends of ``text`` as ``ast`` counts them: a lone "\r" ends a line too."""
    return text.count("\n") + text.count("\r") - text.count("\r\n")


def _line_of(text: str, number: int) -> str:
    """Line ``number`` (from 1) of ``text``, as ``ast`` numbers them."""
    at = 0
    for _ in range(number - 1):
        found = _LINE_END.search(text, at)
        if found is None:
            return ""
        at = found.end()
    found = _LINE_END.search(text, at)
    return text[at:found.start() if found is not None else len(text)]


def _last_block(node: ast.stmt) -> list[ast.stmt]:
    """The statements of ``node``'s block that ends it (an ``else``, a ``finally``...)."""
    if isinstance(node, _TRY_NODES):
        return node.finalbody or node.orelse or node.handlers[-1].body
    if isinstance(node, _LOOP_NODES):
        return node.orelse or node.body
    body: list[ast.stmt] = node.body  # type: ignore[attr-defined]  # a definition, a with
    return body


def _block_indent(text: str, block: list[ast.stmt], first: int) -> str | None:
    """The indentation of the lines of ``block`` (parsed from ``text`` with its first line
    numbered ``first``): that of its last statement's line, if that statement begins it."""
    stmt = block[-1]
    line = _line_of(text, stmt.lineno - first + 1)
    indent = line[:len(line) - len(line.lstrip(" \t\f"))]
    return indent if indent and len(indent) == stmt.col_offset else None


def _python_defs_of_part(part: str, line: int, cut: bool = True,
                         ) -> tuple[list[_Def], dict[int, list[str]]] | None:
    """``_python_defs`` of ``part`` (after ``line`` lines of its file), parsed a few
    statements at a time where a long statement's body can be cut (``_body_cuts``): a
    piece from such a cut on is parsed under an ``if 1:``, and its statements go on with
    the statement the piece before ended with (a definition's end, a class's
    definitions; nothing of an ``if``). A piece that does not parse is joined to the next
    (twice at most); None when the part cannot be parsed so (the caller parses it whole:
    ``cut`` False).

    Only what one parse of the part would give is given: a piece's first line must be
    indented exactly as the last block of the statement it goes on with (else it would
    go on with a block inside it, or be a wrong indentation one parse refuses), and an
    ``else`` after a piece's body belongs to the ``if 1:`` and nowhere in the part: then
    None too."""
    cuts = _body_cuts(part) if cut and len(part) >= 2 * SEGMENT_CHARS else []
    bounds = [*cuts, len(part)]
    defs: list[_Def] = []
    assigned: dict[int, list[str]] = {}
    open_def: _Def | None = None  # the definition the piece before ended with
    open_kind = ""  # what it ended with: "def", "class", "body" (no definition), ""
    open_indent: str | None = None  # the indentation of its last block's lines
    start, joins = 0, 0
    while bounds:
        end = bounds.pop(0)
        piece = part[start:end]
        inside = start > 0
        if inside and (not open_kind or open_indent is None
                       or not piece.startswith(open_indent)
                       or piece[len(open_indent)] in " \t\f"):
            return None
        try:
            if bounds and _continued(piece):
                raise SyntaxError("a cut after a continued line")
            body = ast.parse("if 1:\n" + piece if inside else piece).body
        except _PARSE_ERRORS:
            if not bounds or joins >= _JOINS:
                return None
            joins += 1
            continue  # the same start, to the next cut
        joins = 0
        shift = line - 1 if inside else line
        first = 2 if inside else 1  # the number of the piece's first line in its parse
        if inside:  # the first statement is the ``if``: the rest of the open body
            head = body[0]
            if not isinstance(head, ast.If) or head.orelse:
                return None
            if open_def is not None:
                if open_kind == "class":
                    open_def.children.extend(_shifted(_python_defs(head.body)[0], shift))
                open_def.end = (head.end_lineno or head.lineno) + shift
            if bounds:  # a piece follows, which may go on with the same block
                open_indent = _block_indent(piece, head.body, first)
            body = body[1:]
        found, names = _python_defs(body)
        defs.extend(_shifted(found, shift))
        for at, named in names.items():
            assigned[at + shift] = named
        if body:
            last = body[-1]
            open_def = found[-1] if isinstance(last, _DEF_NODES) else None
            open_kind = ("class" if isinstance(last, ast.ClassDef) else "def"
                         if open_def is not None else "body"
                         if isinstance(last, _BODY_NODES) else "")
            open_indent = (_block_indent(piece, _last_block(last), first)
                           if open_kind and bounds else None)
        del body
        line += _ast_lines(piece)
        start = end
    return defs, assigned


def _python_defs_in_parts(text: str) -> tuple[list[_Def], dict[int, list[str]]] | None:
    """What ``_python_defs`` finds in the whole of ``text``, parsed a part at a time, so a
    long file's syntax tree is never held whole (a test file of large literals: sympy's
    ``test_spin.py`` is 43 MiB of nodes for 312 KB of text); None when a part does not
    parse even joined to the next two (the caller parses the whole).

    A cut at a line that starts at the margin with ``def``, ``class`` or ``@`` is between
    two statements unless it is inside an unclosed string, bracket or continued line, and
    then the part before it does not parse (a continued line is looked for: ``ast`` may
    take it as ended): so when every part parses, the parts are the file's own top-level
    statements, as one parse of it would give them. A part that
    does not parse is joined to the next (twice at most) before the file is given up on:
    the cut it ends at is in a string, most often a docstring that holds code."""
    bounds = [*_cuts(text)[1:], len(text)]
    defs: list[_Def] = []
    assigned: dict[int, list[str]] = {}
    line = 0  # lines before the part
    start, joins = 0, 0
    while bounds:
        end = bounds.pop(0)
        part = text[start:end]
        parsed = None
        if not (bounds and _continued(part)):  # else the cut is inside a statement
            parsed = _python_defs_of_part(part, line)
            if parsed is None:  # parsed whole, as it would be without cuts inside it
                parsed = _python_defs_of_part(part, line, cut=False)
        if parsed is None:  # a cut inside a string or a statement: on to the next cut
            if not bounds or joins >= _JOINS:
                return None
            joins += 1
            continue
        joins = 0
        defs.extend(parsed[0])
        assigned.update(parsed[1])
        line += _ast_lines(part)
        start = end
    return defs, assigned


def _chunk_python(text: str, lines: list[str]) -> list[Chunk] | None:
    parsed = _python_defs_in_parts(text) if len(text) >= SEGMENTS_FROM else None
    if parsed is None:
        try:
            tree = ast.parse(text)
        except _PARSE_ERRORS:
            return None
        parsed = _python_defs(tree.body)
    return _chunks_from_defs(parsed[0], lines, parsed[1])


# --- tree-sitter ---------------------------------------------------------------------------


def _tree_sitter_parser(language: str):  # type: ignore[no-untyped-def]
    try:
        from tree_sitter_language_pack import get_parser
    except ImportError:
        return None
    try:
        return get_parser(language)  # type: ignore[arg-type]
    except Exception:  # unknown language, or a grammar that cannot be loaded here
        return None


def _ts_name(node) -> str | None:  # type: ignore[no-untyped-def]
    name = node.child_by_field_name("name")
    if name is None:
        for child in node.children:
            if child.type in ("identifier", "type_identifier", "property_identifier"):
                name = child
                break
    if name is None or name.text is None:
        return None
    return name.text.decode("utf-8", "replace")


def _ts_defs(node) -> list[_Def]:  # type: ignore[no-untyped-def]
    defs: list[_Def] = []
    for child in node.named_children:
        kind = child.type
        is_def = (any(word in kind for word in _DEF_WORDS) and (
            kind.endswith(("_definition", "_declaration", "_item", "_specifier"))
            or kind in ("function", "method", "class")
        )) or kind == "type_spec"  # Go: `type Client struct {...}` names its type in a spec
        name = _ts_name(child) if is_def else None
        if name:
            defs.append(_Def(name, child.start_point[0] + 1, child.end_point[0] + 1,
                             _ts_defs(child)))
        else:
            defs.extend(_ts_defs(child))
    return defs


def _chunk_tree_sitter(data: bytes, language: str, lines: list[str]) -> list[Chunk] | None:
    parser = _tree_sitter_parser(language)
    if parser is None:
        return None
    try:
        tree = parser.parse(data)
    except Exception:
        return None
    return _chunks_from_defs(_ts_defs(tree.root_node), lines, {})


# --- chunks from definitions ---------------------------------------------------------------


def _windows(start: int, end: int, symbol: str | None, defines: tuple[str, ...] = ()
             ) -> list[Chunk]:
    """Split ``start..end`` into windows; only the first declares ``defines``."""
    if end - start + 1 <= MAX_CHUNK_LINES:
        return [Chunk(start, end, symbol, defines)]
    out = []
    step = WINDOW_LINES - WINDOW_OVERLAP
    first = True
    for lo in range(start, end + 1, step):
        hi = min(lo + WINDOW_LINES - 1, end)
        out.append(Chunk(lo, hi, symbol, defines if first else ()))
        first = False
        if hi == end:
            break
    return out


def _chunks_from_defs(defs: list[_Def], lines: list[str], assigned: dict[int, list[str]],
                      prefix: str = "", lo: int = 1, hi: int | None = None) -> list[Chunk]:
    hi = len(lines) if hi is None else hi
    chunks: list[Chunk] = []
    cursor = lo

    def gap(until: int) -> None:
        if until < cursor:
            return
        content = [ln.strip() for ln in lines[cursor - 1: until]]
        # Blank lines and a stray comment between two definitions are not worth a chunk.
        if sum(1 for ln in content if ln and not ln.startswith(("#", "//"))) == 0 and (
            sum(1 for ln in content if ln) < 3
        ):
            return
        names = tuple(n for line in range(cursor, until + 1) for n in assigned.get(line, ()))
        chunks.extend(_windows(cursor, until, prefix.rstrip(".") or None, names))

    for d in sorted(defs, key=lambda d: d.start):
        if d.start < cursor:
            continue  # nested inside a definition already taken
        gap(d.start - 1)
        symbol = prefix + d.name
        big = d.end - d.start + 1 > MAX_CHUNK_LINES
        if d.children and big:
            first_child = min(c.start for c in d.children)
            header_end = max(d.start, first_child - 1)
            chunks.append(Chunk(d.start, header_end, symbol, (d.name,)))
            chunks.extend(_chunks_from_defs(d.children, lines, {}, symbol + ".",
                                            header_end + 1, d.end))
        else:
            chunks.extend(_windows(d.start, d.end, symbol, (d.name,)))
        cursor = d.end + 1
    gap(hi)
    return [c for c in chunks if c.end_line >= c.start_line]


def split_lines(text: str) -> list[str]:
    """The lines of ``text`` as ripgrep, git and ``ast`` number them: split at ``\n`` only.

    ``str.splitlines`` also breaks at form feeds, ``\x1c``-``\x1e``, ``\x85`` and
    ``\u2028``; in a file holding one, every later line number would be off. A ``\r``
    ending a line (CRLF files) is dropped.
    """
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()  # the newline that ends the last line does not start another
    return [line[:-1] if line.endswith("\r") else line for line in lines]


def line_starts(text: str) -> list[int]:
    """Where each line of ``text`` starts (as ``split_lines`` counts them), then its length."""
    starts = [0, *accumulate(map((1).__add__, map(len, text.split("\n"))))]
    starts.pop()  # the last piece's end: one past the text, no newline follows it
    if starts[-1] != len(text):
        starts.append(len(text))
    return starts


def chunk_text(name: str, data: bytes, text: str) -> list[Chunk]:
    """Chunks of one file's content, by the best slicer for its kind."""
    lines = split_lines(text) or [""]
    suffix = os.path.splitext(name)[1].lower()
    chunks: list[Chunk] | None = None
    if suffix in (".py", ".pyi"):
        chunks = _chunk_python(text, lines)
    elif suffix in TREE_SITTER_LANGUAGES:
        chunks = _chunk_tree_sitter(data, TREE_SITTER_LANGUAGES[suffix], lines)
    if not chunks:
        chunks = _windows(1, len(lines), None)
    return chunks


# --- the chunk cache key ------------------------------------------------------------------


def content_key(name: str, data: bytes) -> str:
    """Cache key: the content hash, the slicer version, and the file's kind."""
    digest = digests.blake2b(data, digest_size=16)
    digest.update(f"\0{SLICER_VERSION}\0{os.path.splitext(name)[1].lower()}".encode())
    return digest.hexdigest()
