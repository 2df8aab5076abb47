"""Stubs, slices and --dirty under hostile input: odd files, odd trees, odd settings."""

from __future__ import annotations

import os
import re
import subprocess
import threading
from pathlib import Path

import pytest
from search_fixtures import git_init, write_tree
from slm_rerank_formatters import render_markdown

from slm_rerank.context.dirty import find_dirty
from slm_rerank.context.grouping import SliceGroup, slice_of
from slm_rerank.context.stubs import build_stub, stub_file
from slm_rerank.report import Citation, Report


def git(root: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(root), "-c", "user.email=t@example.com",
                    "-c", "user.name=t", "-c", "protocol.file.allow=always", *args],
                   check=True, capture_output=True)


def committed(root: Path, files: dict[str, str | bytes]) -> Path:
    write_tree(git_init(root), files)
    git(root, "add", "-A")
    git(root, "commit", "-qm", "initial")
    return root


# --- stubs ---------------------------------------------------------------------------------


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


# --- --dirty -------------------------------------------------------------------------------

CLEAN = {"pkg/a.py": "def alpha():\n    return 1\n", "pkg/b.py": "def beta():\n    return 2\n"}


def test_finding_dirty_files_does_not_write_the_repository_index(tmp_path):
    # `git status` refreshes and rewrites .git/index under index.lock when file times moved:
    # run beside the user's own `git commit`, that lock makes the commit fail.
    repo = committed(tmp_path / "repo", CLEAN)
    for name in CLEAN:
        later = (repo / name).stat().st_mtime + 100
        os.utime(repo / name, (later, later))
    index = repo / ".git" / "index"
    before = (index.read_bytes(), index.stat().st_mtime_ns)

    found = find_dirty(repo)

    assert found.reason is None and found.kinds == {}
    assert (index.read_bytes(), index.stat().st_mtime_ns) == before


def test_git_dir_in_the_environment_does_not_point_dirty_at_another_repository(
        tmp_path, monkeypatch):
    repo = committed(tmp_path / "repo", CLEAN)
    other = committed(tmp_path / "other", {"unrelated.txt": "hi\n"})
    (repo / "pkg/b.py").write_text(CLEAN["pkg/b.py"] + "# edited\n")
    monkeypatch.setenv("GIT_DIR", str(other / ".git"))
    monkeypatch.setenv("GIT_INDEX_FILE", str(other / ".git" / "index"))

    found = find_dirty(repo)

    assert found.reason is None
    assert found.kinds == {"pkg/b.py": "modified"}


def test_files_changed_inside_a_submodule_are_found_under_its_path(tmp_path):
    library = committed(tmp_path / "library", CLEAN)
    repo = committed(tmp_path / "repo", {"top.py": "def top():\n    return 0\n"})
    git(repo, "submodule", "add", "-q", str(library), "vendor/lib")
    git(repo, "commit", "-qm", "add the submodule")
    (repo / "vendor/lib/pkg/a.py").write_text(CLEAN["pkg/a.py"] + "# edited\n")
    (repo / "vendor/lib/pkg/new.py").write_text("def gamma():\n    return 3\n")

    found = find_dirty(repo)

    assert found.reason is None
    assert found.kinds == {"vendor/lib/pkg/a.py": "modified",
                           "vendor/lib/pkg/new.py": "untracked"}


def test_a_submodule_is_found_from_a_root_inside_the_superproject(tmp_path):
    library = committed(tmp_path / "library", CLEAN)
    repo = committed(tmp_path / "repo", {"top.py": "def top():\n    return 0\n"})
    git(repo, "submodule", "add", "-q", str(library), "vendor/lib")
    git(repo, "commit", "-qm", "add the submodule")
    (repo / "vendor/lib/pkg/b.py").write_text(CLEAN["pkg/b.py"] + "# edited\n")

    assert find_dirty(repo / "vendor").kinds == {"lib/pkg/b.py": "modified"}


# --- slices --------------------------------------------------------------------------------


@pytest.mark.parametrize("root", ["./internal/handlers", "internal/./handlers",
                                  "internal//handlers", "x/../internal/handlers"])
def test_a_slice_root_path_is_read_as_the_same_path_however_it_is_spelled(root: str) -> None:
    assert slice_of("internal/handlers/users/get.go", [root]) == "internal/handlers/users"


def test_a_dot_slash_root_is_anchored_at_the_searched_root() -> None:
    assert slice_of("src/auth/login.py", ["./src"]) == "src/auth"
    assert slice_of("web/src/auth/login.py", ["./src"]) is None


@pytest.mark.parametrize("root", ["", "/", ".", "..", "../src", "src/../.."])
def test_a_slice_root_that_names_no_folder_under_the_root_matches_nothing(root: str) -> None:
    assert slice_of("src/auth/login.py", [root]) is None


# --- rendering -----------------------------------------------------------------------------


def stubbed_report(path: str, by_slice: bool = False) -> Report:
    citation = Citation(path=path, start_line=1, end_line=2, symbol="init", score=1.0,
                        lexical_score=1.0)
    citation.stub = build_stub(path, "def init():\n    return 1\n", [(1, 2)])
    slices = [SliceGroup(None, [0], 1.0)] if by_slice else None
    return Report(query="init", root="/r", mode="fast", results=[citation], slices=slices)


@pytest.mark.parametrize("path", ["pkg/__init__.py", "a*b*c.py", "x|y.py"])
def test_markdown_names_a_stubbed_file_in_a_code_span_so_it_shows_as_written(path: str):
    # Unquoted, `pkg/__init__.py` renders as "pkg/**init**.py" in bold.
    out = render_markdown(stubbed_report(path))

    heading = next(line for line in out.splitlines() if "stub:" in line)
    assert f"`{path}:1-2`" in heading


def test_markdown_does_not_show_the_files_outside_any_slice_as_a_slice_named_so():
    out = render_markdown(stubbed_report("setup.py", by_slice=True))

    assert "### outside any slice" in out
    assert "`(outside any slice)`" not in out
