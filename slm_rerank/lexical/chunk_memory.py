"""What a long-lived process remembers of the candidate files it sliced: each file's text,
lower-cased text and chunks, kept by the file's identity and version, so a warm query
neither reads nor hashes a file it has already sliced (issue 30).

The on-disk chunk cache (``chunk_cache.py``) is keyed by content and serves every process;
this memory serves one process and is keyed by what ``fstat`` says of the file (device,
inode, type and permissions, size, modification and change times). A stamp alone cannot
prove a file unchanged: two writes within one tick of the file system's clock leave the
same times, and a page written through ``mmap`` updates them only when it is first dirtied.
So an entry is taken on its stamp alone only when the file's times are older than
``RACY_SECONDS`` before the moment its content was last checked (as git treats a "racily
clean" index entry): any later write stamps a later time. A file changed more recently is
read and hashed as before, and its entry reused only when the content hash is the same.

The file is still opened (not only stat'ed) on every lookup: open is what revalidates a
network file system's cached attributes, and it never blocks on a FIFO put in its place.

Bounded by ``MAX_ENTRIES`` and ``MAX_BYTES`` (an estimate that the tests hold above the
memory an entry really takes); a file whose entry alone would pass ``MAX_ENTRY_BYTES`` is
not kept. These are constants: no setting, and so no repository's config, lifts them.
"""

from __future__ import annotations

import os
import stat
import sys
import threading
import time
import weakref
from array import array
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from slm_rerank.lexical.chunk_cache import ChunkCache
from slm_rerank.lexical.chunk_counts import LoweredText
from slm_rerank.lexical.chunking import Chunk, chunk_text, content_key, line_starts
from slm_rerank.lexical.filetypes import size_reason
from slm_rerank.lexical.scores import ChunkKeys, chunk_keys

#: files kept, and the bytes (estimated) their entries may hold in all
MAX_ENTRIES = 4096
MAX_BYTES = 20 * 1024 * 1024
#: a file whose entry would take more than this is read and sliced on every query
MAX_ENTRY_BYTES = 4 * 1024 * 1024
#: a file changed less than this long before its content was checked is checked again
RACY_SECONDS = 60
_RACY_NS = RACY_SECONDS * 1_000_000_000

#: a file's identity and version as fstat gives them:
#: (device, inode, mode, size, mtime ns, ctime ns)
Stamp = tuple[int, int, int, int, int, int]

_OPEN_FLAGS = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)


def now_ns() -> int:
    """The wall clock, as the file system stamps times (a name tests replace)."""
    return time.time_ns()


@dataclass(frozen=True)
class SlicedFile:
    """One candidate file as the ranking uses it: its text, where its lines start, and its
    chunks. Its lower-cased text is made when a query needs it (``lowered``), not kept: it
    would double what a process keeps of each file, for a copy ``str.lower`` makes at
    about 2 GB/s."""

    text: str
    #: where each line of ``text`` starts, then its length (``chunking.line_starts``)
    starts: array[int]
    chunks: list[Chunk]
    #: each chunk's ``scores.chunk_keys``
    keys: list[ChunkKeys]
    #: ``chunking.content_key`` of the bytes it was decoded from
    digest: str

    def lowered(self) -> LoweredText:
        """The text lower-cased, with where its lines start: made anew at each call."""
        return LoweredText.of(self.text, self.starts)


def entry_bytes(sliced: SlicedFile) -> int:
    """An upper estimate of the memory ``sliced`` holds, beyond what a query holds anyway.

    The string and the line starts as they are sized, each chunk with its names and its
    keys; ``tests/lexical/test_chunk_memory.py`` holds it above what tracemalloc measures.
    """
    names = sum(sys.getsizeof(name) + 8 for chunk in sliced.chunks for name in chunk.defines)
    symbols = sum(sys.getsizeof(chunk.symbol) for chunk in sliced.chunks if chunk.symbol)
    # an empty tuple of keys is one shared object, and so is a pair kept twice in a file
    seen: set[int] = set()
    keys = 0
    for pair in sliced.keys:
        if id(pair) not in seen:
            seen.add(id(pair))
            keys += sys.getsizeof(pair) + sum(sys.getsizeof(held) + sum(map(sys.getsizeof, held))
                                              for held in pair if held)
    return (sys.getsizeof(sliced.text) + sys.getsizeof(sliced.starts)
            + 200 * len(sliced.chunks) + names + symbols + keys + 1024)


def text_starts(text: str) -> array[int]:
    """``chunking.line_starts(text)`` as four bytes a line (a text a process keeps is far
    below 4 GiB; eight bytes a line past it)."""
    starts = line_starts(text)
    return array("I" if len(text) < 1 << 32 else "q", starts)


def _shared_keys(chunks: list[Chunk]) -> list[ChunkKeys]:
    """Each chunk's keys, a pair that several chunks have being one object (the methods
    of one class, the many chunks that declare nothing)."""
    kept: dict[ChunkKeys, ChunkKeys] = {}
    return [kept.setdefault(pair, pair) for pair in map(chunk_keys, chunks)]


def slice_data(name: str, data: bytes, cache: ChunkCache | None,
               known: SlicedFile | None = None) -> SlicedFile:
    """``data`` (the file ``name``'s bytes) decoded, lower-cased and chunked: the chunk
    cache's entry when it has one, else sliced now. ``known`` (what memory held for the
    file) is returned as it is when its content hash is ``data``'s."""
    digest = content_key(name, data)
    if known is not None and known.digest == digest:
        return known
    text = data.decode("utf-8", "replace")
    starts = text_starts(text)  # once for both: the cache's check and the scores
    chunks = (cache.slice(name, data, text, len(starts) - 1, key=digest)
              if cache is not None else chunk_text(name, data, text))
    return SlicedFile(text, starts, chunks, _shared_keys(chunks), digest)


@dataclass
class _Entry:
    sliced: SlicedFile
    stamp: Stamp
    #: the wall clock just before the file was opened for the stamp its content matched
    checked_ns: int
    size: int


@dataclass(frozen=True)
class Look:
    """What memory knows of one file, as it is now."""

    #: the file's full path, as memory keys it
    key: bytes
    #: its stamp now, taken before it is read (None: it could not be opened, or is not a
    #: regular file within the limit; the caller's read then says why)
    stamp: Stamp | None
    checked_ns: int
    #: the kept slices, to be used as they are: the stamp is unchanged and old enough
    hit: SlicedFile | None = None
    #: the kept slices, to be used if the file's content hash is the same
    known: SlicedFile | None = None


def _stamp_of(info: os.stat_result) -> Stamp:
    return (info.st_dev, info.st_ino, info.st_mode, info.st_size, info.st_mtime_ns,
            info.st_ctime_ns)


def _stamp(path: bytes, limit: int) -> Stamp | None:
    """The stamp of the regular file at ``path`` if it is at most ``limit`` bytes; None
    otherwise (absent, unreadable, a folder, a FIFO, a device, too big)."""
    try:
        fd = os.open(path, _OPEN_FLAGS)
    except OSError:
        return None
    try:
        info = os.fstat(fd)
    except OSError:
        return None
    finally:
        os.close(fd)
    if not stat.S_ISREG(info.st_mode) or size_reason(info.st_size, limit):
        return None
    return _stamp_of(info)


def _settled(stamp: Stamp, checked_ns: int) -> bool:
    """True when no write after ``checked_ns`` can leave the file's times as they are."""
    return stamp[4] < checked_ns - _RACY_NS and stamp[5] < checked_ns - _RACY_NS


class ChunkMemory:
    """Sliced files by path, kept while their stamp says they are unchanged.

    Thread-safe. ``max_entries`` and ``max_bytes`` default to the module's caps; a smaller
    memory is for tests.
    """

    def __init__(self, max_entries: int = MAX_ENTRIES, max_bytes: int = MAX_BYTES,
                 max_entry_bytes: int = MAX_ENTRY_BYTES) -> None:
        self.max_entries = min(max_entries, MAX_ENTRIES)
        self.max_bytes = min(max_bytes, MAX_BYTES)
        self.max_entry_bytes = min(max_entry_bytes, MAX_ENTRY_BYTES, self.max_bytes)
        self._entries: OrderedDict[bytes, _Entry] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def held_bytes(self) -> int:
        """The estimated bytes of the entries kept."""
        return self._bytes

    def summary(self) -> str:
        """What is kept, in one line (``warm status``)."""
        return (f"{len(self._entries):,} files, about {self._bytes / (1 << 20):.1f} MiB "
                f"(at most {self.max_bytes >> 20} MiB)")

    def look(self, root: Path, rel: str, limit: int) -> Look:
        """What is kept for ``rel`` under ``root``, checked against the file as it is now."""
        key = os.path.join(os.fsencode(root), os.fsencode(rel))
        checked = now_ns()
        stamp = _stamp(key, limit)
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None:
                self._entries.move_to_end(key)
        if stamp is None or entry is None:
            return Look(key, stamp, checked)
        if entry.stamp == stamp and _settled(stamp, entry.checked_ns):
            return Look(key, stamp, checked, hit=entry.sliced)
        return Look(key, stamp, checked, known=entry.sliced)

    def keep(self, look: Look, sliced: SlicedFile) -> None:
        """Remember ``sliced`` as the content of the file ``look`` stamped, before it was
        read (a write after the stamp changes the stamp, or the stamp was not settled)."""
        if look.stamp is None:
            self.forget(look)
            return
        size = entry_bytes(sliced)
        if size > self.max_entry_bytes:
            self.forget(look)
            return
        with self._lock:
            old = self._entries.pop(look.key, None)
            if old is not None:
                self._bytes -= old.size
            self._entries[look.key] = _Entry(sliced, look.stamp, look.checked_ns, size)
            self._bytes += size
            self._fit()

    def forget(self, look: Look) -> None:
        """Drop what is kept for the file ``look`` names (it vanished, or is skipped)."""
        with self._lock:
            old = self._entries.pop(look.key, None)
            if old is not None:
                self._bytes -= old.size

    def cap(self, max_bytes: int) -> int:
        """Keep no more than ``max_bytes`` (estimated) from now on, never more than before,
        and no more now: the files used longest ago are let go down to it (``memory_budget``:
        a worker over its budget); the bytes let go."""
        with self._lock:
            self.max_bytes = min(self.max_bytes, max_bytes)
            self.max_entry_bytes = min(self.max_entry_bytes, self.max_bytes)
            before = self._bytes
            self._fit()
            return before - self._bytes

    def _fit(self) -> None:
        """Drop the files used longest ago while it holds more than it may (lock held)."""
        while self._entries and (len(self._entries) > self.max_entries
                                 or self._bytes > self.max_bytes):
            _, dropped = self._entries.popitem(last=False)
            self._bytes -= dropped.size

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self._bytes = 0


#: the process's memory, shared by every search it runs
CHUNK_MEMORY = ChunkMemory()

#: items kept of the sliced files, over every file, and the bytes (estimated) they take
MAX_MEMO_ENTRIES = 16384
MAX_MEMO_BYTES = 8 * 1024 * 1024

#: what is kept of a sliced file: a literal's ``ChunkCounts`` in its chunks (keyed by the
#: literal), or what a tuple names (a number worked out of its text, its chunks' bounds)
MemoItem = str | tuple[str | int, ...]
MemoValue = TypeVar("MemoValue")


def memo_bytes(item: MemoItem, value: object) -> int:
    """An upper estimate of the memory one entry of ``SlicedMemo`` holds: the item and the
    value (a dict of counts: an int object for each count, the small ones being shared; a
    tuple: what it holds), the key, the weak reference and the memo's own slot."""
    named = sys.getsizeof(item) + (sum(map(sys.getsizeof, item))
                                   if isinstance(item, tuple) else 0)
    held = sys.getsizeof(value)
    if isinstance(value, dict):
        held += 32 * len(value)
    elif isinstance(value, tuple):
        held += sum(map(sys.getsizeof, value))
    return named + held + 256


class SlicedMemo:
    """What the ranking works out of a sliced file alone, kept for the files a warm process
    asks of query after query: each literal's ``ChunkCounts`` (counting a literal scans the
    whole file), where its chunks start and end, a chunk's share of comment lines, the
    file's line count.

    Keyed by the ``SlicedFile`` itself (its identity, held by a weak reference): memory
    gives a file another one when its content changed, so what was worked out of an old
    content is never given for a new one, and a file no longer held has nothing here worth
    keeping. Bounded by ``MAX_MEMO_ENTRIES`` entries and ``MAX_MEMO_BYTES`` (estimated),
    least recently used first out; constants, as the chunk memory's. Thread-safe.
    """

    def __init__(self, max_entries: int = MAX_MEMO_ENTRIES,
                 max_bytes: int = MAX_MEMO_BYTES) -> None:
        self.max_entries = min(max_entries, MAX_MEMO_ENTRIES)
        self.max_bytes = min(max_bytes, MAX_MEMO_BYTES)
        self._entries: OrderedDict[tuple[int, MemoItem],
                                   tuple[weakref.ref[SlicedFile], Any, int]] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def held_bytes(self) -> int:
        """The estimated bytes of the entries kept."""
        return self._bytes

    def get(self, sliced: SlicedFile, item: MemoItem, compute: Callable[[], MemoValue]
            ) -> MemoValue:
        """What ``item`` is in ``sliced``: kept, else ``compute()`` (then kept). The caller
        must not change what it is given."""
        key = (id(sliced), item)
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None and entry[0]() is sliced:
                self._entries.move_to_end(key)
                found: MemoValue = entry[1]
                return found
        value = compute()
        size = memo_bytes(item, value)
        with self._lock:
            old = self._entries.pop(key, None)
            if old is not None:
                self._bytes -= old[2]
            if size <= self.max_bytes:
                self._entries[key] = (weakref.ref(sliced), value, size)
                self._bytes += size
            self._fit()
        return value

    def cap(self, max_bytes: int) -> int:
        """Keep no more than ``max_bytes`` (estimated) from now on, never more than before,
        and no more now: the entries of files no longer held are let go first, then those
        used longest ago (``memory_budget``); the bytes let go."""
        with self._lock:
            self.max_bytes = min(self.max_bytes, max_bytes)
            before = self._bytes
            for key in [key for key, entry in self._entries.items() if entry[0]() is None]:
                if self._bytes <= self.max_bytes:
                    break
                self._bytes -= self._entries.pop(key)[2]
            self._fit()
            return before - self._bytes

    def _fit(self) -> None:
        """Drop the entries used longest ago while it holds more than it may (lock held)."""
        while self._entries and (len(self._entries) > self.max_entries
                                 or self._bytes > self.max_bytes):
            _, dropped = self._entries.popitem(last=False)
            self._bytes -= dropped[2]

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self._bytes = 0


#: what the process's searches keep of the files in ``CHUNK_MEMORY``
SLICED_MEMO = SlicedMemo()
