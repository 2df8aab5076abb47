"""The chunk cache: each file's chunk boundaries, keyed by its content, in the cache folder."""

from __future__ import annotations

import json
import os
from itertools import repeat
from pathlib import Path
from typing import Any

from slm_rerank import safefile
from slm_rerank.config import MAX_FILE_BYTES
from slm_rerank.lexical import chunking
from slm_rerank.lexical.chunking import Chunk


def entry_cap(file_bytes: int) -> int:
    """The most bytes a chunk cache entry for a file of ``file_bytes`` is read up to.

    An entry is a list of [start, end, symbol, defines] rows: the numbers are line numbers
    and the names are copied from the file, so a real entry is a small fraction of the file
    (a chunk holds up to 120 lines). JSON may write one character of a name as a 6-byte
    ``\\uXXXX`` escape, and a nested symbol repeats its parents' names: eight bytes per byte
    of the file plus 64 KiB is far above any real entry, and still bounds memory by what the
    file itself already costs. An entry above the cap is a miss (the file is sliced again),
    which only costs time.
    """
    return 8 * max(0, file_bytes) + (1 << 16)


#: The cap when the file's size is not known: that of the largest file ever read.
MAX_ENTRY_BYTES = entry_cap(MAX_FILE_BYTES)


def _read_entry(path: Path, cap: int) -> bytes | None:
    """The bytes of the entry at ``path``, or None (missing, too big, not a regular file).

    Opened through ``safefile.open_regular``: a FIFO there hung every search touching that
    file, and a 3 GB file was read whole (5.9 GB RSS).
    """
    try:
        fd = safefile.open_regular(path, os.O_RDONLY)
    except OSError:
        return None
    try:
        if os.fstat(fd).st_size > cap:
            return None
        data = safefile.read_at_most(fd, cap + 1)  # one past the cap: a file that grew
        return None if len(data) > cap else data
    except OSError:
        return None
    finally:
        os.close(fd)


def _chunk(row: Any, line_count: int) -> Chunk | None:
    """A cached row as a Chunk, or None when it is not one (a hand edit, another version)."""
    if not (isinstance(row, list) and len(row) == 4):
        return None
    start, end, symbol, defines = row
    if not (type(start) is int and type(end) is int and 1 <= start <= end <= line_count):
        return None
    if not (symbol is None or isinstance(symbol, str)):
        return None
    if not (isinstance(defines, list) and all(map(isinstance, defines, repeat(str)))):
        return None
    return Chunk(start, end, symbol, tuple(defines))


class ChunkCache:
    """Chunk boundaries by content hash, as small JSON files under ``<cache>/chunks/``.

    An entry that is not valid for the file it is asked for (wrong shape, or line numbers
    outside the file) is a miss: the file is sliced again and the entry rewritten.
    """

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def _path(self, key: str) -> Path:
        return self.folder / key[:2] / f"{key}.json"

    def get(self, key: str, line_count: int | None = None, max_bytes: int = MAX_ENTRY_BYTES
            ) -> list[Chunk] | None:
        """The chunks cached under ``key``; None (a miss) for an entry of more than
        ``max_bytes``, or one that is a symlink, a FIFO or not valid for the file."""
        raw = _read_entry(self._path(key), max_bytes)
        if raw is None:
            return None
        try:
            rows = json.loads(raw)
        except (ValueError, RecursionError):
            return None
        if not isinstance(rows, list) or not rows:
            return None
        limit = line_count if line_count is not None else 1 << 62
        chunks = [_chunk(row, limit) for row in rows]
        return None if any(c is None for c in chunks) else chunks  # type: ignore[return-value]

    def put(self, key: str, chunks: list[Chunk]) -> None:
        path = self._path(key)
        rows = [[c.start_line, c.end_line, c.symbol, list(c.defines)] for c in chunks]
        try:
            safefile.replace_file(path, json.dumps(rows, separators=(",", ":")))
        except OSError:
            pass  # a cache that cannot be written only costs speed

    def slice(self, name: str, data: bytes, text: str, line_count: int | None = None,
              key: str = "") -> list[Chunk]:
        """``line_count``: ``len(split_lines(text))``, and ``key``:
        ``chunking.content_key(name, data)``, when the caller has them already."""
        key = key or chunking.content_key(name, data)
        if line_count is None:
            line_count = len(chunking.split_lines(text))
        chunks = self.get(key, line_count or 1, entry_cap(len(data)))
        if chunks is None:
            chunks = chunking.chunk_text(name, data, text)
            self.put(key, chunks)
        return chunks
