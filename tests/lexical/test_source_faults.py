"""The candidate sources under hostile conditions: odd file names, failing tools, FIFOs."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import threading
from collections.abc import Callable
from pathlib import Path

import pytest
import slm_rerank_git
import slm_rerank_ripgrep
from search_fixtures import write_tree

import slm_rerank
from slm_rerank.errors import SearchError, SourceError
from slm_rerank.registrations import SourceHits, SourceQuery

SOURCES: dict[str, Callable[[SourceQuery], SourceHits]] = {
    "ripgrep": slm_rerank_ripgrep.search,
    "git": slm_rerank_git.search,
}
both_sources = pytest.mark.parametrize("name", sorted(SOURCES))

ODD_NAMES = {
    "a\nb.py": "def retry_backoff():\n    return 'retry'\n",
    "c\rd.py": "RETRY_LIMIT = 3  # retry\n",
    "ok.py": "nothing here\n",
}


def git_tree(root: Path, files: dict[str, str]) -> Path:
    write_tree(root, files)
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    return root.resolve()


def fake_rg(tmp_path: Path, script: str) -> str:
    """An executable standing in for rg, for SLM_RERANK_RG."""
    path = tmp_path / "fake-rg"
    path.write_text("#!/bin/sh\n" + script)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


# --- file names holding a newline or a carriage return -------------------------------------


@both_sources
def test_files_named_with_a_newline_or_a_carriage_return_are_listed_and_counted(
        name: str, tmp_path: Path) -> None:
    root = git_tree(tmp_path / "repo", ODD_NAMES)
    hits = SOURCES[name](SourceQuery(root=root, terms=["retry"]))
    assert {"a\nb.py", "c\rd.py", "ok.py"} <= set(hits.files)
    assert hits.body_counts == {"a\nb.py": {"retry": 2}, "c\rd.py": {"retry": 2}}


@both_sources
def test_files_named_with_a_newline_are_found_when_given_explicitly(
        name: str, tmp_path: Path) -> None:
    root = git_tree(tmp_path / "repo", ODD_NAMES)
    hits = SOURCES[name](SourceQuery(root=root, terms=["retry"],
                                     paths=[root / "a\nb.py", root / "c\rd.py"]))
    assert sorted(hits.files) == ["a\nb.py", "c\rd.py"]
    assert set(hits.body_counts) == {"a\nb.py", "c\rd.py"}


@both_sources
def test_a_search_finds_files_named_with_a_newline_end_to_end(
        name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = git_tree(tmp_path / "repo", ODD_NAMES)
    if name == "git":  # ripgrep comes first whenever it is there
        monkeypatch.setenv("SLM_RERANK_RG", str(tmp_path / "no-rg"))
    report = slm_rerank.search("retry", root=root)
    assert {r.path for r in report.results} == {"a\nb.py", "c\rd.py"}


# --- a tool that fails ---------------------------------------------------------------------


@both_sources
def test_a_root_that_vanished_is_a_source_error(name: str, tmp_path: Path) -> None:
    root = git_tree(tmp_path / "repo", ODD_NAMES)
    shutil.rmtree(root)
    with pytest.raises(SourceError, match=f"candidate source '{name}'"):
        SOURCES[name](SourceQuery(root=root, terms=["retry"]))


@both_sources
def test_no_match_is_not_an_error(name: str, tmp_path: Path) -> None:
    root = git_tree(tmp_path / "repo", ODD_NAMES)
    hits = SOURCES[name](SourceQuery(root=root, terms=["nowhere"]))
    assert "ok.py" in hits.files and hits.body_counts == {}


def test_a_broken_glob_is_a_ripgrep_error_carrying_its_message(tmp_path: Path) -> None:
    root = git_tree(tmp_path / "repo", ODD_NAMES)
    with pytest.raises(SourceError, match=r"'ripgrep' failed.*error parsing glob '\['"):
        slm_rerank_ripgrep.search(SourceQuery(root=root, terms=["retry"], globs=["["]))


def test_a_corrupt_git_index_is_a_git_error_carrying_its_message(tmp_path: Path) -> None:
    root = git_tree(tmp_path / "repo", ODD_NAMES)
    subprocess.run(["git", "-C", str(root), "add", "ok.py"], check=True)
    (root / ".git" / "index").write_bytes(b"garbage\n")
    with pytest.raises(SourceError, match=r"'git' failed: `git ls-files` exited with "
                                          r"status 128.*index file smaller than expected"):
        slm_rerank_git.search(SourceQuery(root=root, terms=["retry"]))


def test_an_rg_that_exits_2_with_a_message_is_an_error_the_search_reports(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = git_tree(tmp_path / "repo", ODD_NAMES)
    monkeypatch.setenv("SLM_RERANK_RG", fake_rg(tmp_path, "echo 'rg: disk on fire' >&2\nexit 2\n"))
    with pytest.raises(SourceError, match="'ripgrep' failed: `rg --files` exited with status 2"
                                          ".*rg: disk on fire"):
        slm_rerank_ripgrep.search(SourceQuery(root=root, terms=["retry"]))
    with pytest.raises(SearchError, match="rg: disk on fire"):
        slm_rerank.search("retry", root=root)


def test_an_rg_whose_match_pass_alone_fails_is_an_error(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = git_tree(tmp_path / "repo", ODD_NAMES)
    monkeypatch.setenv("SLM_RERANK_RG", fake_rg(tmp_path, (
        'if [ "$1" = --files ]; then printf "ok.py\\0"; exit 0; fi\n'
        "echo 'rg: regex compile error: Compiled regex exceeds size limit' >&2\nexit 2\n")))
    with pytest.raises(SourceError, match="`rg -o` exited with status 2.*size limit"):
        slm_rerank_ripgrep.search(SourceQuery(root=root, terms=["retry"]))


def test_an_rg_killed_by_a_signal_is_an_error(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = git_tree(tmp_path / "repo", ODD_NAMES)
    monkeypatch.setenv("SLM_RERANK_RG", fake_rg(tmp_path, "kill -9 $$\n"))
    with pytest.raises(SourceError, match="was killed by signal 9"):
        slm_rerank_ripgrep.search(SourceQuery(root=root, terms=["retry"]))


def test_files_rg_could_not_read_do_not_fail_the_search(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # What rg 14.1.0 printed, run as an unprivileged user, for a tree with one unreadable
    # file and one unreadable folder: the rest is searched, and it exits 2.
    root = git_tree(tmp_path / "repo", ODD_NAMES)
    monkeypatch.setenv("SLM_RERANK_RG", fake_rg(tmp_path, (
        'if [ "$1" = --files ]; then printf "bad.py\\0ok.py\\0"\n'
        "else printf 'ok.py\\0retry\\n'; fi\n"
        "echo 'rg: bad.py: Permission denied (os error 13)' >&2\n"
        "echo 'rg: ./sub: Permission denied (os error 13)' >&2\nexit 2\n")))
    hits = slm_rerank_ripgrep.search(SourceQuery(root=root, terms=["retry"]))
    assert hits.files == ["bad.py", "ok.py"]
    assert hits.body_counts == {"ok.py": {"retry": 1}}


def test_a_tree_where_the_only_match_is_unreadable_gives_no_counts_and_no_error(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = git_tree(tmp_path / "repo", ODD_NAMES)
    monkeypatch.setenv("SLM_RERANK_RG", fake_rg(tmp_path, (
        'if [ "$1" = --files ]; then printf "bad.py\\0ok.py\\0"; exit 0; fi\n'
        "echo 'rg: bad.py: Permission denied (os error 13)' >&2\nexit 2\n")))
    hits = slm_rerank_ripgrep.search(SourceQuery(root=root, terms=["retry"]))
    assert hits.files == ["bad.py", "ok.py"] and hits.body_counts == {}


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads a file whatever its mode")
@both_sources
def test_an_unreadable_file_does_not_fail_the_search(name: str, tmp_path: Path) -> None:
    root = git_tree(tmp_path / "repo", {**ODD_NAMES, "bad.py": "retry\n"})
    (root / "bad.py").chmod(0)
    hits = SOURCES[name](SourceQuery(root=root, terms=["retry"]))
    assert "a\nb.py" in hits.body_counts and "bad.py" not in hits.body_counts


# --- files that are not regular files ------------------------------------------------------


@both_sources
def test_a_fifo_given_explicitly_is_not_read(name: str, tmp_path: Path) -> None:
    root = git_tree(tmp_path / "repo", ODD_NAMES)
    fifo = root / "pipe.py"
    os.mkfifo(fifo)
    # A writer stands ready, so that a source that did open the FIFO reads it and is caught
    # by the asserts, instead of hanging the test run.
    writer = threading.Thread(target=fifo.write_bytes, args=(b"retry\n",), daemon=True)
    writer.start()
    try:
        hits = SOURCES[name](SourceQuery(root=root, terms=["retry"], paths=[fifo, root / "ok.py"]))
    finally:
        reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)  # lets an idle writer finish
        writer.join()
        os.close(reader)
    assert hits.files == ["ok.py"] and hits.body_counts == {}


@both_sources
def test_a_device_given_explicitly_is_not_read(name: str, tmp_path: Path) -> None:
    root = git_tree(tmp_path / "repo", ODD_NAMES)
    (root / "null.py").symlink_to("/dev/null")
    hits = SOURCES[name](SourceQuery(root=root, terms=["retry"],
                                     paths=[root / "null.py", root / "ok.py"]))
    assert hits.files == ["ok.py"]


def test_only_non_regular_paths_search_nothing_rather_than_the_whole_root(
        tmp_path: Path) -> None:
    root = git_tree(tmp_path / "repo", ODD_NAMES)
    (root / "null.py").symlink_to("/dev/null")
    hits = slm_rerank_ripgrep.search(SourceQuery(root=root, terms=["retry"],
                                                 paths=[root / "null.py"]))
    assert hits == SourceHits()
