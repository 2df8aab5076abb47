"""The tree a case is searched in: a commit's files laid out in the cache folder.

``git archive`` writes the commit's tracked files as a tar, which is unpacked under
``<cache>/calibrate/`` and removed when the case is done, also when the run fails or is
stopped by a signal the command turns into an unwind (``STOP_SIGNALS``). The user's working
tree and ``.git`` are only read: no worktree is added, no index touched.

Two faults are told apart: a tree that cannot be laid out (git refuses a path in it such
as ``sub/.git``, a file name longer than the cache's file system takes) is ``BadTree``, and
the case is left out; a cache folder that is full or not writable is a ``ConfigError``
naming the folder, and the run stops, since every later tree would fail the same way.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import os
import shutil
import signal
import tarfile
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from slm_rerank.errors import ConfigError
from slm_rerank.git_runner import GitError, git_stream

#: bytes of one tree's tar: larger, and the repository is not one to calibrate on here
MAX_TREE_BYTES = 4_000_000_000
#: seconds ``git archive`` may take for one tree
ARCHIVE_TIMEOUT = 300.0
FOLDER = "calibrate"
_PREFIX = "tree-"
#: the signals a run unwinds on (``cli/calibrate.terminate_cleanly`` turns the ones Python
#: does not into an exit), held while a tree is created or removed so that none stops
#: either half-way: a tree is either registered for removal or not there, and removed whole
STOP_SIGNALS = tuple(getattr(signal, name) for name in ("SIGHUP", "SIGINT", "SIGQUIT",
                                                         "SIGTERM") if hasattr(signal, name))
#: what an OSError with these errors says about the cache folder, not about the tree: every
#: later tree would fail the same way, so the run stops
_CACHE_FAULTS = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EROFS, errno.EACCES,
                 errno.EPERM, errno.EIO}


class BadTree(ConfigError):
    """One commit's tree cannot be laid out (git refuses to archive it, or a path in it
    cannot be written here); the case is left out, the run goes on. A ConfigError, as
    GitError is, to a caller that does not leave the case out."""


@contextlib.contextmanager
def _held() -> Iterator[None]:
    """``STOP_SIGNALS`` held back (delivered when the block ends), where the OS allows.

    In the main thread each one's handler is swapped for one that notes it, and what was
    noted is raised again once the handlers are back: a signal mask alone is one thread's,
    and the process's other threads (a history look-up, the idle work of an earlier search)
    would take the signal, whose Python handler then runs in this thread all the same.
    Elsewhere (no handler can be set there) the thread's mask holds them."""
    import threading

    if threading.current_thread() is not threading.main_thread():
        mask = getattr(signal, "pthread_sigmask", None)
        if mask is None:  # Windows: no signal masks
            yield
            return
        previous_mask = mask(signal.SIG_BLOCK, STOP_SIGNALS)
        try:
            yield
        finally:
            mask(signal.SIG_SETMASK, previous_mask)
        return
    came: list[int] = []
    previous: dict[int, Any] = {}
    # A stop signal that came before the hold (a second one, pending while the first
    # unwinds) has its handler run at the next chance, which may be while the handlers are
    # swapped or put back: what it raises waits for the end of the block too, or the tree
    # being removed would be left half there, and a handler left swapped for good.
    early: list[BaseException] = []

    def note(signum: int, frame: object) -> None:
        came.append(signum)

    def steadily(step: Callable[[], object]) -> None:
        for _ in range(16):  # each failed try ran a pending handler: they run out
            try:
                step()
                return
            except BaseException as exc:  # raised again when the block ends
                early.append(exc)
        step()

    def swap(number: int) -> None:
        handler = signal.getsignal(number)
        if handler is note or handler is signal.SIG_IGN or handler is None:
            return  # ours already, ignored, or set outside Python: not ours to hold
        previous.setdefault(number, handler)
        signal.signal(number, note)

    try:
        for number in STOP_SIGNALS:
            steadily(functools.partial(swap, number))
        yield
    finally:
        for number, handler in previous.items():
            steadily(functools.partial(signal.signal, number, handler))
        try:
            for number in dict.fromkeys(came):
                signal.raise_signal(number)
        finally:
            if early:
                raise early[0]


def _remove(folder: Path) -> None:
    with _held():  # a signal now would leave the rest of a large tree behind
        shutil.rmtree(folder, ignore_errors=True)


def _cache_fault(base: Path, commit: str, exc: OSError) -> ConfigError | None:
    """The one-line error when ``exc`` is the cache folder's fault, else None."""
    if exc.errno not in _CACHE_FAULTS:
        return None
    if exc.errno in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG):
        todo = ("free space there, or set cache_dir or SLM_RERANK_CACHE_DIR to a folder with "
                "room for a copy of the repository's files")
    else:
        todo = "set cache_dir or SLM_RERANK_CACHE_DIR to a writable folder"
    return ConfigError(f"cache folder {base} cannot hold the tree of {commit[:12]} "
                       f"({exc.strerror or exc}); {todo}")


def _short(name: object, limit: int = 80) -> str:
    text = os.fsdecode(name) if isinstance(name, (str, bytes)) else str(name)
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text)} characters)"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True  # another user's process: not ours to judge
    return True


def sweep(base: Path) -> None:
    """Remove the trees of runs that were killed before they could (their pid is gone)."""
    for entry in base.glob(f"{_PREFIX}*"):
        pid = entry.name[len(_PREFIX):].split("-", 1)[0]
        if pid.isdigit() and int(pid) != os.getpid() and not _alive(int(pid)):
            shutil.rmtree(entry, ignore_errors=True)


def _inside(member: tarfile.TarInfo, dest: str) -> tarfile.TarInfo | None:
    """The "data" filter (no absolute paths, no links out of the folder, no device files),
    but a member it refuses is left out rather than failing the whole tree: a repository
    may track a link to /etc/... or ../.., which the search would not follow anyway."""
    try:
        return tarfile.data_filter(member, dest)
    except tarfile.FilterError:
        return None


@contextlib.contextmanager
def _laying_out(base: Path, commit: str, doing: str) -> Iterator[None]:
    """Each fault of laying out a tree as BadTree, or as ConfigError when it is the cache
    folder's (``_cache_fault``)."""
    try:
        yield
    except GitError as exc:
        raise BadTree(f"git cannot archive the tree of {commit[:12]}: {exc}") from None
    except OSError as exc:
        raise _cache_fault(base, commit, exc) or BadTree(
            f"cannot {doing} the tree of {commit[:12]}: {exc.strerror or exc}"
            + (f": {_short(exc.filename)}" if exc.filename else "")) from None
    except tarfile.TarError as exc:
        raise BadTree(f"cannot {doing} the tree of {commit[:12]}: {exc}") from None


@contextlib.contextmanager
def commit_tree(repo: Path, commit: str, cache_dir: Path) -> Iterator[Path]:
    """The files of ``commit`` in a fresh folder under ``cache_dir``, removed afterwards.

    Raises BadTree when that tree cannot be laid out, and ConfigError when the cache folder
    cannot hold it (full, over quota, read-only); either way nothing of it is left."""
    base = cache_dir / FOLDER
    with contextlib.ExitStack() as cleanup:
        try:
            with _held():  # made and registered for removal, or not made at all
                base.mkdir(parents=True, exist_ok=True)
                folder = Path(tempfile.mkdtemp(
                    prefix=f"{_PREFIX}{os.getpid()}-{commit[:12]}-", dir=base))
                cleanup.callback(_remove, folder)
        except OSError as exc:
            raise _cache_fault(base, commit, exc) or ConfigError(
                f"cannot lay out the tree of {commit[:12]} under {base} "
                f"({exc.strerror or exc}); set cache_dir or SLM_RERANK_CACHE_DIR to a "
                "writable folder") from None
        archive, tree = folder / "tree.tar", folder / "tree"
        with _laying_out(base, commit, "write"), open(archive, "wb") as sink:
            git_stream(repo, ["archive", "--format=tar", commit], sink,
                       timeout=ARCHIVE_TIMEOUT, max_bytes=MAX_TREE_BYTES)
        with _laying_out(base, commit, "unpack"):
            tree.mkdir()
            with tarfile.open(archive) as tar:
                tar.extractall(tree, filter=_inside)
            archive.unlink()
        yield tree
