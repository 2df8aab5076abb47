"""Numbers of the word index that do not change once made, kept in a file the process maps
rather than in its own memory (issue 30: a worker within 64 MB).

The three-letter pieces (``pieces.py``: 13 MiB for a sympy with its images) and the
postings packed when a build ends (``word_index._Tree.packs``: 24 MiB for ten copies of
sympy) are read a few kilobytes a query: the pieces of a term's rarest three letters, the
postings of the words that hold it. ``MapOut`` writes such arrays one after another into
a file that has no name (``O_TMPFILE``, or a name removed at once), a step at a time within
a build's windows, maps it read-only and gives each array back as a view of the mapping;
``Appender`` writes numbers as they are made (the pieces, a range of slots at a time) and
maps them once they are all written. The process's resident memory then holds
only the pages its queries read; the rest is the kernel's page cache, which it may drop
and read again from the disk when memory is short. Nothing else can open the file by a
name, so no other process can cut it short under the mapping, and it is gone with the
process.

The file goes in the user's cache folder (``SLM_RERANK_CACHE_DIR``, else the platform's
user cache folder; ``mapped/`` in it), not in the system's temporary folder, which is
often memory itself (``tmpfs``). A repository's own config cannot name it. When the file
cannot be made, written or mapped (no folder, a full disk, a file system without it), the
arrays stay in memory, as before, and ``warm status`` says why (``word_index.summary``).
"""

from __future__ import annotations

import contextlib
import mmap
import os
import time
import weakref
from array import array
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TypeAlias

from slm_rerank.plugin_kit import on_over_budget, resident_file_bytes

#: numbers as an array, or as a view of a mapped file (``map_out``)
Numbers: TypeAlias = "array[int] | memoryview"
#: an array smaller than this stays in memory (a page or two of it would be read anyway)
MAP_FROM = 256 << 10
#: where the files go; None: the user's cache folder (tests set it)
FOLDER: Path | None = None
_APP = "slm-rerank"


def folder() -> Path:
    """The folder the mapped files go in (``mapped/`` in the user's cache folder)."""
    if FOLDER is not None:
        return FOLDER
    named = os.environ.get("SLM_RERANK_CACHE_DIR")
    if named:
        return Path(named).expanduser() / "mapped"
    from platformdirs import user_cache_path

    return user_cache_path(_APP) / "mapped"


def _nameless(where: Path) -> int:
    """A new file in ``where`` that no name leads to, open for reading and writing."""
    where.mkdir(mode=0o700, parents=True, exist_ok=True)
    flags = os.O_RDWR | getattr(os, "O_CLOEXEC", 0)
    tmpfile = getattr(os, "O_TMPFILE", 0)
    if tmpfile:
        try:
            return os.open(where, flags | tmpfile, 0o600)
        except OSError:
            pass  # a file system without it: a name of its own, removed at once
    import tempfile

    fd, name = tempfile.mkstemp(prefix=".words-", dir=where)
    try:
        os.unlink(name)
    except OSError:
        os.close(fd)
        raise
    return fd


#: bytes a write: a larger one lets the kernel keep them in the page cache as one large
#: folio (2 MiB on Linux 6 and ext4), which a read through the mapping then maps whole,
#: counted in the process's resident memory; these are mapped 64 KiB around a read
_WRITE_BYTES = 64 << 10
#: bytes a read of ``Appender.read_back``
_READ_BYTES = 1 << 20


def no_file(exc: OSError) -> str:
    """Why numbers stay in memory: no file could be made for them."""
    return f"no file for it in {folder()} ({exc.strerror or exc})"


def unwritten(exc: OSError) -> str:
    """Why numbers stay in memory: their file could not be written or mapped."""
    return f"could not write and map it in {folder()} ({exc.strerror or exc})"


def _mapped(fd: int, size: int) -> memoryview:
    """The file open as ``fd``, of ``size`` bytes, mapped read-only, as numbers."""
    if os.fstat(fd).st_size != size:
        raise ValueError("the file it was written to is not the size written")
    mapping = mmap.mmap(fd, size, access=mmap.ACCESS_READ)
    if hasattr(mmap, "MADV_RANDOM"):  # a page read brings no others in from the disk
        with contextlib.suppress(OSError):  # a hint: the mapping is as good without it
            mapping.madvise(mmap.MADV_RANDOM)
    _MAPPINGS.add(mapping)
    return memoryview(mapping).cast("I")


#: every mapping made, while it is in use
_MAPPINGS: weakref.WeakSet[mmap.mmap] = weakref.WeakSet()


def let_go_of_pages() -> int:
    """Take the pages of every mapped file out of this process's resident memory
    (``MADV_DONTNEED``; the worker over its memory budget, ``plugin_kit.on_over_budget``):
    they stay in the kernel's page cache, and a later read maps its page again. The bytes
    of the mappings it was done for."""
    done = 0
    if not hasattr(mmap, "MADV_DONTNEED"):
        return 0
    for mapping in list(_MAPPINGS):
        with contextlib.suppress(OSError, ValueError):  # closed meanwhile, or refused
            mapping.madvise(mmap.MADV_DONTNEED)
            done += len(mapping)
    return done


class PagesRead:
    """A long read of mapped arrays (a query's count over the postings of a thousand words)
    that lets go of their pages (``let_go_of_pages``) each time it has brought ``limit``
    bytes of them into the process: the kernel maps a page and those around it for each
    array read, so the bytes read say little of the pages taken. ``step`` once per array
    or so; the pages are looked at (``resident_file_bytes``) every ``every`` steps."""

    def __init__(self, limit: int, every: int = 64) -> None:
        self.limit, self.every = limit, every
        self.steps = 0
        self.start = resident_file_bytes()

    def step(self) -> None:
        self.steps += 1
        if self.steps % self.every or self.start is None:
            return
        now = resident_file_bytes()
        if now is not None and now - self.start > self.limit:
            let_go_of_pages()
            self.start = resident_file_bytes()


class Appender:
    """Numbers written to a file with no name as they are made, then mapped read-only
    (``finish``): a build that makes them a part at a time never holds them all. Each
    call raises ``OSError`` when the file cannot be made, written or mapped; its file is
    closed once mapped, or when it is dropped."""

    def __init__(self) -> None:
        self.fd = _nameless(folder())
        self._closer = weakref.finalize(self, os.close, self.fd)
        self.size = 0

    def write(self, data: memoryview) -> int:
        """One write of the first bytes of ``data`` (``_WRITE_BYTES`` at most): how many."""
        written = os.write(self.fd, data[:_WRITE_BYTES])
        if not written:
            raise OSError(0, "a write wrote nothing")
        self.size += written
        return written

    def append(self, numbers: array[int]) -> None:
        data = memoryview(numbers).cast("B")
        while data:
            data = data[self.write(data):]

    def finish(self) -> memoryview:
        """The numbers written, mapped; its file closed (left open when the map fails, for
        ``read_back``: ``close`` it, or drop it)."""
        try:
            view = _mapped(self.fd, self.size)
        except ValueError as exc:
            raise OSError(0, str(exc)) from exc
        self._closer()
        return view

    def read_back(self) -> array[int]:
        """The numbers written whole so far, read back into memory (a later write, or the
        map, failed, and what was written is not to be lost)."""
        data = bytearray()
        whole = self.size - self.size % 4
        while len(data) < whole:
            got = os.pread(self.fd, min(whole - len(data), _READ_BYTES), len(data))
            if not got:
                raise OSError(0, "the file it was written to is shorter than what was written")
            data += got
        numbers = array("I")
        numbers.frombytes(data)
        return numbers

    def close(self) -> None:
        """Close its file, unmapped (a write failed); ``finish`` closes it too."""
        self._closer()


#: what ``MapOut`` brings in of the pages of the mapped parts it copies before it lets go
COPY_PAGES_MAX = 1 << 20


class MapOut:
    """``parts`` (arrays or views of type code ``I``, which must not change meanwhile)
    written one after another to a file with no name (an ``Appender``) over as many
    ``step``s as it takes, then mapped read-only (``step`` gives each part as a view of
    the mapping, in order), or why they could not be (they are then left as they are).
    Its file is closed when it is done, or when it is dropped unfinished.

    A part that is a view of another mapped file (all the blocks put in one new file, once
    ``word_index.MAX_MAPPED`` files hold them) is read through its mapping: its pages are
    let go every ``COPY_PAGES_MAX`` bytes brought in, or the whole of them (24 MiB for ten
    copies of sympy) came into the process's resident memory at once."""

    def __init__(self, parts: Sequence[Numbers]) -> None:
        if any(getattr(part, "typecode", None) != "I" and getattr(part, "format", None) != "I"
               for part in parts):
            raise ValueError("map_out takes arrays of type code I")
        self.parts = list(parts)
        self.part = 0  # the part being written, and its bytes written
        self.offset = 0
        self.out: Appender | None = None
        self.pages: PagesRead | None = None

    def step(self, by: float, clock: Callable[[], float] = time.monotonic
             ) -> list[memoryview] | str | None:
        """Write until ``by`` (on ``clock``; 64 KiB at least); the views once all is
        written and mapped, why not when it failed, None while it goes on."""
        out = self.out
        if out is None:
            if not any(self.parts):
                return "nothing to map"
            try:
                out = self.out = Appender()
            except OSError as exc:
                return no_file(exc)
        try:
            while self.part < len(self.parts):
                part = self.parts[self.part]
                data = memoryview(part).cast("B")
                if self.offset < data.nbytes:
                    self.offset += out.write(data[self.offset:])
                    if isinstance(part, memoryview):  # read through a mapping
                        if self.pages is None:
                            self.pages = PagesRead(COPY_PAGES_MAX, every=16)
                        self.pages.step()
                if self.offset >= data.nbytes:
                    self.part, self.offset = self.part + 1, 0
                if self.part < len(self.parts) and clock() > by:
                    return None
            whole = out.finish()
        except OSError as exc:
            out.close()
            return unwritten(exc)
        views = []
        at = 0
        for part in self.parts:
            views.append(whole[at:at + len(part)])
            at += len(part)
        self.parts = []
        return views


def map_out(parts: Sequence[Numbers]) -> list[memoryview] | str:
    """``MapOut(parts)`` to its end, with no deadline (tests, and small parts)."""
    job = MapOut(parts)
    while True:
        done = job.step(float("inf"))
        if done is not None:
            return done


on_over_budget(let_go_of_pages)
