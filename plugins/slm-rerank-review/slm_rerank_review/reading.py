"""The cited chunk's text as it is on disk now, read within bounds.

The gates judge a candidate against the file, not against what the model was shown: a file
changed, removed or replaced since the search is read as it is, and one that cannot be read
is ``CHUNK_UNREADABLE``. The repository's files are untrusted: a FIFO in a file's place,
a link out of the root or a file of gigabytes must not block, escape or fill memory.
"""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path

from slm_rerank.plugin_kit import read_at_most
from slm_rerank_review.gates import split_lines

#: the largest file a chunk is read from (the search's own default max_filesize)
MAX_FILE_BYTES = 2_000_000


#: a byte of a file name that is not UTF-8, as the search prints it (``display_path``)
_ESCAPED_BYTE = re.compile(r"\\x([89a-f][0-9a-f])")


def on_disk(root: Path, path: str) -> str:
    """The file name ``path`` stands for under ``root``: the search cites a name that is not
    UTF-8 with its bytes escaped (``caf\\xe9.py``), which names no file; the name with those
    bytes back is the file's own. A file really named with the escape wins."""
    if "\\x" not in path or os.path.lexists(root / path):
        return path
    raw = os.fsdecode(_ESCAPED_BYTE.sub(
        lambda m: os.fsdecode(bytes([int(m.group(1), 16)])), path).encode(
            "utf-8", "surrogateescape"))
    return raw if os.path.lexists(root / raw) else path


class ChunkUnreadable(Exception):
    """The chunk's file cannot be read; the message says what is wrong with which file."""


def read_file(root: Path, path: str) -> tuple[bytes, str]:
    """The bytes of ``root / path`` and its text as the search decodes it.

    Raises ChunkUnreadable for a path out of the root, a file that is gone or not a
    regular file, or one over ``MAX_FILE_BYTES``.
    """
    where = root / on_disk(root, path)
    try:
        resolved_root = root.resolve()
        resolved = where.resolve()
    except (OSError, RuntimeError) as exc:  # a link loop
        raise ChunkUnreadable(f"{path}: cannot resolve it ({exc})") from None
    if not resolved.is_relative_to(resolved_root):
        raise ChunkUnreadable(f"{path}: leads out of {root} (a link); it is not read")
    try:
        # O_NONBLOCK: opening a FIFO put in a file's place returns at once instead of
        # waiting for a writer; fstat then says it is no regular file
        fd = os.open(resolved, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0))
    except OSError as exc:
        raise ChunkUnreadable(f"{path}: {exc.strerror or exc}") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise ChunkUnreadable(f"{path}: not a regular file; it is not read")
        if info.st_size > MAX_FILE_BYTES:
            raise ChunkUnreadable(f"{path}: {info.st_size} bytes, over the "
                                  f"{MAX_FILE_BYTES} a chunk is read from")
        data = read_at_most(fd, MAX_FILE_BYTES + 1)
    except OSError as exc:
        raise ChunkUnreadable(f"{path}: {exc.strerror or exc}") from None
    finally:
        os.close(fd)
    if len(data) > MAX_FILE_BYTES:  # grew while it was read
        raise ChunkUnreadable(f"{path}: over the {MAX_FILE_BYTES} bytes a chunk is read from")
    # as the search decodes it: the model was shown U+FFFD where a byte is not UTF-8
    return data, data.decode("utf-8", "replace")


def read_lines(root: Path, path: str, start_line: int, end_line: int) -> str:
    """Lines ``start_line``..``end_line`` (1-based, inclusive) of ``root / path``, joined.

    Raises ChunkUnreadable for a path out of the root, a file that is gone or not a
    regular file, one over ``MAX_FILE_BYTES``, or lines the file no longer has.
    """
    lines = split_lines(read_file(root, path)[1])
    if start_line < 1 or end_line < start_line or start_line > len(lines):
        raise ChunkUnreadable(f"{path}: has {len(lines)} lines, not lines "
                              f"{start_line}-{end_line}")
    return "\n".join(lines[start_line - 1:end_line])
