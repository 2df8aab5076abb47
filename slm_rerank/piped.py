"""What a search reads from its stdin: file names from a pipe or a file, or the query
(``--query-file -``), read once by whichever process reads it first.

The command's side of the warm process reads stdin here (standard library only: before
click is imported), as the search itself reads it, and sends the bytes with the request;
the search, in the warm process or in this process when the warm process does not answer,
takes what was read (``given``) instead of reading stdin again.
"""

from __future__ import annotations

import os
import select
import stat

#: How long an open pipe on stdin may stay silent before it is taken to have said all it will.
STDIN_WAIT_SECONDS = 2.0


class Given:
    """Stdin as the command's side read it (a plain class: read before ``dataclasses``)."""

    __slots__ = ("data", "silent")

    def __init__(self, data: bytes, silent: bool) -> None:
        self.data = data
        #: an open pipe that went silent for STDIN_WAIT_SECONDS without closing
        self.silent = silent


#: set by the warm process's client (and, in the warm process, from the request)
given: Given | None = None


def read_pipe(fd: int) -> tuple[bytes, bool]:
    """Everything an open pipe sends until EOF (``silent`` False), or until it stays silent
    STDIN_WAIT_SECONDS (True): a caller may leave stdin open, idle or after a few lines."""
    chunks: list[bytes] = []
    while True:
        readable, _, _ = select.select([fd], [], [], STDIN_WAIT_SECONDS)
        if not readable:
            return b"".join(chunks), True
        chunk = os.read(fd, 1 << 16)
        if not chunk:
            return b"".join(chunks), False
        chunks.append(chunk)


def read_up_to(fd: int, limit: int) -> bytes:
    """What ``fd`` holds until its end, ``limit`` bytes at most."""
    chunks: list[bytes] = []
    size = 0
    while size < limit:
        chunk = os.read(fd, min(1 << 16, limit - size))
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
    return b"".join(chunks)


def read_names(fd: int) -> Given | None:
    """The file names a search reads from ``fd``: a pipe's (``read_pipe``), a file's
    whole; None when it is neither (a terminal, ``/dev/null``, closed)."""
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        return None
    if stat.S_ISFIFO(mode):
        return Given(*read_pipe(fd))
    if stat.S_ISREG(mode):
        return Given(read_up_to(fd, 1 << 62), False)
    return None
