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
from typing import TYPE_CHECKING

from slm_rerank.lexical.matches import stderr_excerpt

if TYPE_CHECKING:
    from slm_rerank.lexical.scores import FileEvidence

#: How long git may take to answer; a wedged repository must not hang the search.
GIT_SECONDS = 10.0
#: Nested submodules looked into, at most; each costs two git calls.
MAX_SUBMODULES = 32
#: Variables that point git at a repository other than the one holding the searched root
#: (a git hook exports GIT_DIR and GIT_INDEX_FILE, a dotfiles alias GIT_DIR); the question
#: is what is uncommitted under the root, so git must find the repository from there.
_LOCATING_ENV = ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_OBJECT_DIRECTORY",
                 "GIT_ALTERNATE_OBJECT_DIRECTORIES", "GIT_COMMON_DIR", "GIT_PREFIX",
                 "GIT_IMPLICIT_WORK_TREE", "GIT_GRAFT_FILE", "GIT_SHALLOW_FILE",
                 "GIT_NO_REPLACE_OBJECTS", "GIT_REPLACE_REF_BASE", "GIT_INTERNAL_SUPER_PREFIX")


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
    env = {k: v for k, v in os.environ.items() if k not in _LOCATING_ENV}
    # --no-optional-locks: `git status` otherwise rewrites the index under index.lock to
    # refresh file times, and the user's own `git commit` at that moment fails on the lock.
    return subprocess.run(["git", "--no-optional-locks", "-C", os.fsdecode(root), *args],
                          stdin=subprocess.DEVNULL, capture_output=True, timeout=GIT_SECONDS,
                          check=False, env=env)


def find_dirty(root: Path) -> DirtyFiles:
    """The uncommitted files under ``root``; a reason instead when git cannot say.

    A submodule with changes is looked into: its changed files are listed under its path,
    as the search lists them, not the submodule's folder as one "modified" entry.
    """
    if shutil.which("git") is None:
        return DirtyFiles(reason="git is not installed")
    found = _status(root)
    budget = [MAX_SUBMODULES]
    if found.reason is None:
        found.kinds = _into_submodules(root, found.kinds, budget)
    return found


def _into_submodules(root: Path, kinds: dict[str, str], budget: list[int]) -> dict[str, str]:
    """``kinds`` with each changed submodule replaced by the changed files inside it."""
    out: dict[str, str] = {}
    for path, kind in kinds.items():
        inner = root / path  # lone surrogates (os.fsdecode) encode back to the same bytes
        # git reports a folder only for a submodule (or a nested repository, untracked):
        # with --untracked-files=all every other entry is a file.
        if kind in ("untracked", "deleted") or not (inner / ".git").exists() or budget[0] <= 0:
            out[path] = kind
            continue
        budget[0] -= 1
        nested = _status(inner)
        if nested.reason is not None:
            out[path] = kind
            continue
        for sub, sub_kind in _into_submodules(inner, nested.kinds, budget).items():
            out[f"{path}/{sub}"] = sub_kind
    return out


def _status(root: Path) -> DirtyFiles:
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


def lift_dirty(root: Path, evidence: list[FileEvidence], bonus: float, notes: list[str],
               warnings: list[str]) -> dict[str, str]:
    """Multiply the lexical score of each changed file with evidence by 1 + dirty_bonus.

    Scaling the file's kind factor scales its file score and every chunk's score alike,
    and leaves a file without evidence at zero; ``evidence`` is sorted best first again.
    Returns path -> kind for every changed file under the root, for the report; outside
    git, a warning and nothing changes.
    """
    from slm_rerank.report import display_path

    found = find_dirty(root)
    if found.reason:
        warnings.append(f"--dirty changes nothing: {found.reason}")
        return {}
    lifted = []
    for ev in evidence:
        if ev.path in found.kinds and ev.score > 0:
            ev.factor *= 1.0 + bonus
            lifted.append(ev.path)
    evidence.sort(key=lambda e: (-e.score, e.path))
    counts: dict[str, int] = {}
    for kind in found.kinds.values():
        counts[kind] = counts.get(kind, 0) + 1
    summary = ", ".join(f"{n} {kind}" for kind, n in sorted(counts.items())) or "none"
    notes.append(f"--dirty: uncommitted files under the root: {summary}; "
                 f"{len(lifted)} with evidence scored x{1.0 + bonus:g} (dirty_bonus = "
                 f"{bonus:g}){': ' if lifted else ''}"
                 f"{', '.join(display_path(p) for p in lifted[:10])}"
                 f"{' ...' if len(lifted) > 10 else ''}")
    return found.kinds
