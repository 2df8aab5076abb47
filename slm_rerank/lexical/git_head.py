"""Where a work tree's HEAD is, kept while the files git reads to say it are unchanged.

Every ``--fast`` search that weighs history asks ``git rev-parse`` (and, first,
``git config`` for the filter drivers, ``git_runner``) where the root is in its work tree
and which commit HEAD names: two processes, 3-4 ms on sympy, which a warm search waits for.
Their answer depends only on files: the ``.git`` entries from the root up to the work
tree's top, the git folder (its own times change when an entry in it is added, removed or
renamed, as git does with every lock file), ``HEAD``, the ref it names and the folders
down to it, ``packed-refs``, ``shallow``, the repository's ``config`` and the user's and
the system's (a ``safe.directory`` there decides whether git answers at all), and the
environment's ``GIT_*`` variables, ``HOME`` and ``XDG_CONFIG_HOME``. So an answer is kept
with the stamp (device, inode, mode, size, modification and change times) of each of those
paths, there or not (and, for a symbolic link, of the file it leads to), and given again
while every stamp is the same. Outside any repository (a folder of documents), git's
answer that there is none is kept the same way, with the stamps of what git looks for in
each folder from the root up: a ``.git``, or a ``HEAD``, ``objects`` and ``refs`` (a git
folder itself).

Kept only when it can be followed and is settled: a git folder that is a file (a worktree,
a submodule), one with a ``commondir`` or a ``reftable``, a configuration that includes
another file, a ``HEAD`` that is a symbolic link or names something outside ``refs/``, a
loose ref that names another ref (``git symbolic-ref``), or any stamped path changed less
than ``RACY_SECONDS`` before git was started (a change in the same clock tick as its stamp
would not show): never kept, and git answers every time, as before. At most ``MAX_KEPT``
answers, in memory only.
"""

from __future__ import annotations

import os
import re
import stat
import time
from dataclasses import dataclass
from pathlib import Path

from slm_rerank.git_runner import GitError, GitTimeout, git_output

RACY_SECONDS = 2
_RACY_NS = RACY_SECONDS * 1_000_000_000
MAX_KEPT = 16
#: bytes read of a configuration file to look for an include
_CONFIG_BYTES = 1 << 20
#: Bytes of ``git rev-parse`` output read (three short lines and a commit id).
MAX_REV_PARSE_BYTES = 64 * 1024
_COMMIT_ID = re.compile(r"[0-9a-f]{40}(?:[0-9a-f]{24})?")

Stamp = tuple[int, int, int, int, int, int]
_ABSENT: Stamp = (0, 0, 0, -1, 0, 0)
#: added to a path stamped as the file its symbolic links lead to (no path holds a NUL)
_FOLLOWED = "\0"

_KEPT: dict[tuple[str, ...], tuple[Where | str, dict[str, Stamp]]] = {}


@dataclass(frozen=True)
class Where:
    """The work tree's top (real path), the root's place in it, and the commit to read."""

    top: str
    prefix: str
    head: str


def where(root: Path, rev: str, timeout: float) -> Where | str:
    """Where ``root`` is in its work tree and the commit ``rev`` names; or why there is no
    history to read there."""
    found = _KEPT.get(_key(root, rev)) if rev == "HEAD" else None
    if found is not None and all(_stamp(path) == was for path, was in found[1].items()):
        return found[0]  # nothing git reads for it changed since it last said
    started, began = time.monotonic(), now_ns()
    if timeout <= 0:
        raise GitTimeout("no time left for git rev-parse")
    try:
        out = git_output(root, ["rev-parse", "--show-toplevel", "--show-prefix",
                                "--is-shallow-repository", "--verify", "-q",
                                f"{rev}^{{commit}}"],
                         timeout=timeout, max_bytes=MAX_REV_PARSE_BYTES, ok=(0, 1))
    except GitTimeout:
        raise
    except GitError as exc:
        if "not a git repository" in str(exc):  # git's words (LC_ALL=C) outside one
            outside = f"{root} is not in a git repository"
            if rev == "HEAD":
                _keep(root, rev, outside, began)
            return outside
        return str(exc)
    lines = os.fsdecode(out).split("\n")
    if len(lines) < 3 or not lines[0]:
        return f"git rev-parse in {root} did not say where the work tree is"
    top, prefix, shallow = lines[0], lines[1], lines[2]
    head = lines[3] if len(lines) > 3 else ""
    if not _COMMIT_ID.fullmatch(head):
        return _no_commit(root, rev, top, timeout - (time.monotonic() - started))
    if shallow == "true":
        return (f"{top} is a shallow clone (its cut history would make every file look "
                "new); run 'git fetch --unshallow' to use it")
    answer = Where(os.path.realpath(top), prefix, head)
    if rev == "HEAD":
        _keep(root, rev, answer, began)
    return answer


def _no_commit(root: Path, rev: str, top: str, timeout: float) -> str:
    """Why ``rev`` names no commit: none yet, or one git cannot read (a broken repository)."""
    if timeout <= 0:
        raise GitTimeout("no time left for git rev-parse")
    try:
        named = git_output(root, ["rev-parse", "--verify", "-q", rev], timeout=timeout,
                           max_bytes=MAX_REV_PARSE_BYTES, ok=(0, 1)).strip()
    except GitTimeout:
        raise
    except GitError as exc:
        return str(exc)
    if named:  # the name is there, the commit it names is not readable
        return (f"{rev} in {top} names {os.fsdecode(named)[:64]}, which git cannot read "
                "as a commit (a broken repository; 'git fsck' says more)")
    return f"{top} has no commits yet" if rev == "HEAD" else f"{rev} names no commit in {top}"


class _Unfollowable(Exception):
    """What git's answer depends on cannot be stamped."""


def now_ns() -> int:
    """The wall clock, as the file system stamps times (a name tests replace)."""
    return time.time_ns()


def _key(root: Path, rev: str) -> tuple[str, ...]:
    env = sorted(f"{k}={v}" for k, v in os.environ.items() if k.startswith("GIT_"))
    return (os.path.realpath(root), rev, os.path.expanduser("~"),
            os.environ.get("XDG_CONFIG_HOME", ""), *env)


def _stamp(path: str) -> Stamp:
    """``path``'s stamp; for one ending in ``_FOLLOWED``, the stamp of what it leads to."""
    try:
        st = os.stat(path[:-1]) if path.endswith(_FOLLOWED) else os.lstat(path)
    except OSError:
        return _ABSENT
    return (st.st_dev, st.st_ino, st.st_mode, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def _read(path: str, limit: int) -> bytes:
    """Up to ``limit`` bytes of a regular file (a repository's own: a FIFO there would
    never be waited on, nor a device read)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        raise _Unfollowable(path) from exc
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise _Unfollowable(path)
        return os.read(fd, limit)
    except OSError as exc:
        raise _Unfollowable(path) from exc
    finally:
        os.close(fd)


def _config(path: str, stamps: dict[str, Stamp]) -> None:
    """Stamp a configuration file; one that includes another cannot be followed."""
    stamps[path] = _stamp(path)
    if stamps[path] == _ABSENT:
        return
    text = _read(path, _CONFIG_BYTES + 1)
    if len(text) > _CONFIG_BYTES or b"[include" in text.lower():
        raise _Unfollowable(path)


def _user_configs() -> list[str]:
    home = os.path.expanduser("~")  # "~" itself when there is none to be found
    home = "" if home == "~" else home
    xdg = os.environ.get("XDG_CONFIG_HOME", "") or (os.path.join(home, ".config") if home
                                                    else "")
    paths = ["/etc/gitconfig"]
    if home:
        paths += [home, os.path.join(home, ".gitconfig")]
    if xdg:
        paths += [os.path.join(xdg, "git"), os.path.join(xdg, "git", "config")]
    return paths


def _stamps_outside(root: str) -> dict[str, Stamp]:
    """The stamps of what git looked for, from ``root`` up, to find no repository: in each
    folder, a ``.git``, and what makes the folder a git folder itself (``HEAD``,
    ``objects``, ``refs``), there or not."""
    stamps: dict[str, Stamp] = {}
    folder = root
    while True:
        for name in (".git", "HEAD", "objects", "refs"):
            stamps[os.path.join(folder, name)] = _stamp(os.path.join(folder, name))
        if os.path.dirname(folder) == folder:
            return _followed(stamps)
        folder = os.path.dirname(folder)


def _followed(stamps: dict[str, Stamp]) -> dict[str, Stamp]:
    """``stamps`` and, for each symbolic link among them, the stamp of what it leads to."""
    for path, was in list(stamps.items()):  # a link: the file it leads to changes unseen
        if stat.S_ISLNK(was[2]):
            stamps[path + _FOLLOWED] = _stamp(path + _FOLLOWED)
    return stamps


def _stamps(root: str, top: str) -> dict[str, Stamp]:
    """The stamps of what git read to place ``root`` in the work tree at ``top``."""
    stamps: dict[str, Stamp] = {}
    folder = root
    while True:  # a .git made between the root and the top would be found first
        stamps[os.path.join(folder, ".git")] = _stamp(os.path.join(folder, ".git"))
        if folder == top or os.path.dirname(folder) == folder:
            break
        folder = os.path.dirname(folder)
    if folder != top:
        raise _Unfollowable(root)  # the top is not above the root as its path says
    git = os.path.join(top, ".git")
    if not stat.S_ISDIR(stamps[git][2]):
        raise _Unfollowable(git)  # a file: the git folder is elsewhere
    for name in ("commondir", "reftable"):
        if _stamp(os.path.join(git, name)) != _ABSENT:
            raise _Unfollowable(os.path.join(git, name))
    for name in ("HEAD", "packed-refs", "shallow"):
        stamps[os.path.join(git, name)] = _stamp(os.path.join(git, name))
    head = os.path.join(git, "HEAD")
    if not stat.S_ISREG(stamps[head][2]):
        raise _Unfollowable(head)
    said = _read(head, 4096).strip()
    if said.startswith(b"ref:"):
        ref = os.fsdecode(said[4:].strip())
        parts = ref.split("/")
        if parts[0] != "refs" or any(p in ("", ".", "..") for p in parts):
            raise _Unfollowable(head)
        here = git
        for part in parts:  # each folder down to the ref: a loose ref added or removed
            here = os.path.join(here, part)
            stamps[here] = _stamp(here)
        # a loose ref that names another ref: that one is not stamped (none: it is packed)
        if stamps[here] != _ABSENT and _read(here, 4).startswith(b"ref:"):
            raise _Unfollowable(here)
    for path in [os.path.join(git, "config"), *_user_configs()]:
        if os.path.basename(path) in ("config", "gitconfig", ".gitconfig"):
            _config(path, stamps)
        else:
            stamps[path] = _stamp(path)
    stamps[git] = _stamp(git)
    return _followed(stamps)


def _keep(root: Path, rev: str, answer: Where | str, began: int) -> None:
    """Keep git's ``answer`` (where HEAD is, or that ``root`` is in no repository; git
    started at ``began``, on ``now_ns``'s clock) if what it depends on can be followed and
    is settled."""
    key = _key(root, rev)
    try:
        stamps = (_stamps(key[0], answer.top) if isinstance(answer, Where)
                  else _stamps_outside(key[0]))
    except _Unfollowable:
        return
    if any(max(was[4], was[5]) >= began - _RACY_NS for was in stamps.values()):
        return
    _KEPT.pop(key, None)
    _KEPT[key] = (answer, stamps)
    while len(_KEPT) > MAX_KEPT:
        _KEPT.pop(next(iter(_KEPT)), None)


def forget() -> None:
    _KEPT.clear()
