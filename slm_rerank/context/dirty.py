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
import stat
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from slm_rerank.git_runner import GitError, GitTimeout, git_output

if TYPE_CHECKING:
    from slm_rerank.lexical.file_scores import FileEvidence

#: How long git may take to answer, in total (every call in the repository and in each
#: submodule looked into); a wedged repository must not hang the search.
GIT_SECONDS = 10.0
#: what git says (LC_ALL=C) outside any repository, as against a repository it cannot read
NOT_A_REPOSITORY = "not a git repository"
#: Nested submodules looked into, at most; each costs a few git calls.
MAX_SUBMODULES = 32
#: Entries of a ``.gitmodules`` read, at most (each costs a stat)
MAX_LISTED_SUBMODULES = 1000
#: bytes of git's answer read, at most (a status of a huge untracked tree is cut off as an
#: error, not read without end)
MAX_STATUS_BYTES = 64_000_000


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


def _git(root: Path, *args: str, deadline: float, ok: tuple[int, ...] = (0,)) -> bytes:
    # git_runner: nothing the repository configures runs (its filters, fsmonitor, hooks),
    # GIT_DIR and the like in the environment are ignored (a git hook exports GIT_DIR and
    # GIT_INDEX_FILE, a dotfiles alias GIT_DIR: the question is what is uncommitted under
    # the root), and no optional lock is taken (`git status` otherwise rewrites the index
    # under index.lock, and the user's own `git commit` at that moment fails on the lock).
    # ``deadline`` (time.monotonic) is --dirty's whole: each call gets what is left of it
    left = deadline - time.monotonic()
    if left <= 0:
        raise GitTimeout(f"git {args[0]} in {root}: no time left of --dirty's {GIT_SECONDS:g} s")
    return git_output(root, args, timeout=left, max_bytes=MAX_STATUS_BYTES, ok=ok)


def find_dirty(root: Path) -> DirtyFiles:
    """The uncommitted files under ``root``; a reason instead when git cannot say.

    A submodule with changes is looked into: its changed files are listed under its path,
    as the search lists them, not the submodule's folder as one "modified" entry.
    """
    if shutil.which("git") is None:
        return DirtyFiles(reason="git is not installed")
    # one deadline for every git call: a repository with submodules (each with its own
    # configuration) must not get GIT_SECONDS per call
    deadline = time.monotonic() + GIT_SECONDS
    found = _status(root, deadline)
    budget = [MAX_SUBMODULES]
    if found.reason is None:
        found.kinds = _into_submodules(root, found.kinds, budget, deadline)
    return found


def _into_submodules(root: Path, kinds: dict[str, str], budget: list[int],
                     deadline: float) -> dict[str, str]:
    """``kinds`` with each submodule replaced by the changed files inside it."""
    out: dict[str, str] = {}
    for path, kind in kinds.items():
        inner = root / path  # lone surrogates (os.fsdecode) encode back to the same bytes
        # git reports a folder only for a submodule (or a nested repository, untracked):
        # with --untracked-files=all every other entry is a file.
        if kind in ("untracked", "deleted") or not (inner / ".git").exists() or budget[0] <= 0:
            if kind != _SUBMODULE:  # a submodule not looked into is not known to be dirty
                out[path] = kind
            continue
        budget[0] -= 1
        nested = _status(inner, deadline)
        if nested.reason is not None:
            if kind != _SUBMODULE:
                out[path] = kind
            continue
        for sub, sub_kind in _into_submodules(inner, nested.kinds, budget, deadline).items():
            out[f"{path}/{sub}"] = sub_kind
    return out


#: the kind of a submodule ``.gitmodules`` lists, until it is looked into
_SUBMODULE = "submodule"


def _submodules(top: Path, prefix: str, deadline: float) -> list[str]:
    """The paths (under the searched root, relative to it) ``.gitmodules`` gives submodules.

    git itself is not asked to look into them (``git status`` would run git inside each one
    under the submodule's own configuration, which the runner has not read): each one is
    looked into as a repository of its own.
    """
    listing = top / ".gitmodules"
    try:
        if not stat.S_ISREG(listing.lstat().st_mode):
            return []  # a link or a FIFO is not read
    except OSError:
        return []
    raw = _git(top, "config", "-z", "--file", os.fsdecode(listing), "--get-regexp",
               r"^submodule\..*\.path$", deadline=deadline, ok=(0, 1))
    paths = []
    for record in raw.split(b"\0"):
        _name, newline, value = record.partition(b"\n")
        path = os.fsdecode(value).strip("/")
        if ".." in path.split("/"):
            continue  # not inside the work tree
        if newline and path.startswith(prefix) and path != prefix.rstrip("/"):
            paths.append(path[len(prefix):])
    return paths[:MAX_LISTED_SUBMODULES]


def _status(root: Path, deadline: float) -> DirtyFiles:
    try:
        where = _git(root, "rev-parse", "--show-toplevel", "--show-prefix", deadline=deadline)
    except GitTimeout:
        return DirtyFiles(reason=f"git did not answer in {GIT_SECONDS:.0f} s in {root}")
    except GitError as exc:
        if NOT_A_REPOSITORY in str(exc):
            return DirtyFiles(reason=f"{root} is not in a git repository")
        return DirtyFiles(reason=str(exc))  # a repository git cannot read: say why
    top, _, prefix = os.fsdecode(where).rstrip("\n").partition("\n")
    try:
        # --ignore-submodules=dirty (the runner's): a submodule's own changes are found by
        # looking into it (_submodules), not by git running git inside it
        status = _git(root, "status", "--porcelain=v1", "-z", "--no-renames",
                      "--untracked-files=all", "--", ".", deadline=deadline)
        kinds = parse_status(status, prefix)
        for path in _submodules(Path(top), prefix, deadline):
            kinds.setdefault(path, _SUBMODULE)
    except GitTimeout:
        return DirtyFiles(reason=f"git did not answer in {GIT_SECONDS:.0f} s in {root}")
    except GitError as exc:
        return DirtyFiles(reason=str(exc))
    return DirtyFiles(kinds)


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
