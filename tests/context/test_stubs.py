"""Ghost stubs: a file's skeleton around the cited lines, with true line numbers."""

from __future__ import annotations

import os
import re
import sys
import textwrap
import threading
from pathlib import Path

import pytest

from slm_rerank.context.stubs import Stub, build_stub, stub_file

_KEPT = re.compile(r"^ *(\d+)([ >]) (.*)$")


def fold_pattern(stub: Stub) -> re.Pattern[str]:
    """A fold line: blanks as wide as the numbers, the gutter, a space, the indent."""
    width = len(str(stub.total_lines))
    return re.compile(rf"^ {{{width}}}([ >]) ([ \t]*)… \(folded (\d+) lines\)$")


def kept(stub: Stub) -> dict[int, str]:
    """The stub's kept lines by their number."""
    return {int(m[1]): m[3] for line in stub.text.splitlines() if (m := _KEPT.match(line))}


def folds(stub: Stub) -> list[int]:
    """How many lines each fold of the stub hides, in order."""
    fold = fold_pattern(stub)
    return [int(m[3]) for line in stub.text.splitlines() if (m := fold.match(line))]


def fold_after(stub: Stub, number: int) -> int | None:
    """The size of the fold right after kept line ``number``, if one follows it."""
    lines = stub.text.splitlines()
    for i, line in enumerate(lines):
        m = _KEPT.match(line)
        if m and int(m[1]) == number and i + 1 < len(lines):
            fold = fold_pattern(stub).match(lines[i + 1])
            return int(fold[3]) if fold else None
    return None


def assert_true_numbers(stub: Stub, text: str) -> None:
    source = text.split("\n")
    for number, line in kept(stub).items():
        assert line == source[number - 1], f"line {number} is not the file's line {number}"


PYTHON = textwrap.dedent('''\
    """A client for the service."""

    from __future__ import annotations

    import os
    from typing import (
        Any,
        Optional,
    )

    TIMEOUT = 10


    class Client:
        """Talks to the service.

        More about it.
        """

        retries: int = 3

        def __init__(self, url: str) -> None:
            self.url = url
            self.session = None
            self.cache = {}
            self.closed = False

        @property
        def fetch(
            self,
            path: str,
        ) -> Any:
            # the comment that starts the body
            full = self.url + path
            data = self.session.get(full)
            return data

        def close(self) -> None:
            """Close the session.

            Safe to call twice.
            """
            if self.session is not None:
                self.session.close()
            self.closed = True


    def helper(x):
        y = x + 1
        z = y * 2
        return z
    ''')
FETCH = (28, 36)  # decorator .. last line of Client.fetch


def test_a_cited_python_method_is_kept_line_for_line_with_its_real_numbers():
    stub = build_stub("client.py", PYTHON, [FETCH])

    shown = kept(stub)
    source = PYTHON.split("\n")
    for number in range(FETCH[0], FETCH[1] + 1):
        assert shown[number] == source[number - 1]
    assert stub.method == "python" and stub.note is None


def test_cited_lines_are_marked_in_the_gutter_and_others_are_not():
    stub = build_stub("client.py", PYTHON, [FETCH])

    rows = {int(m[1]): m[2] for line in stub.text.splitlines() if (m := _KEPT.match(line))}
    assert {n for n, mark in rows.items() if mark == ">"} == set(range(FETCH[0], FETCH[1] + 1))
    assert "14  class Client:" in stub.text.splitlines()


def test_sibling_functions_fold_to_their_signature_and_the_number_of_lines_hidden():
    stub = build_stub("client.py", PYTHON, [FETCH])

    shown = kept(stub)
    assert shown[22] == "    def __init__(self, url: str) -> None:"
    assert fold_after(stub, 22) == 4  # lines 23-26
    assert shown[48] == "def helper(x):"
    assert fold_after(stub, 48) == 3
    assert 23 not in shown and 49 not in shown


def test_blank_runs_keep_their_first_line_and_a_blank_line_after_a_fold_is_dropped():
    stub = build_stub("client.py", PYTHON, [FETCH])

    shown = kept(stub)
    assert 12 in shown and 13 not in shown  # two blank lines before `class Client:`
    assert 27 not in shown  # the blank line after __init__'s fold


def test_a_fold_is_indented_like_the_body_it_hides():
    stub = build_stub("client.py", PYTHON, [FETCH])

    fold = fold_pattern(stub)
    indents = [m[2] for line in stub.text.splitlines() if (m := fold.match(line))]
    assert indents[0] == " " * 8  # __init__'s body
    assert indents[-1] == " " * 4  # helper's body


def test_imports_class_header_fields_and_decorated_multiline_signatures_are_kept():
    stub = build_stub("client.py", PYTHON, [])

    shown = kept(stub)
    for number in (3, 5, 6, 7, 8, 9, 11, 14, 20, 28, 29, 30, 31, 32):
        assert number in shown, f"line {number} ({PYTHON.split(chr(10))[number - 1]!r})"
    assert 33 not in shown  # the comment opening fetch's body folds with it


def test_a_docstring_keeps_its_summary_line_and_folds_the_rest_with_the_body():
    stub = build_stub("client.py", PYTHON, [])

    shown = kept(stub)
    assert shown[39].strip() == '"""Close the session.'
    assert fold_after(stub, 39) == 6  # the rest of the docstring and the body


def test_kept_and_folded_lines_add_up_to_the_file():
    stub = build_stub("client.py", PYTHON, [FETCH])

    assert stub.total_lines == len(PYTHON.split("\n")) - 1  # the final newline ends line 52
    assert stub.kept_lines == len(kept(stub))
    assert stub.kept_lines + stub.folded_lines == stub.total_lines
    assert_true_numbers(stub, PYTHON)


def test_skeleton_folds_the_cited_body_too_and_marks_its_fold():
    stub = build_stub("client.py", PYTHON, [FETCH], skeleton=True)

    shown = kept(stub)
    assert 34 not in shown and 36 not in shown
    assert all(n in shown for n in range(28, 33))  # decorator and the whole signature
    lines = stub.text.splitlines()
    after_signature = lines[lines.index("32>     ) -> Any:") + 1]
    assert fold_pattern(stub).match(after_signature)[1] == ">"
    assert fold_after(stub, 32) == 4
    assert stub.kept_lines < build_stub("client.py", PYTHON, [FETCH]).kept_lines


def test_a_long_module_level_literal_folds_after_its_first_line():
    text = "import os\n\nTABLE = {\n" + "".join(f"    'k{i}': {i},\n" for i in range(200)) + "}\n"

    stub = build_stub("table.py", text, [])

    shown = kept(stub)
    assert shown[3] == "TABLE = {"
    assert fold_after(stub, 3) == 200
    assert shown[204] == "}"


def test_definitions_inside_a_module_level_if_fold_like_any_other():
    text = textwrap.dedent("""\
        import sys

        if sys.version_info >= (3, 11):
            def now():
                a = 1
                b = 2
                return a + b
        else:
            def now():
                return 0
        """)

    stub = build_stub("compat.py", text, [])

    shown = kept(stub)
    assert shown[3] == "if sys.version_info >= (3, 11):"
    assert fold_after(stub, 4) == 3
    assert shown[8] == "else:"


def test_a_typical_500_line_module_stubs_to_a_fraction_of_its_lines():
    functions = "".join(
        f"def f{i}(a, b):\n    '''Do step {i}.'''\n" + "".join(
            f"    a = a + {j} * b\n" for j in range(7)) + "    return a\n\n\n"
        for i in range(45))
    text = "import os\nimport sys\n\n\n" + functions
    assert len(text.splitlines()) > 500

    stub = build_stub("steps.py", text, [(5, 15)])

    assert stub.kept_lines < stub.total_lines / 3
    assert_true_numbers(stub, text)


# --- other languages ---------------------------------------------------------------------

SOURCES = {
    "client.ts": ('''\
        import { get } from "./http";

        export class Client {
          private retries: number;

          fetch(url: string): Promise<string> {
            const a = 1;
            return get(url);
          }

          close(): void {
            this.a();
            this.b();
            this.c();
          }
        }
        ''', (6, 9), 11, 3, (1, 3, 4)),
    "client.js": ('''\
        const http = require("http");

        function fetch(url) {
          const a = 1;
          return http.get(url);
        }

        const close = () => {
          a();
          b();
          c();
        };
        ''', (3, 6), 8, 3, (1,)),
    "client.go": ('''\
        package client

        import (
        \t"fmt"
        )

        type Client struct {
        \tretries int
        }

        func (c *Client) Fetch(url string) string {
        \treturn fmt.Sprint(url)
        }

        func New() *Client {
        \tc := &Client{}
        \tc.retries = 3
        \treturn c
        }
        ''', (11, 13), 15, 3, (1, 3, 4, 5, 7, 8, 9)),
    "client.rs": ('''\
        use std::io;

        pub struct Client {
            retries: u32,
        }

        impl Client {
            pub fn fetch(&self, url: &str) -> String {
                url.to_string()
            }

            pub fn close(&mut self) {
                self.a();
                self.b();
                self.c();
            }
        }
        ''', (8, 10), 12, 3, (1, 3, 4, 5, 7)),
    "Client.java": ('''\
        package demo;

        import java.util.List;

        public class Client {
            private int retries;

            public String fetch(String url) {
                return url;
            }

            public void close() {
                a();
                b();
                c();
            }
        }
        ''', (8, 10), 12, 3, (1, 3, 5, 6)),
}


@pytest.mark.parametrize("name", sorted(SOURCES))
def test_tree_sitter_languages_keep_the_cited_body_and_fold_the_sibling(name):
    source, cited, sibling, folded, structure = SOURCES[name]
    text = textwrap.dedent(source)

    stub = build_stub(name, text, [cited])

    assert stub.method.startswith("tree-sitter:"), stub.note
    shown = kept(stub)
    assert set(range(cited[0], cited[1] + 1)) <= set(shown)
    assert fold_after(stub, sibling) == folded
    assert all(n in shown for n in structure)
    assert sibling + folded + 1 in shown  # the closing brace stays under its fold
    assert_true_numbers(stub, text)


def test_a_tree_sitter_file_with_a_syntax_error_is_still_stubbed_and_says_so():
    text = "function ok() {\n  a();\n  b();\n  c();\n}\n\nfunction broken( {\n  x();\n}\n"

    stub = build_stub("broken.js", text, [])

    assert stub.method == "tree-sitter:javascript"
    assert "syntax errors" in (stub.note or "")
    assert_true_numbers(stub, text)


def test_a_language_whose_grammar_is_missing_falls_back_to_context(monkeypatch):
    monkeypatch.setattr("slm_rerank.context.stubs._tree_sitter_parser", lambda language: None)
    text = "".join(f"line {i}\n" for i in range(1, 31))

    stub = build_stub("client.go", text, [(15, 16)])

    assert stub.method == "context"
    assert "no tree-sitter grammar for go" in (stub.note or "")


# --- fallbacks -----------------------------------------------------------------------------


def test_an_unknown_language_shows_the_cited_lines_with_context_and_says_so():
    text = "".join(f"line {i}\n" for i in range(1, 41))

    stub = build_stub("notes.xyz", text, [(20, 21)], context=3)

    assert stub.method == "context"
    assert set(kept(stub)) == set(range(17, 25))
    assert folds(stub) == [16, 16]
    assert stub.note == "no parser for .xyz files: cited lines with 3 lines of context"
    assert_true_numbers(stub, text)


def test_a_python_file_that_does_not_parse_falls_back_with_the_error_in_the_note():
    text = "".join(f"x{i} = {i}\n" for i in range(1, 12)) + "def broken(:\n" + "".join(
        f"y{i} = {i}\n" for i in range(30))

    stub = build_stub("broken.py", text, [(12, 12)], context=2)

    assert stub.method == "context"
    assert (stub.note or "").startswith("does not parse as Python (line 12: ")
    assert "cited lines with 2 lines of context" in stub.note
    assert set(kept(stub)) == set(range(10, 15))


def test_the_fallback_without_citations_shows_the_head_of_the_file():
    stub = build_stub("notes.xyz", "a\nb\nc\nd\ne\nf\ng\n", [], context=2)

    assert set(kept(stub)) == {1, 2}
    assert "its first 2 lines" in (stub.note or "")


def test_a_huge_file_is_cut_to_max_lines_keeping_the_cited_lines_and_says_so():
    text = "".join(f"X{i} = {i}\n" for i in range(60_000))

    stub = build_stub("constants.py", text, [(50_000, 50_009)], max_lines=100)

    shown = kept(stub)
    assert len(shown) == 100 == stub.kept_lines
    assert set(range(50_000, 50_010)) <= set(shown)
    assert "cut to 100 lines" in (stub.note or "")
    assert stub.kept_lines + stub.folded_lines == stub.total_lines == 60_000
    assert_true_numbers(stub, text)


def test_cited_lines_past_the_end_of_the_file_are_named_in_the_note():
    stub = build_stub("short.py", "a = 1\nb = 2\n", [(40, 60)])

    assert "cited lines 40-60 are past the end of the file (2 lines)" in (stub.note or "")
    assert set(kept(stub)) == {1, 2}


# --- reading the file ----------------------------------------------------------------------


def test_stub_file_reads_the_file_under_the_root(tmp_path):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "client.py").write_text(PYTHON)

    stub = stub_file(tmp_path, "pkg/client.py", [FETCH])

    assert stub == build_stub("pkg/client.py", PYTHON, [FETCH])


def test_a_file_deleted_between_listing_and_stubbing_gives_an_empty_stub_with_a_note(tmp_path):
    (tmp_path / "gone.py").write_text("x = 1\n")
    (tmp_path / "gone.py").unlink()

    stub = stub_file(tmp_path, "gone.py", [(1, 1)])

    assert stub.text == "" and stub.kept_lines == 0
    assert stub.note == ("no stub for gone.py: no such file (deleted or moved since the "
                         "search listed it)")


def test_a_directory_binary_or_oversized_file_gives_an_empty_stub_naming_the_reason(tmp_path):
    (tmp_path / "dir.py").mkdir()
    (tmp_path / "blob.py").write_bytes(b"x = 1\n\0\0\0")
    (tmp_path / "big.py").write_text("x = 1\n" * 100)

    notes = {rel: stub_file(tmp_path, rel, [], limit_bytes=200).note
             for rel in ("dir.py", "blob.py", "big.py")}

    assert notes["dir.py"] == "no stub for dir.py: a directory, not a file"
    assert notes["blob.py"] == "no stub for blob.py: binary (NUL byte)"
    assert notes["big.py"] == "no stub for big.py: huge (600 bytes > max_file_bytes 200)"


@pytest.mark.skipif(sys.platform == "darwin" or os.geteuid() == 0,
                    reason="root reads any file; macOS may refuse the name")
def test_an_unreadable_file_gives_an_empty_stub_naming_the_reason(tmp_path):
    locked = tmp_path / "locked.py"
    locked.write_text("x = 1\n")
    locked.chmod(0)

    stub = stub_file(tmp_path, "locked.py", [])

    assert stub.note == "no stub for locked.py: unreadable (Permission denied)"


@pytest.mark.skipif(sys.platform == "darwin", reason="macOS file systems refuse such names")
def test_a_file_name_that_is_not_utf8_is_read_and_named(tmp_path):
    rel = os.fsdecode(b"caf\xe9.py")
    with open(os.path.join(os.fsencode(tmp_path), b"caf\xe9.py"), "wb") as handle:
        handle.write(b"def f():\n    a = '\xe9'\n    return a\n")

    stub = stub_file(tmp_path, rel, [(1, 3)])
    missing = stub_file(tmp_path, os.fsdecode(b"gon\xe9.py"), [])

    assert stub.method == "python"
    assert kept(stub)[2] == "    a = '\ufffd'"  # undecodable content: replacement character
    assert missing.note is not None and missing.note.startswith("no stub for gon\\xe9.py: ")
    missing.note.encode("utf-8")  # printable: no lone surrogate left in the note


def test_stub_file_of_an_unknown_kind_falls_back_to_context(tmp_path):
    Path(tmp_path / "README.xyz").write_text("".join(f"l{i}\n" for i in range(50)))

    stub = stub_file(tmp_path, "README.xyz", [(25, 25)], context=1)

    assert stub.method == "context"
    assert set(kept(stub)) == {24, 25, 26}


# --- odd files ----------------------------------------------------------------------------


def numbered(stub_text: str) -> dict[int, str]:
    """Line number -> source line of each kept line of a stub."""
    kept = (re.match(r"^ *(\d+)[> ] (.*)$", line, re.S) for line in stub_text.split("\n"))
    return {int(m.group(1)): m.group(2) for m in kept if m}


def test_a_lone_carriage_return_does_not_shift_the_python_folds():
    # Python's parser ends a line at a lone CR; git, ripgrep and editors do not: for them
    # line 1 is "# a\rb" and f starts on line 2, so its body is lines 3-5.
    text = "# a\rb\ndef f():\n    a = 1\n    b = 2\n    return 3\n\ndef g():\n    pass\n"

    stub = build_stub("m.py", text, [(7, 8)])

    lines = numbered(stub.text)
    assert lines[2] == "def f():"
    assert 3 not in lines and "… (folded 3 lines)" in stub.text
    assert lines[7] == "def g():"


def test_a_very_long_line_is_cut_in_the_stub_and_the_note_says_so():
    long_line = 'DATA = "' + "x" * 1_900_000 + '"'
    text = "def load():\n    return 1\n\n" + long_line + "\n"

    stub = build_stub("gen.py", text, [(1, 2)])

    assert len(stub.text) < 5_000
    assert "4  DATA = \"xxx" in stub.text
    assert "1899" in stub.text  # how many characters were cut, in the fold-like marker
    assert stub.note and "cut" in stub.note and "characters" in stub.note
    assert stub.kept_lines + stub.folded_lines == stub.total_lines == 4


def test_an_empty_file_has_no_lines_to_stub():
    stub = build_stub("empty.py", "", [])

    assert (stub.text, stub.kept_lines, stub.total_lines) == ("", 0, 0)


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs named pipes")
def test_stub_file_of_a_named_pipe_gives_a_note_instead_of_waiting_for_a_writer(tmp_path):
    os.mkfifo(tmp_path / "pipe.py")
    result: list[object] = []
    reader = threading.Thread(target=lambda: result.append(
        stub_file(tmp_path, "pipe.py", [(1, 1)])), daemon=True)

    reader.start()
    reader.join(timeout=10)
    blocked = reader.is_alive()
    if blocked:  # open the writing end so the stuck reader returns and the test can end
        with open(tmp_path / "pipe.py", "wb"):
            pass
        reader.join(timeout=10)

    assert not blocked, "stub_file waited for a writer on a named pipe"
    stub = result[0]
    assert stub.text == ""  # type: ignore[attr-defined]
    assert "not a regular file" in stub.note  # type: ignore[attr-defined]
