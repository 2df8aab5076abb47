"""The tree a case is searched in: its commit's files, in the cache folder, removed after."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import threading
from collections.abc import Callable
from pathlib import Path

import pytest
from git_history import History

from slm_rerank.calibration.trees import commit_tree, sweep

BROKEN = "def retry(call):\n    return call()\n"
FIXED = "def retry(call):\n    for attempt in range(3):\n        return call()\n"


def test_the_tree_holds_the_parent_files_so_the_fix_is_not_in_what_is_ranked(
        history: Callable[[str], History], tmp_path: Path) -> None:
    repo = history("repo")
    parent = repo.commit("start", {"src/retry.py": BROKEN, "src/http.py": "x = 1\n"})
    repo.commit("retry gives up after three attempts",
                {"src/retry.py": FIXED, "src/backoff.py": "y = 2\n"})
    cache = tmp_path / "cache"

    with commit_tree(repo.root, parent, cache) as tree:
        assert (tree / "src/retry.py").read_text() == BROKEN
        assert not (tree / "src/backoff.py").exists()
        assert tree.is_relative_to(cache) and not (tree / ".git").exists()

    assert not tree.exists() and list((cache / "calibrate").iterdir()) == []
    assert (repo.root / "src/retry.py").read_text() == FIXED  # the user's tree untouched
    status = subprocess.run(["git", "-C", str(repo.root), "status", "--porcelain"],
                            capture_output=True, text=True, check=True).stdout
    worktrees = subprocess.run(["git", "-C", str(repo.root), "worktree", "list"],
                               capture_output=True, text=True, check=True).stdout
    assert status == "" and len(worktrees.splitlines()) == 1


def test_the_tree_is_removed_when_the_run_fails(history: Callable[[str], History],
                                                 tmp_path: Path) -> None:
    repo = history("repo")
    parent = repo.commit("start", {"src/retry.py": BROKEN})
    cache = tmp_path / "cache"

    with pytest.raises(RuntimeError), commit_tree(repo.root, parent, cache) as tree:
        assert tree.is_dir()
        raise RuntimeError("the measurement failed")

    assert list((cache / "calibrate").iterdir()) == []


def test_sweep_removes_the_trees_of_killed_runs_and_keeps_live_ones(tmp_path: Path) -> None:
    dead = subprocess.Popen(["true"])
    dead.wait()
    base = tmp_path / "calibrate"
    (base / f"tree-{dead.pid}-abc-1" / "tree").mkdir(parents=True)
    (base / f"tree-{os.getppid()}-abc-2").mkdir()

    sweep(base)

    assert [p.name for p in base.iterdir()] == [f"tree-{os.getppid()}-abc-2"]


def test_a_tracked_link_out_of_the_tree_is_left_out_and_the_rest_laid_out(
        history: Callable[[str], History], tmp_path: Path) -> None:
    repo = history("repo")
    repo.commit("start", {"src/retry.py": BROKEN, "docs/guide.md": "# guide\n"})
    (repo.root / "passwd").symlink_to("/etc/passwd")
    (repo.root / "up").symlink_to("../../outside")
    (repo.root / "guide").symlink_to("docs/guide.md")
    parent = repo.commit("links: an absolute one, one out of the repository, one inside", {})
    cache = tmp_path / "cache"

    with commit_tree(repo.root, parent, cache) as tree:
        assert (tree / "src/retry.py").read_text() == BROKEN
        assert not (tree / "passwd").is_symlink() and not (tree / "up").is_symlink()
        assert (tree / "guide").read_text() == "# guide\n"


@pytest.mark.parametrize("number", [signal.SIGHUP, signal.SIGINT])
@pytest.mark.parametrize("another_thread", [False, True])
def test_a_stop_signal_while_a_tree_is_removed_ends_the_run_only_once_it_is_gone(
        history: Callable[[str], History], tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch, number: int, another_thread: bool) -> None:
    """With another thread alive (a history look-up, the idle work of an earlier search),
    the process's signal goes to that thread, whose mask does not hold it: the removal must
    still end first."""
    from slm_rerank.calibration import trees
    from slm_rerank.cli.calibrate import terminate_cleanly

    repo = history("repo")
    parent = repo.commit("start", {f"src/m{n}.py": BROKEN for n in range(50)})
    cache = tmp_path / "cache"
    remove = shutil.rmtree

    def hung_up_meanwhile(path: Path, ignore_errors: bool = False) -> None:
        os.kill(os.getpid(), number)  # the terminal closes as the removal starts
        remove(path, ignore_errors=ignore_errors)

    monkeypatch.setattr(trees.shutil, "rmtree", hung_up_meanwhile)
    done = threading.Event()
    other = threading.Thread(target=done.wait, daemon=True)
    if another_thread:
        other.start()
    try:
        with pytest.raises((SystemExit, KeyboardInterrupt)) as stopped, terminate_cleanly():
            with commit_tree(repo.root, parent, cache) as tree:
                assert (tree / "src/m49.py").is_file()
    finally:
        done.set()

    if number == signal.SIGINT:
        assert stopped.type is KeyboardInterrupt
    else:
        assert stopped.type is SystemExit and stopped.value.code == 128 + number
    assert list((cache / "calibrate").iterdir()) == []


def test_two_stop_signals_at_once_still_remove_the_tree(
        history: Callable[[str], History], tmp_path: Path) -> None:
    """SIGTERM and SIGHUP together (a service stopped, its terminal closed): the first's
    handler unwinds the run, the second's runs at Python's next chance, which may be as
    the removal's hold begins; the tree is removed all the same."""
    from slm_rerank.cli.calibrate import terminate_cleanly

    repo = history("repo")
    parent = repo.commit("start", {f"src/m{n}.py": BROKEN for n in range(5)})
    cache = tmp_path / "cache"
    both = [signal.SIGTERM, signal.SIGHUP]

    with pytest.raises(SystemExit) as stopped, terminate_cleanly():
        with commit_tree(repo.root, parent, cache):
            signal.pthread_sigmask(signal.SIG_BLOCK, both)
            for number in both:
                os.kill(os.getpid(), number)
            signal.pthread_sigmask(signal.SIG_UNBLOCK, both)  # both pending: both run
            for _ in range(1000):
                pass

    assert stopped.value.code in (128 + signal.SIGTERM, 128 + signal.SIGHUP)
    assert list((cache / "calibrate").iterdir()) == []
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL  # every handler put back
