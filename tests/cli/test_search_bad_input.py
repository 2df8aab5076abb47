"""Bad input gets a clear message or a sensible result, never a traceback or a hang."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import pytest
import slm_rerank_git
import slm_rerank_ripgrep
from search_fixtures import cli, git_init, make_repo, write_tree

from slm_rerank.config import Settings
from slm_rerank.host import Host
from slm_rerank.pipeline import SearchRequest, run_search
from slm_rerank.report import Report

NO_RG = {"SLM_RERANK_RG": "/nonexistent/rg"}


def git_search(root: Path, query: str) -> Report:
    """run_search with the git source only."""
    host = Host.with_plugins(Settings(), slm_rerank_git)
    return run_search(SearchRequest(query=query, root=root), host)


def builtin_search(root: Path, query: str) -> Report:
    """run_search with both built-in sources, as a bare install has them."""
    host = Host.with_plugins(Settings(), slm_rerank_ripgrep, slm_rerank_git)
    return run_search(SearchRequest(query=query, root=root), host)


def git_paths(report: Report) -> list[str]:
    """Result paths from the JSON document the CLI would print for ``report``."""
    return [row["path"] for row in json.loads(json.dumps(report.to_dict()))["results"]]


# --- the query -----------------------------------------------------------------------------


@pytest.mark.parametrize("query", ["", "   \n\t"])
def test_an_empty_query_is_a_usage_error(repo: Path, query: str) -> None:
    run = cli("-q", query, "--fast", cwd=repo)

    assert run.returncode == 2
    assert "the query is empty" in run.stderr
    assert "Traceback" not in run.stderr and run.stdout == ""


def test_a_query_of_only_stop_words_is_a_usage_error_that_says_so(repo: Path) -> None:
    run = cli("-q", "what is the and of it", "--fast", cwd=repo)

    assert run.returncode == 2
    assert "stop words" in run.stderr
    assert "Traceback" not in run.stderr and run.stdout == ""


# --- paths ---------------------------------------------------------------------------------


def test_a_path_that_does_not_exist_is_an_error_naming_it(repo: Path) -> None:
    run = cli("-q", "retry", "--fast", "src/nope.py", cwd=repo)

    assert run.returncode != 0
    assert "'src/nope.py' does not exist" in run.stderr
    assert "Traceback" not in run.stderr


def test_a_directory_without_text_files_gives_no_results_and_exit_0(tmp_path: Path) -> None:
    root = write_tree(tmp_path / "binaries", {"a.bin": b"\x00\x01widget\x00",
                                              "sub/b.dat": b"\x7fELF\x00\x00widget"})

    run = cli("-q", "widget", "--fast", "--format", "json", "-v", cwd=root)

    assert run.returncode == 0, run.stderr
    assert run.json()["results"] == []
    assert "Traceback" not in run.stderr


def test_an_empty_directory_gives_no_results_and_says_why(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()

    report = builtin_search(tmp_path / "empty", "widget")

    assert report.results == []
    assert f"no searchable text files under {(tmp_path / 'empty').resolve()}" in report.notes


def test_binary_files_are_skipped_with_a_reason_and_latin1_files_are_searched(
        tmp_path: Path) -> None:
    root = make_repo(tmp_path / "repo", {
        "assets/widget.dat": b"widget\x00\x01\x02" * 100,
        "pkg/legacy.py": "# caf\u00e9 cr\u00e8me\ndef widget_total():\n    return 1\n"
                         .encode("latin-1"),
    })

    run = cli("-q", "widget", "--fast", "--format", "json", "-v", cwd=root)

    assert run.paths() == ["pkg/legacy.py"]
    assert run.json()["results"][0]["symbol"] == "widget_total"
    assert "skipped assets/widget.dat: binary" in run.stderr


@pytest.mark.skipif(sys.platform == "darwin", reason="APFS refuses file names that are not UTF-8")
def test_a_file_name_that_is_not_utf8_is_printed_escaped_in_valid_json(tmp_path: Path) -> None:
    root = git_init(tmp_path / "repo")
    with open(os.path.join(os.fsencode(root), b"caf\xe9.py"), "wb") as handle:
        handle.write(b"def widget():\n    return 1\n")

    run = cli("-q", "widget", "--fast", "--format", "json", cwd=root)

    assert run.returncode == 0, run.stderr
    assert run.paths() == ["caf\\xe9.py"]
    assert git_paths(git_search(root, "widget")) == ["caf\\xe9.py"]


def test_a_symlink_loop_does_not_hang_the_search(tmp_path: Path) -> None:
    root = make_repo(tmp_path / "repo", {"pkg/widget.py": "def widget():\n    return 1\n"})
    (root / "pkg" / "loop").symlink_to("..", target_is_directory=True)
    (root / "widget_a.py").symlink_to("widget_b.py")
    (root / "widget_b.py").symlink_to("widget_a.py")

    run = cli("-q", "widget", "--fast", "--format", "json", cwd=root, timeout=20)

    assert run.returncode == 0, run.stderr
    assert run.paths() == ["pkg/widget.py"]
    assert git_paths(git_search(root, "widget")) == ["pkg/widget.py"]


def test_a_huge_file_is_skipped_with_a_reason_and_does_not_slow_the_search(
        tmp_path: Path) -> None:
    root = make_repo(tmp_path / "repo", {"pkg/widget.py": "def widget():\n    return 1\n"})
    with open(root / "widget_dump.py", "wb") as handle:
        handle.write(b"def widget():\n    return 2\n")
        handle.truncate(50 * 1024 * 1024)  # sparse: 50 MB without writing them

    started = time.monotonic()
    run = cli("-q", "widget", "--fast", "--format", "json", "-v", cwd=root)
    elapsed = time.monotonic() - started

    assert run.paths() == ["pkg/widget.py"]
    assert "skipped widget_dump.py: huge (52428800 bytes" in run.stderr
    assert run.stderr.count("skipped widget_dump.py") == 1  # said once, not by each stage
    assert elapsed < 10
    via_git = git_search(root, "widget")
    assert git_paths(via_git) == ["pkg/widget.py"]
    assert any(n.startswith("skipped widget_dump.py: huge") for n in via_git.notes)


# --- candidate sources ---------------------------------------------------------------------


def test_outside_git_without_rg_the_error_names_both_sources_reasons(tmp_path: Path) -> None:
    root = write_tree(tmp_path / "plain", {"widget.py": "def widget():\n    return 1\n"})

    run = cli("-q", "widget", "--fast", cwd=root, env=NO_RG)

    assert run.returncode == 1
    assert "no candidate source can search" in run.stderr
    assert "ripgrep: rg not found" in run.stderr
    assert "git: " in run.stderr and "is not inside a git work tree" in run.stderr
    assert "Traceback" not in run.stderr


def test_inside_git_without_rg_the_git_source_answers_the_same(repo: Path) -> None:
    with_rg = cli("-q", "backoff", "--fast", "--format", "json", cwd=repo)

    run = cli("-q", "backoff", "--fast", "--format", "json", "-v", cwd=repo, env=NO_RG)

    assert run.returncode == 0, run.stderr
    assert "source: git" in run.stderr
    assert run.paths()[0] == "src/net/retry.py"
    assert run.paths() == with_rg.paths()


def test_the_sources_setting_chooses_which_source_answers_first(repo: Path) -> None:
    git_first = Host.with_plugins(Settings(sources=["git", "ripgrep"]), slm_rerank_ripgrep,
                                  slm_rerank_git)
    default = Host.with_plugins(Settings(), slm_rerank_ripgrep, slm_rerank_git)

    via_git = run_search(SearchRequest(query="backoff", root=repo), git_first)
    via_rg = run_search(SearchRequest(query="backoff", root=repo), default)

    assert via_git.notes[0].startswith("source: git;")
    assert via_rg.notes[0].startswith("source: ripgrep;")
    assert [c.path for c in via_git.results] == [c.path for c in via_rg.results]
