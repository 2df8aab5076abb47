"""Uncommitted work (``--dirty``): the files git reports as modified, staged or untracked.

A question asked while you work is often about what you are changing. With ``--dirty`` each
such file that has some lexical evidence for the query has its lexical score multiplied by
``1 + dirty_bonus`` (1.5 by default): enough to lift a relevant file you are editing into
the model's head, while a changed file the query says nothing about gains nothing (zero
times anything is zero).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from slm_rerank.matches import stderr_excerpt

#: How long git may take to answer; a wedged repository must not hang the search.
GIT_SECONDS = 10.0


@dataclass
class DirtyFiles:
    """Changed files under the searched root, or why there are none to know of."""

    #: path relative to the searched root -> "modified", "staged", "untracked" or "deleted"
    kinds: dict[str, str] = field(default_factory=dict)
    #: why nothing could be found (not a git repository, no git, git failed); None if found
    reason: str | None = None


def _kind(index: str, worktree: str) -> str:
    if index == "?":
        return "untracked"
    if "D" in (index, worktree):
        return "deleted"
    return "staged" if index not in (" ", "") and worktree == " " else "modified"


def parse_status(output: bytes, prefix: str) -> dict[str, str]:
    """path -> kind from ``git status --porcelain=v1 -z --no-renames`` run under ``prefix``.

    Porcelain paths are relative to the repository's top level, whatever the working
    directory; ``prefix`` (``git rev-parse --show-prefix``: the searched root's place in the
    repository, ending in ``/``, or empty) is cut off them so they match the search's paths.
    """
    kinds = {}
    for record in output.split(b"\0"):
        if len(record) < 4 or record[2:3] != b" ":
            continue  # the empty tail after the last NUL, or something not a status record
        index, worktree = chr(record[0]), chr(record[1])
        path = os.fsdecode(record[3:])
        if prefix and not path.startswith(prefix):
            continue
        kinds[path[len(prefix):]] = _kind(index, worktree)
    return kinds


def _git(root: Path, *args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(["git", "-C", os.fsdecode(root), *args], stdin=subprocess.DEVNULL,
                          capture_output=True, timeout=GIT_SECONDS, check=False)


def find_dirty(root: Path) -> DirtyFiles:
    """The uncommitted files under ``root``; a reason instead when git cannot say."""
    if shutil.which("git") is None:
        return DirtyFiles(reason="git is not installed")
    try:
        where = _git(root, "rev-parse", "--show-prefix")
        if where.returncode != 0:
            return DirtyFiles(reason=f"{root} is not in a git repository")
        prefix = os.fsdecode(where.stdout.rstrip(b"\n"))
        status = _git(root, "status", "--porcelain=v1", "-z", "--no-renames",
                      "--untracked-files=all", "--", ".")
    except subprocess.TimeoutExpired:
        return DirtyFiles(reason=f"git status did not answer in {GIT_SECONDS:.0f} s in {root}")
    except OSError as exc:
        return DirtyFiles(reason=f"git could not run in {root}: {exc.strerror or exc}")
    if status.returncode != 0:
        return DirtyFiles(reason=f"git status failed in {root}: "
                                 f"{stderr_excerpt(status.stderr)}")
    return DirtyFiles(parse_status(status.stdout, prefix))
