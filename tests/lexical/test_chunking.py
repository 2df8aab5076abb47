"""Slicing files into chunks: ast for Python, tree-sitter for other languages, windows else."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from search_fixtures import make_repo, result_paths, search

from slm_rerank.lexical import chunking
from slm_rerank.lexical.chunk_cache import ChunkCache
from slm_rerank.lexical.chunking import (
    MAX_CHUNK_LINES,
    WINDOW_LINES,
    WINDOW_OVERLAP,
    Chunk,
    chunk_text,
)


def chunks_of(name: str, text: str) -> list[Chunk]:
    return chunk_text(name, text.encode(), text)


def symbols(chunks: list[Chunk]) -> list[str | None]:
    return [c.symbol for c in chunks]


def big_class(methods: int = 12, body_lines: int = 12) -> str:
    """A class longer than one chunk, with ``methods`` methods."""
    out = ["import os", "", "", "class Store:", '    """Keeps things."""', ""]
    for i in range(methods):
        out.append(f"    def method_{i}(self):")
        out += [f"        x{j} = {j}" for j in range(body_lines)]
        out.append("")
    out += ["", "def helper():", "    return 1", ""]
    return "\n".join(out)


def test_a_python_function_is_one_chunk_named_after_it() -> None:
    text = "import os\n\n\ndef backoff(n):\n    return 2 ** n\n"

    chunks = chunks_of("retry.py", text)

    assert Chunk(4, 5, "backoff", ("backoff",)) in chunks


def test_a_decorated_function_chunk_starts_at_its_decorator() -> None:
    text = "import functools\n\n\n@functools.cache\ndef backoff(n):\n    return n\n"

    (chunk,) = [c for c in chunks_of("retry.py", text) if c.symbol == "backoff"]

    assert (chunk.start_line, chunk.end_line) == (4, 6)


def test_a_small_python_class_is_one_chunk() -> None:
    text = "class Policy:\n    def retry(self):\n        return 1\n"

    assert chunks_of("policy.py", text) == [Chunk(1, 3, "Policy", ("Policy",))]


def test_a_large_python_class_is_sliced_into_class_dot_method_chunks() -> None:
    text = big_class()
    assert len(text.splitlines()) > MAX_CHUNK_LINES

    chunks = chunks_of("store.py", text)

    names = symbols(chunks)
    assert names[0] is None  # the imports above the class
    assert "Store" in names  # the class header and docstring
    assert [f"Store.method_{i}" for i in range(12)] == [n for n in names if n and "." in n]
    assert names[-1] == "helper"
    method_0 = chunks[names.index("Store.method_0")]
    assert text.splitlines()[method_0.start_line - 1].strip() == "def method_0(self):"
    assert method_0.defines == ("method_0",)


def test_python_with_a_syntax_error_falls_back_to_overlapping_line_windows() -> None:
    text = "def broken(:\n" + "x = 1\n" * 150

    chunks = chunks_of("broken.py", text)

    assert all(c.symbol is None for c in chunks)
    assert chunks[0] == Chunk(1, WINDOW_LINES)
    assert chunks[1].start_line == WINDOW_LINES - WINDOW_OVERLAP + 1
    assert chunks[-1].end_line == 151


def test_a_file_of_unknown_kind_is_sliced_in_windows() -> None:
    text = "".join(f"line {i}\n" for i in range(1, 201))

    chunks = chunks_of("notes.txt", text)

    assert len(chunks) > 1 and chunks[-1].end_line == 200
    for before, after in zip(chunks, chunks[1:], strict=False):
        assert after.start_line == before.end_line - WINDOW_OVERLAP + 1


def test_an_empty_file_is_one_empty_chunk() -> None:
    assert chunks_of("empty.py", "") == [Chunk(1, 1)]


def test_the_tree_sitter_language_pack_is_installed() -> None:
    from tree_sitter_language_pack import get_parser

    for language in ("javascript", "typescript", "go"):
        assert get_parser(language) is not None


JS = """\
import x from "x";

function retryCall(n) {
  return n;
}

class Client {
  send() {
    return retryCall(1);
  }
}
"""

TS = """\
export function retryCall(n: number): number {
  return n;
}

interface Options {
  tries: number;
}
"""

GO = """\
package retry

func Backoff(n int) int {
\treturn n * 2
}

type Client struct {
\ttries int
}

func (c *Client) Do() error {
\treturn nil
}
"""


def test_javascript_is_sliced_by_tree_sitter_with_function_and_class_names() -> None:
    chunks = chunks_of("client.js", JS)

    assert Chunk(3, 5, "retryCall", ("retryCall",)) in chunks
    assert Chunk(7, 11, "Client", ("Client",)) in chunks


def test_typescript_is_sliced_by_tree_sitter() -> None:
    chunks = chunks_of("client.ts", TS)

    assert Chunk(1, 3, "retryCall", ("retryCall",)) in chunks
    assert Chunk(5, 7, "Options", ("Options",)) in chunks


def test_go_is_sliced_by_tree_sitter_with_functions_methods_and_types() -> None:
    chunks = chunks_of("retry.go", GO)

    assert Chunk(3, 5, "Backoff", ("Backoff",)) in chunks
    assert Chunk(7, 9, "Client", ("Client",)) in chunks
    assert Chunk(11, 13, "Do", ("Do",)) in chunks


def test_chunks_cover_every_line_of_a_long_javascript_function_in_windows() -> None:
    body = "".join(f"  step{i}();\n" for i in range(200))
    text = f"function longOne() {{\n{body}}}\n"

    chunks = chunks_of("long.js", text)

    assert len(chunks) > 1
    assert all(c.symbol == "longOne" for c in chunks)
    assert chunks[0].start_line == 1 and chunks[-1].end_line == 202
    assert chunks[0].defines == ("longOne",) and chunks[1].defines == ()


# --- the chunk cache -----------------------------------------------------------------------


def test_the_slice_cache_round_trips_chunks_by_content(tmp_path: Path) -> None:
    cache = ChunkCache(tmp_path / "chunks")
    data = big_class().encode()

    first = cache.slice("store.py", data, data.decode())
    again = cache.get(chunking.content_key("store.py", data))

    assert again == first
    assert cache.get(chunking.content_key("store.py", data + b"\n# changed")) is None


def test_search_writes_the_slice_cache_under_chunks_and_never_into_the_tree(
        tmp_path: Path) -> None:
    root = make_repo(tmp_path / "repo", {"pkg/retry.py": "def retry():\n    return 1\n",
                                         "pkg/client.py": "from pkg.retry import retry\n"})
    before = sorted(p.relative_to(root) for p in root.rglob("*") if ".git" not in p.parts)
    cache = tmp_path / "cache"

    search(root, "retry", cache=cache)

    after = sorted(p.relative_to(root) for p in root.rglob("*") if ".git" not in p.parts)
    assert after == before
    written = [p for p in cache.rglob("*") if p.is_file()]
    assert len(written) == 2
    assert all(p.relative_to(cache).parts[0] == "chunks" for p in written)
    assert all(p.suffix == ".json" for p in written)


def test_a_second_search_reuses_cached_slices_instead_of_slicing_again(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = make_repo(tmp_path / "repo", {"pkg/retry.py": big_class().replace("helper", "retry")})
    cache = tmp_path / "cache"
    first = search(root, "retry", cache=cache)

    def must_not_slice(*args: object) -> list[Chunk]:
        raise AssertionError("sliced again although the content did not change")

    monkeypatch.setattr(chunking, "chunk_text", must_not_slice)
    second = search(root, "retry", cache=cache)

    assert result_paths(second) == result_paths(first) == ["pkg/retry.py"]
    assert second.results[0].symbol == first.results[0].symbol == "retry"


# --- a long Python file, parsed a few statements at a time ---------------------------------


def long_module(traps: bool) -> str:
    """Top-level functions, decorated ones, classes and assignments, past
    ``SEGMENTS_FROM``; with ``traps``, lines that look like a cut at the margin but are
    inside a string, a bracket or a continued line, or a decorator with a comment before
    its function."""
    out = ['"""A long module."""', "import os", "LIMIT = 3", ""]
    for i in range(480):
        out.append("")
        if i % 5 == 0:
            out += ["@cached", "@retry(", "    times=3,", ")"]
        if i % 7 == 0:
            out += [f"class Store{i}:", f"    size = {i}", "", "    def get(self):",
                    "        return 1", "", "    async def put(self):", "        pass"]
        else:
            out += [f"def helper_{i}(x):", f"    values = [{', '.join(map(str, range(40)))}]",
                    "    return sum(values) + x"]
        out.append(f"NAME_{i} = 'n{i}'")
        if traps and i % 40 == 20:
            out += ['DOC = """', "def not_a_function():", "class NotAClass:", '"""',
                    "TOTAL = (LIMIT", "@ LIMIT)", "SUM = 1 + \\", "2"]
        if traps and i == 450:
            out += ["@cached", "# a comment between a decorator and its function",
                    "def commented(x):", "    return x"]
    return "\n".join(out) + "\n"


@pytest.mark.parametrize("traps", [False, True])
def test_a_long_python_file_gives_the_chunks_of_one_parse_of_it(
        monkeypatch: pytest.MonkeyPatch, traps: bool) -> None:
    text = long_module(traps)
    assert len(text) > 2 * chunking.SEGMENTS_FROM
    in_parts = chunks_of("long.py", text)
    monkeypatch.setattr(chunking, "SEGMENTS_FROM", 1 << 40)  # one parse of the whole
    whole = chunks_of("long.py", text)

    assert in_parts == whole
    assert Chunk(20, 22, "helper_1", ("helper_1",)) in whole
    assert any(c.symbol == "Store7" for c in whole)
    assert chunking._python_defs_in_parts(text) is not None  # it was parsed in parts


@pytest.mark.parametrize("trap", [
    'DOC = """\ndef fake():\n"""\n',  # a margin line inside a string
    "TOTAL = (LIMIT\n@ LIMIT)\n",  # inside a bracket
    "SUM = 1 + \\\n@ LIMIT\n",  # a continued line (not valid: no parse at all)
])
def test_a_cut_inside_a_statement_joins_its_part_to_the_next(
        monkeypatch: pytest.MonkeyPatch, trap: str) -> None:
    # the first line a cut may be made at, past SEGMENT_CHARS, is inside a statement: the
    # part before it does not parse, and joined to the next it does; what is found is what
    # one parse finds (the continued line parses in no way: one parse, and no chunks)
    text = ("LIMIT = 1\n" * (chunking.SEGMENT_CHARS // 10 + 1) + trap
            + "def real():\n    return 1\n" + "VALUE = 2\n" * 3000)
    assert len(text) > chunking.SEGMENTS_FROM
    assert (chunking._python_defs_in_parts(text) is None) is ("SUM" in trap)
    in_parts = chunks_of("long.py", text)
    monkeypatch.setattr(chunking, "SEGMENTS_FROM", 1 << 40)
    assert in_parts == chunks_of("long.py", text)
    assert any(c.symbol == "real" for c in in_parts) is ("SUM" not in trap)


def test_a_string_over_many_cuts_sends_the_file_to_one_parse(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # a docstring holding a margin ``def`` every SEGMENT_CHARS: the parts it ends are
    # joined to the next twice at most, then the whole file is parsed at once
    filler = "x = 1\n" * (chunking.SEGMENT_CHARS // 6 + 1)
    fake = "".join(f"def fake{i}():\n{filler}" for i in range(4))
    text = f"{filler}DOC = \"\"\"\n{fake}\"\"\"\ndef real():\n    return 1\n{filler}"
    assert chunking._python_defs_in_parts(text) is None
    monkeypatch.setattr(chunking, "_JOINS", 4)
    assert chunking._python_defs_in_parts(text) is not None  # joined four times, it parses
    in_parts = chunks_of("long.py", text)
    monkeypatch.setattr(chunking, "SEGMENTS_FROM", 1 << 40)
    assert in_parts == chunks_of("long.py", text)
    assert any(c.symbol == "real" for c in in_parts)
    assert not any(c.symbol == "fake1" for c in in_parts)


def chunking_peaks(text: str, monkeypatch: pytest.MonkeyPatch) -> tuple[int, int]:
    """The peak memory (tracemalloc) of chunking ``text`` in parts, and in one parse."""
    import tracemalloc

    def peak() -> int:
        tracemalloc.start()
        try:
            chunks_of("long.py", text)
            return tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()

    in_parts = peak()
    monkeypatch.setattr(chunking, "SEGMENTS_FROM", 1 << 40)
    return in_parts, peak()


def test_a_long_python_file_is_never_held_as_one_syntax_tree(
        monkeypatch: pytest.MonkeyPatch) -> None:
    in_parts, whole = chunking_peaks(long_module(traps=False), monkeypatch)
    assert in_parts < whole / 2, (in_parts, whole)


def test_a_long_python_file_with_a_lone_carriage_return_gives_the_chunks_of_one_parse(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # ``ast`` ends a line at a lone "\r" too (a comment here): the parts after it must be
    # numbered as one parse numbers them, not by their "\n"s alone
    text = "# old\r# Mac line\n" + long_module(traps=False)
    assert chunking._python_defs_in_parts(text) is not None
    in_parts = chunks_of("long.py", text)
    monkeypatch.setattr(chunking, "SEGMENTS_FROM", 1 << 40)
    assert in_parts == chunks_of("long.py", text)


# --- a long statement, parsed a few of its body's statements at a time ----------------------


def long_bodies(traps: bool) -> str:
    """A module of three long statements at the margin, each past twice SEGMENT_CHARS: a
    function of many assignments (as generated rule tables are), a class of many methods
    with a nested class, and an ``if`` holding definitions; with ``traps``, lines at a
    body's indentation inside a string, a bracket and after a decorator, a ``try`` whose
    ``except`` is at the body's indentation, and statements at the margin between them."""
    out = ["import os", "", "def rules():"]
    for i in range(900):
        out.append(f"    pattern{i} = Pattern(Integral(x_ ** {i}), cons{i % 7}, cons{i % 11})")
        if traps and i % 150 == 75:
            out += ['    """', "    not_a_statement = 1", '    """', "    table = [",
                    "    1, 2,", "    3]", "    try:", "        total = 1", "    except E:",
                    "        total = 2", "    def inner():", "        return 3"]
    out += ["    return pattern1", "", "LIMIT = 3", "", "@register", "class Big(Base):",
            "    '''A class.'''", ""]
    for i in range(500):
        if traps and i % 60 == 30:
            out += ["    @property", "    # a comment between a decorator and its method"]
        out += [f"    def method_{i}(self, x):", f"        return x + {i} + len('{'y' * 20}')", ""]
        if i == 250:
            out += ["    class Inner:", "        def deep(self):", "            return 1", ""]
    out += ["NAME = 'n'", "", "if os.name:"]
    for i in range(600):
        out += [f"    def guarded_{i}(x):", f"        return x * {i} + {'1' * 30}"]
    out += ["", "FINAL: int = 4", ""]
    return "\n".join(out) + "\n"


@pytest.mark.parametrize("traps", [False, True])
def test_a_long_statement_gives_the_chunks_of_one_parse_of_its_file(
        monkeypatch: pytest.MonkeyPatch, traps: bool) -> None:
    text = long_bodies(traps)
    starts = [text.index(s) for s in ("def rules", "class Big", "if os.name")]
    assert all(b - a > 2 * chunking.SEGMENT_CHARS for a, b in zip(starts, starts[1:], strict=False))
    assert chunking._body_cuts(text)  # the body may be cut
    parts = chunking._python_defs_in_parts(text)
    whole = chunking._python_defs(ast.parse(text).body)
    assert parts == whole
    names = [d.name for d in whole[0]]
    assert names == ["rules", "Big"]
    big = whole[0][1]
    assert [c.name for c in big.children][:2] == ["method_0", "method_1"]
    assert any(c.name == "Inner" and c.children for c in big.children)
    assert sorted(whole[1].values()) == [["FINAL"], ["LIMIT"], ["NAME"]]
    in_parts = chunks_of("long.py", text)
    monkeypatch.setattr(chunking, "SEGMENTS_FROM", 1 << 40)  # one parse of the whole
    assert in_parts == chunks_of("long.py", text)


def test_a_long_statement_is_never_held_as_one_syntax_tree(
        monkeypatch: pytest.MonkeyPatch) -> None:
    in_parts, whole = chunking_peaks(long_bodies(traps=False), monkeypatch)
    assert in_parts < whole / 3, (in_parts, whole)


@pytest.mark.parametrize("after", [
    "else:\n    z = 3\n",  # an ``else`` with no ``if``: the ``if 1:`` of a piece would take it
    "elif x:\n    z = 3\n",
    "    z = (\n",  # a bracket never closed
])
def test_a_long_definition_followed_by_what_does_not_parse_gives_no_definitions(
        monkeypatch: pytest.MonkeyPatch, after: str) -> None:
    text = "def rules():\n" + "    value = 1\n" * (chunking.SEGMENT_CHARS // 5) + after
    assert chunking._body_cuts(text)
    assert chunking._python_defs_in_parts(text) is None
    in_parts = chunks_of("long.py", text)
    monkeypatch.setattr(chunking, "SEGMENTS_FROM", 1 << 40)
    assert in_parts == chunks_of("long.py", text)
    assert all(c.symbol != "rules" for c in in_parts)  # no parse: not chunked by definition


def test_a_cut_inside_a_bracket_of_a_long_body_is_joined_to_the_next_piece(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # a long list whose items are at the body's indentation: the cuts in it do not parse,
    # each such piece is joined to the next, and the definitions come out as one parse's
    rows = "\n".join(f"    {i}," for i in range(chunking.SEGMENT_CHARS // 4))
    text = ("def table():\n    return [\n" + rows + "\n    ]\n\n\ndef after():\n    return 1\n"
            + "def more():\n" + "    value = 2\n" * (chunking.SEGMENT_CHARS // 3))
    table = text[:text.index("def after")]
    assert len(chunking._body_cuts(table)) == chunking._JOINS
    whole = chunking._python_defs(ast.parse(text).body)
    assert chunking._python_defs_in_parts(text) == whole
    assert [d.name for d in whole[0]] == ["table", "after", "more"]
    assert chunking._python_defs_of_part(table, 0) == chunking._python_defs(
        ast.parse(table).body)  # in pieces, joined: not given up on


def test_a_long_body_whose_cuts_do_not_parse_is_parsed_whole_not_its_file(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # a dict whose values sit at the indentation a body cut takes: every cut in it fails,
    # the part is parsed whole (as before cuts inside bodies), the other parts in parts
    rows = "\n".join(f"    'k{i}':\n        {i}," for i in range(chunking.SEGMENT_CHARS // 6))
    text = ("CONFIG = {\n" + rows + "\n}\n\n"
            + "".join(f"def f{i}():\n    return {i}\n" for i in range(3000)))
    first = text[:text.index("def f")]
    assert len(chunking._body_cuts(first)) > chunking._JOINS + 1
    assert chunking._python_defs_of_part(first, 0) is None
    parsed = chunking._python_defs_in_parts(text)
    assert parsed is not None and parsed == chunking._python_defs(ast.parse(text).body)
    assert len(chunking._cuts(text)) > 2  # the functions were parsed in parts


def test_a_long_body_with_a_lone_carriage_return_gives_the_lines_of_one_parse() -> None:
    text = ("def rules():\n    # old\r    first = 1\n"
            + "    value = 1\n" * (chunking.SEGMENT_CHARS // 5)
            + "    last = 2\n\ndef after():\n    return 1\n")
    assert chunking._body_cuts(text)
    whole = chunking._python_defs(ast.parse(text).body)
    assert chunking._python_defs_in_parts(text) == whole
    assert whole[0][1].start == text.count("\n") + 1 - 1  # ``after`` as ast numbers it


X8 = "        x = 1\n" * 6
X4 = "    x = 1\n" * 10


@pytest.mark.parametrize("text", [
    # the first body line is not the body the cut is in: a header's comment, a string, a
    # bracket or a backslash at the margin, a lone "\r", form feeds
    "class A:  # c\n    def run(self):\n" + X8 + "        def helper():\n            pass\n"
    + X8 + "y = 1\n",
    "class T:\n    def a(self):\n        s = '''\nx'''\n    def b(self):\n" + X8
    + "        def helper():\n            pass\n" + X8 + "y = 1\n",
    "class A:\n    d = {\n'a':\n        1}\n    if c:\n" + X8
    + "        def g():\n            pass\n" + X8 + "y = 1\n",
    "class T:\n    x = 1\n\\\n    def b(self):\n" + X8 + "        def helper():\n"
    "            pass\n" + X8 + "y = 1\n",
    "class A:\r    if c:\n" + X8 + "        def g():\n            pass\n" + X8 + "y = 1\n",
    "if a:\n    pass\n\fclass B:\n  if c:\n" + X4 + "    def g():\n      pass\n" + X4
    + "y = 1\n",
    "class A:\n    \f  if c:\n" + X4 + "    def g():\n      pass\n" + X4 + "y = 1\n",
    # an indentation one parse refuses; a ``match`` whose body holds what is not a case
    "def f():  # c\n  if c:\n    pass\n" + "  y = 1\n" * 20 + "    z = 1\ndef g():\n    pass\n",
    "match v:\n    case 1:\n" + "        x = 1\n" * 10 + "    x = 1\n" * 11
    + "def g():\n    pass\n",
])
def test_a_piece_goes_on_only_with_the_block_its_indentation_is_in(
        monkeypatch: pytest.MonkeyPatch, text: str) -> None:
    # found by an attack session: each gave a class a nested function as a method, or
    # definitions where one parse fails
    monkeypatch.setattr(chunking, "SEGMENT_CHARS", 64)
    monkeypatch.setattr(chunking, "SEGMENTS_FROM", 128)
    try:
        whole = chunking._python_defs(ast.parse(text).body)
    except SyntaxError:
        whole = None
    parts = chunking._python_defs_in_parts(text)
    assert parts == whole or (whole is None and parts is None)
    in_parts = chunks_of("cut.py", text)
    monkeypatch.setattr(chunking, "SEGMENTS_FROM", 1 << 40)
    assert in_parts == chunks_of("cut.py", text)


@pytest.mark.parametrize("body", [False, True])
def test_a_cut_after_a_continued_line_is_not_taken(body: bool) -> None:
    # ``ast`` parses a text that ends in a backslash and a CRLF (a helper session's attack):
    # a cut at a decorator line right after a continued one would then make the
    # decorator's expression the next definition's, a line too early; the part (or a
    # body's piece) goes on to the next cut instead, and one parse's answer is given
    indent = "    " if body else ""
    head = "class Big:\r\n" if body else ""
    line = f"{indent}x = 1\r\n"
    # the continued line starts before SEGMENT_CHARS, the decorator's after: the first cut
    lines = (chunking.SEGMENT_CHARS - len(head) - 1) // len(line)
    before = head + line * lines + f"{indent}w = a \\\r\n"
    text = (before + f"{indent}@ b\r\n{indent}def f(): pass\r\n"
            + line * (chunking.SEGMENT_CHARS // len(line) + 1)  # the next cut: joined to it
            + f"{indent}def g(): pass\r\n" + line * (chunking.SEGMENT_CHARS // len(line)))
    assert len(before) - len(indent) - 9 < chunking.SEGMENT_CHARS <= len(before)
    assert len(text) > max(chunking.SEGMENTS_FROM, 2 * chunking.SEGMENT_CHARS)
    whole = chunking._python_defs(ast.parse(text).body)
    parsed = chunking._python_defs_in_parts(text)
    assert parsed is not None and parsed == whole
    found = whole[0][0].children[0] if body else whole[0][0]
    assert (found.name, found.start) == ("f", text.count("\n", 0, text.index("def f")) + 1)
