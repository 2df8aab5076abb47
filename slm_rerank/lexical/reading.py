"""Reading a candidate file: a regular file only, within the size limit, never blocking on
a FIFO or a device, and skipped when its content is not worth chunking."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from slm_rerank.lexical.filetypes import SNIFF_BYTES, content_reason, size_reason

#: Opening never waits: a FIFO (or a device) put where a listed file was would otherwise
#: block ``open`` until a writer came, and the search with it. Symlinks are still followed,
#: as they always were: a link inside the repository to a file is read as that file.
_OPEN_FLAGS = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)


def read_candidate(root: Path, rel: str, limit: int) -> tuple[bytes | None, str | None]:
    """A candidate file's bytes, or why it was skipped (``read_regular``, then its content:
    binary, minified and generated files are not worth chunking)."""
    data, reason = read_regular(root, rel, limit)
    if data is None:
        return None, reason
    reason = content_reason(os.path.basename(rel), data[:SNIFF_BYTES], len(data))
    return (None, reason) if reason else (data, None)


def read_regular(root: Path, rel: str, limit: int) -> tuple[bytes | None, str | None]:
    """The bytes of the regular file ``rel`` under ``root`` (at most ``limit``), or why not.

    The file is judged by fstat of the descriptor opened, not by a stat of its name: a file
    swapped for a FIFO, a socket or a device after the listing is skipped, never read.
    """
    full = os.path.join(os.fsencode(root), os.fsencode(rel))
    try:
        fd = os.open(full, _OPEN_FLAGS)
        try:
            status = os.fstat(fd)
            if stat.S_ISDIR(status.st_mode):
                return None, "a directory, not a file"
            if not stat.S_ISREG(status.st_mode):
                return None, "not a regular file (a pipe, socket or device)"
            size = status.st_size
            reason = size_reason(size, limit)
            if reason:
                return None, reason
            with open(fd, "rb", closefd=False) as handle:
                # read(n) allocates n bytes before reading: size it by the file, not the limit
                data = handle.read(size + 1)
                if len(data) > size:  # it grew since fstat
                    data += handle.read(limit + 1 - len(data))
        finally:
            os.close(fd)
    except OSError as exc:
        return None, f"unreadable ({exc.strerror or exc})"
    if len(data) > limit:
        return None, size_reason(len(data), limit)
    return data, None
