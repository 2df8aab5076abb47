"""Opening files in the cache folder: only regular files, never through a symlink, never
blocking; and reading a file the user names on the command line without waiting on it for
ever (``read_named``).

The cache folder holds only slm-rerank's own files, yet anything may be put there: a
symlink would make a write land in its target (a query appended to someone's file, our
tables created in another app's database) and a FIFO would block the open or the read for
ever (every search hung). ``open_regular`` refuses anything but a regular file, by name.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import stat
import time
from collections.abc import Callable, Iterator
from pathlib import Path


class NotRegularFile(OSError):
    """``path`` is a symlink, a FIFO, a folder or another non-regular file: refused.

    An ``OSError``, so that code which already treats an unreadable cache file as a miss or
    an unwritable one as a warning does the same here; ``what`` says what the file is.
    """

    def __init__(self, path: Path, what: str) -> None:
        super().__init__(errno.EPERM, f"it is {what}, not a regular file", str(path))
        self.path = path
        self.what = what

    def __str__(self) -> str:  # "[Errno 1] ..." would only puzzle a reader
        return f"{self.path}: it is {self.what}, not a regular file"


def describe(mode: int) -> str:
    """What a non-regular file is, in words a person recognises."""
    for test, name in ((stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISDIR, "a directory"),
                       (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISLNK, "a symbolic link")):
        if test(mode):
            return name
    return "not a regular file"


def _link_text(path: Path) -> str:
    try:
        target = os.readlink(path)
    except OSError:
        return "a symbolic link"
    # the target is anyone's text: no control character reaches a terminal through it
    shown = "".join(c if c.isprintable() else "?" for c in target)[:200]
    return f"a symbolic link (to {shown})"


def open_regular(path: Path, flags: int, mode: int = 0o644) -> int:
    """A descriptor on the regular file ``path``; NotRegularFile for anything else.

    O_NOFOLLOW refuses a symlink at ``path``; O_NONBLOCK makes opening a FIFO return at
    once (for writing with no reader it fails with ENXIO), and fstat then refuses it.
    Other faults (missing file, permissions) raise as the usual ``OSError``.
    """
    try:
        fd = os.open(path, flags | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, mode)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.EMLINK):  # EMLINK: the BSDs' O_NOFOLLOW answer
            raise NotRegularFile(path, _link_text(path)) from None
        if exc.errno == errno.ENXIO:  # a FIFO opened for writing that nobody reads
            raise NotRegularFile(path, "a FIFO (named pipe)") from None
        if exc.errno == errno.EISDIR:  # opened for writing
            raise NotRegularFile(path, "a directory") from None
        raise
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise NotRegularFile(path, describe(info.st_mode))
        os.set_blocking(fd, True)  # a regular file: nothing blocks; writes are whole
    except BaseException:
        os.close(fd)
        raise
    return fd


def read_at_most(fd: int, limit: int) -> bytes:
    """At most ``limit`` bytes of the open file ``fd``, read in steps of 1 MiB: a caller
    that asks for one byte past its cap tells a file that grew since its ``fstat``."""
    parts: list[bytes] = []
    left = limit
    while left > 0:
        part = os.read(fd, min(left, 1 << 20))
        if not part:
            break
        parts.append(part)
        left -= len(part)
    return b"".join(parts)


#: Seconds a pipe the user names (``--query-file <(gh issue view 12)``, a FIFO) has to
#: deliver all it holds: a FIFO that nobody writes would otherwise be waited on for ever.
PIPE_SECONDS = 10.0


class PipeTimeout(OSError):
    """A pipe the user named did not end (its writer did not close it) within its time."""

    def __init__(self, path: Path, seconds: float) -> None:
        super().__init__(errno.ETIMEDOUT, f"nothing closed the pipe within {seconds:g} s",
                         str(path))
        self.path = path
        self.seconds = seconds

    def __str__(self) -> str:
        return (f"{self.path}: it is a pipe (FIFO), and no program wrote to it and closed it "
                f"within {self.seconds:g} s")


def read_named(path: Path, limit: int, pipe_seconds: float | None = None) -> bytes:
    """At most ``limit`` bytes of a file the user named (``--query-file``, ``--cases``,
    ``--api-key-file``): a regular file, or a pipe read until it ends or ``pipe_seconds``
    (PIPE_SECONDS unless given) have passed.

    Opened without blocking, so a FIFO nobody writes costs ``pipe_seconds``, not for ever
    (PipeTimeout); a directory, device (``/dev/zero`` never ends) or socket is refused
    (NotRegularFile, whose ``what`` names it). A symlink is followed: the user named it.
    Other faults (a missing file, permissions) raise as the usual ``OSError``.
    """
    import select

    seconds = PIPE_SECONDS if pipe_seconds is None else pipe_seconds
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_ISREG(mode):
            os.set_blocking(fd, True)
            return read_at_most(fd, limit)
        if not stat.S_ISFIFO(mode):
            raise NotRegularFile(path, describe(mode))
        parts: list[bytes] = []
        left = limit
        deadline = time.monotonic() + seconds
        while left > 0:
            wait = deadline - time.monotonic()
            if wait <= 0 or not select.select([fd], [], [], wait)[0]:
                raise PipeTimeout(path, seconds)
            try:
                part = os.read(fd, min(left, 1 << 20))
            except BlockingIOError:
                continue
            if not part:
                break
            parts.append(part)
            left -= len(part)
        return b"".join(parts)
    finally:
        os.close(fd)


def check_regular(path: Path) -> None:
    """Raise NotRegularFile when ``path`` exists and is not a regular file (lstat: a
    symlink is refused, not followed); for files another library opens by name."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return
    if stat.S_ISLNK(info.st_mode):
        raise NotRegularFile(path, _link_text(path))
    if not stat.S_ISREG(info.st_mode):
        raise NotRegularFile(path, describe(info.st_mode))


def replace_file(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` through a new temporary file beside it, then rename it
    into place: a concurrent reader never sees half a file, and the rename replaces a
    symlink or FIFO at ``path`` instead of opening it (mkstemp: O_EXCL, a random name).

    Raises ``OSError``; the temporary file is gone whatever happened (a full disk must not
    keep half-written files behind).
    """
    import tempfile  # only when a cache is written: keeps it out of every start-up

    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as out:
            out.write(text)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


@contextlib.contextmanager
def flock_held(fd: int, seconds: float, stuck: Callable[[], Exception],
               poll: float = 0.05) -> Iterator[None]:
    """Hold an exclusive ``flock`` on ``fd`` for the ``with`` block, waiting at most
    ``seconds`` for another holder; past that, raise ``stuck()`` (the caller's one-line
    error saying who holds it and what to do). ``fd`` is the caller's, closed on the way
    out in every case: a lock held longer than any holder needs is stuck, and waiting with
    it helps no one."""
    try:
        deadline = time.monotonic() + seconds
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise stuck() from None
                time.sleep(poll)
        try:
            yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)
