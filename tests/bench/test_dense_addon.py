"""dense_addon.py's file summaries: what a candidate file is reduced to before it is
embedded (the path's words, then the names the file declares, each once, in order)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import dense_addon  # noqa: E402


def test_path_words_then_declared_names() -> None:
    text = ("import os\n\nclass TemplateLoader:\n    def get_source(self, name):\n"
            "        if name:\n            return os.path.join(name)\n\n"
            "def render_template(name):\n    return TemplateLoader().get_source(name)\n")
    got = dense_addon.summary("src/flask/templating.py", text)
    assert got == "src flask templating py. template loader, get source, render template"


def test_names_in_other_languages() -> None:
    go = "package mux\n\nfunc (r *Router) ServeHTTP(w Writer) {\n}\n\ntype RouteMatch struct {}\n"
    assert dense_addon.summary("mux.go", go).endswith("serve http, route match")
    rust = "pub struct ArgMatcher {}\nimpl ArgMatcher {\n    pub fn get_one(&self) {}\n}\n"
    assert dense_addon.summary("src/parser.rs", rust).endswith("arg matcher, get one")
    java = ("public class JsonParser {\n    public int nextToken(int depth) throws IOException {\n"
            "        if (depth > 0) {\n            return 1;\n        }\n    }\n}\n")
    got = dense_addon.summary("JsonParser.java", java)
    # a control keyword before a parenthesis is not a method
    assert got == "json parser java. json parser, next token"


def test_a_file_without_declarations_is_its_path() -> None:
    assert dense_addon.summary("docs/CHANGES.md", "Fixed the parser.\n") == "docs changes md. "
    assert dense_addon.summary("lib/empty.js", "") == "lib empty js. "


def test_each_name_once_and_a_cap_on_how_many() -> None:
    many = "".join(f"def handler_{i}(x):\n    pass\n" for i in range(500))
    got = dense_addon.summary("app.py", many + "def handler_3(x):\n    pass\n")
    names = got.split(". ", 1)[1].split(", ")
    assert names[:2] == ["handler 0", "handler 1"]
    assert len(names) == 201  # stops once past 200 names
    assert len(set(names)) == len(names)


def test_a_candidate_outside_the_tree_or_not_a_file_is_read_as_nothing(tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    (tree / "src").mkdir(parents=True)
    (tree / "src" / "a.py").write_bytes(b"def caf\xe9():\n    pass\n" + b"x" * 500)
    (tmp_path / "secret.py").write_text("def outside():\n    pass\n")
    (tree / "src" / "link.py").symlink_to(tmp_path / "secret.py")
    (tree / "src" / "zero.py").symlink_to("/dev/zero")
    assert dense_addon._head(tree, "src/a.py", 23) == "def caf\ufffd():\n    pass\nxx"
    assert dense_addon._head(tree, "src/link.py") == ""
    assert dense_addon._head(tree, "src/zero.py") == ""
    assert dense_addon._head(tree, "src") == ""
    assert dense_addon._head(tree, "src/missing.py") == ""


def test_the_first_comment_that_is_not_a_licence() -> None:
    go = ("// Copyright 2020 The Authors. Use of this source code is governed by a license.\n"
          "\n// Package mux routes requests to their handlers by path.\n"
          "package mux\n\nfunc ServeHTTP() {}\n")
    assert dense_addon.first_comment(go) == "Package mux routes requests to their handlers by path"
    assert dense_addon.summary("mux.go", go, comment=True) == (
        "mux go. Package mux routes requests to their handlers by path. serve http")
    assert dense_addon.summary("mux.go", go) == "mux go. serve http"  # as the first try had it
    py = '#!/usr/bin/env python\n# -*- coding: utf-8 -*-\n"""Find the app\'s templates."""\n'
    assert dense_addon.first_comment(py) == "Find the app's templates"
    java = "/*\n * Reads JSON tokens, one at a time.\n */\npublic class JsonReader {}\n"
    assert dense_addon.first_comment(java) == "Reads JSON tokens one at a time"
    long = "# " + " ".join(f"word{i}" for i in range(100)) + "\n"
    assert len(dense_addon.first_comment(long.replace("word", "w"), words=5).split()) == 5


def test_no_comment_or_too_short_a_one_adds_nothing() -> None:
    assert dense_addon.first_comment("x = 1\n# ok\n") == ""
    assert dense_addon.summary("a.py", "def f():\n    pass\n", comment=True) == "a py. f"
