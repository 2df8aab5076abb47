"""git under a deadline and an output cap: a hang or a flood is an error naming the call."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest
from git_history import History

from slm_rerank.git_runner import GitError, git_output


def test_git_that_prints_more_than_the_cap_is_stopped_with_an_error(
        history: Callable[[str], History]) -> None:
    repo = history("repo")
    repo.commit("a large file", {"big.txt": "x" * 200_000})

    with pytest.raises(GitError, match="printed more than 1000 bytes"):
        git_output(repo.root, ["show", "HEAD:big.txt"], max_bytes=1000)


def test_git_that_hangs_is_stopped_at_its_deadline(history: Callable[[str], History]) -> None:
    repo = history("repo")
    started = time.monotonic()

    with pytest.raises(GitError, match="took longer than 0.5 s"):
        git_output(repo.root, ["-c", "alias.hang=!sleep 30", "hang"], timeout=0.5)

    assert time.monotonic() - started < 15  # far below the 30 s the command would take


def test_a_failing_git_says_which_command_and_what_git_said(
        history: Callable[[str], History]) -> None:
    repo = history("repo")

    with pytest.raises(GitError, match=r"git rev-parse no-such-rev .*failed \(exit 128\)"):
        git_output(repo.root, ["rev-parse", "no-such-rev"])
