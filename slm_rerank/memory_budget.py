"""The warm process's worker held near a memory budget once a command is answered (issue 30:
a worker within 64 MB).

The worker keeps what makes the next command fast: the chunk memory and what the ranking
worked out of its files (``lexical/chunk_memory.py``), and a word index for each tree it
searched (the ripgrep plugin). On a small repository all of it fits in the budget; on a
large one the index alone takes most of it. So after each command, once its answer went
out and its idle work ran, the worker reads its resident size (``keep_within``). Over
``BUDGET_BYTES``, it lets go, in this order, of:

1. the pages of the files it maps (the index's packed postings and pieces, ``releasers``
   that plugins register with ``on_over_budget``): the kernel keeps them in its page cache,
   so the next query that reads one maps it again at the cost of a minor fault;
2. the files of the chunk memory used longest ago, and the memo's entries likewise, down to
   ``KEEP_CHUNK_BYTES`` and ``KEEP_MEMO_BYTES`` (estimated) however little the worker is
   still over: most of one query's files, so a query asked again stays mostly warm; the
   memo's entries for files no longer kept go first.
   From then on they keep no more than that: while a query reads new files, those it
   read before are let go as it goes, not held until it ends (a query's peak);
3. the free pages of the C heap (glibc's ``malloc_trim``), which is what turns what was let
   go into memory the system has back.

Each step is taken only while the worker is still over the budget after the one before.
The budget is a constant: no setting, and so no repository's config, raises it.

``fix_heap_thresholds`` makes glibc give every block over ``MMAP_THRESHOLD`` its own mapping,
returned to the system when freed: by default glibc raises that threshold to the size of
the largest block freed (up to 32 MiB), after which a build's large arrays, grown and freed
again and again, are carved out of the heap and leave it full of holes it keeps.
"""

from __future__ import annotations

import ctypes
import functools
import gc
import os
import time
from collections.abc import Callable
from dataclasses import dataclass

from slm_rerank.lexical import chunk_memory

#: resident bytes the worker keeps to once a command is answered: 64 MB (61 MiB) less the
#: room a query takes while it runs (about 6 MiB on sympy)
BUDGET_BYTES = 54 << 20
#: what the chunk memory and the memo keep at least (estimated; a query on sympy keeps 3-5
#: MiB of files in the chunk memory and a third of a MiB in the memo). They matter on a
#: large tree only, whose index takes most of the budget: there each MiB kept is a MiB of
#: every query's peak, and 3 MiB still holds most of a query's files
KEEP_CHUNK_BYTES = 3 << 20
KEEP_MEMO_BYTES = 1 << 20
#: a block of this many bytes or more gets a mapping of its own (``fix_heap_thresholds``)
MMAP_THRESHOLD = 128 << 10
#: mallopt's parameter number for it (malloc.h)
_M_MMAP_THRESHOLD = -3

#: what a plugin lets go of when the worker is over budget: the bytes it let go of (for
#: pages of mapped files, the bytes of the mappings whose pages it took out)
Releaser = Callable[[], int]
_releasers: list[Releaser] = []


@dataclass
class Kept:
    """What ``keep_within`` did: the resident bytes it found and left, and what it let go."""

    found: int
    left: int
    #: what it let go of, in the order it did (empty: the worker was within its budget)
    steps: list[str]


def on_over_budget(release: Releaser) -> None:
    """Have ``release()`` called when the worker is over its budget (once per callable)."""
    if release not in _releasers:
        _releasers.append(release)


def _statm(pid: int | str, field: int) -> int | None:
    """Bytes of one field of ``/proc/PID/statm``; None where it cannot be read."""
    try:
        with open(f"/proc/{pid}/statm", "rb") as statm:
            return int(statm.read().split()[field]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return None


def resident_bytes(pid: int | str = "self") -> int:
    """A process's resident size (``/proc/PID/statm``; this process's by default); 0 where
    it cannot be read."""
    return _statm(pid, 1) or 0


def resident_file_bytes() -> int | None:
    """The bytes of the files this process maps that are in its resident memory, with its
    shared memory (``statm``'s third field); None where it cannot be read."""
    return _statm("self", 2)


@functools.cache
def _libc() -> ctypes.CDLL | None:
    try:
        libc = ctypes.CDLL(None)
        libc.malloc_trim  # noqa: B018 - glibc's, or this is not glibc
        libc.mallopt  # noqa: B018
    except (AttributeError, OSError):
        return None
    return libc


def give_back() -> bool:
    """Hand the C heap's free pages back to the system (glibc's ``malloc_trim``); whether it
    could be asked (not on other C libraries)."""
    libc = _libc()
    if libc is None:
        return False
    libc.malloc_trim(0)
    return True


def fix_heap_thresholds() -> bool:
    """Give every C block over ``MMAP_THRESHOLD`` a mapping of its own, for the rest of this
    process and its forks (the warm process: never a process that calls the Python API,
    whose heap is its own); whether glibc took it."""
    libc = _libc()
    return libc is not None and bool(libc.mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD))


def _released(release: Releaser) -> int:
    """What ``release()`` let go of; a plugin's releaser that fails lets go of nothing (the
    worker goes on as it was)."""
    try:
        return max(0, int(release()))
    except Exception:  # noqa: BLE001 - memory it could not give back is simply still held
        return 0


def keep_within(by: float, budget: int = BUDGET_BYTES,
                resident: Callable[[], int] = resident_bytes) -> Kept:
    """Let go of what the worker keeps until its resident size is within ``budget``, one step
    at a time (the module's docstring), none started after ``by`` (``time.monotonic``)."""
    found = resident()
    kept = Kept(found, found, [])
    if not found or found <= budget or time.monotonic() >= by:
        return kept

    def over() -> int:
        kept.left = resident()
        return kept.left - budget if time.monotonic() < by else 0

    mapped = sum(map(_released, list(_releasers)))
    if mapped:
        kept.steps.append(f"the pages of {mapped >> 10:,} KiB of mapped files")
    excess = over()
    if excess > 0:
        # down to their floors, and no more from now on: a query's new files then push the
        # old ones out as it reads them, rather than adding to them at its peak
        files = chunk_memory.CHUNK_MEMORY.cap(KEEP_CHUNK_BYTES)
        memo = chunk_memory.SLICED_MEMO.cap(KEEP_MEMO_BYTES)
        if files or memo:
            gc.collect(0)  # a file's text is freed with its entry; this frees what cycles hold
            kept.steps.append(f"{files >> 10:,} KiB of chunk memory, {memo >> 10:,} KiB of "
                              f"memo (estimated)")
        if time.monotonic() < by and give_back():
            kept.steps.append("the C heap's free pages")
        over()
    return kept
