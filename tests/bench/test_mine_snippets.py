"""mine_snippets.py on a generated history: which files count as tests, which lines are
taken, and where the caps stop them."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import mine_snippets  # noqa: E402
from git_history import History  # noqa: E402


def _fix(tmp_path: Path, test_text: str) -> tuple[History, str, str]:
    repo = History(tmp_path / "repo")
    parent = repo.commit("start", {"src/parser.py": "def parse(x):\n    return x\n",
                                   "tests/test_parser.py": "import parser\n"})
    fix = repo.commit("Fix parse of empty input", {
        "src/parser.py": "def parse(x):\n    return x or None\n",
        "tests/test_parser.py": "import parser\n" + test_text,
        "docs/changes.md": "fixed parse\n"})
    return repo, parent, fix


def test_added_test_lines_follow_the_message(tmp_path: Path) -> None:
    repo, parent, fix = _fix(tmp_path, "\n\ndef test_empty():\n    assert parse('') is None\n")
    tests = mine_snippets.test_files(repo.root, parent, fix)
    assert tests == ["tests/test_parser.py"]  # not the source file, not the doc page
    lines = mine_snippets.added_lines(repo.root, parent, fix, tests)
    assert lines == ["def test_empty():", "    assert parse('') is None"]  # blanks dropped
    case = {"query": "Fix parse of empty input\n"}
    assert mine_snippets.snippet_query(case, lines) == (
        "Fix parse of empty input\n\ndef test_empty():\n    assert parse('') is None")


def test_caps_stop_at_whole_lines(tmp_path: Path) -> None:
    many = "".join(f"def test_{n}():\n    assert parse({n}) == {n}\n" for n in range(40))
    repo, parent, fix = _fix(tmp_path, many)
    lines = mine_snippets.added_lines(repo.root, parent, fix, ["tests/test_parser.py"])
    assert len(lines) == mine_snippets.MAX_LINES
    assert lines[-1] == "    assert parse(14) == 14"
    wide = "x = '" + "a" * 900 + "'\n"
    repo2, parent2, fix2 = _fix(tmp_path / "two", wide * 3)
    lines2 = mine_snippets.added_lines(repo2.root, parent2, fix2, ["tests/test_parser.py"])
    assert len(lines2) == 1 and sum(len(t) + 1 for t in lines2) <= mine_snippets.MAX_CHARS


def test_a_fix_without_a_test_gives_nothing(tmp_path: Path) -> None:
    repo = History(tmp_path / "repo")
    parent = repo.commit("start", {"src/parser.py": "a = 1\n"})
    fix = repo.commit("Fix a", {"src/parser.py": "a = 2\n"})
    assert mine_snippets.test_files(repo.root, parent, fix) == []
    assert mine_snippets.added_lines(repo.root, parent, fix, []) == []
