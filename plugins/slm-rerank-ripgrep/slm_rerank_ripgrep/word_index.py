"""A word index of a tree, kept by a long-lived process, that answers rg's matching pass
(``rg -o -i -F`` with the query's terms) without running it (issue 30).

On sympy that pass is most of a warm search: about 100 ms of rg reading 24 MB, every
query, for files that did not change. The warm process's worker keeps, per tree, every
distinct word of every searched file with the files it occurs in and how often; a query
then finds the words that hold its terms and adds up their counts.

**Exactly rg's answer, or none.** Every term is a run of ``[a-z0-9_]`` (a query with any
other character is left to rg), and rg's ``-i`` matches those characters, under Unicode's
simple case folding, only in ``A-Z a-z 0-9 _``, ``ſ`` (``s``) and the Kelvin sign (``k``).
A word is a maximal run of those, so no match crosses a word's edge, and rg's matches in a
file are the matches in each of its words: found here with Python's ``re`` (leftmost
first, the terms longest first, as ``order_for_search`` gives them to rg), or ``str.count``
for a word that holds one term only, and counted for every term the matched text holds, as
``count_grouped_terms`` counts what rg prints. Every word's case-folded spelling is a line
of one text; the words that hold a term are the lines of its rarest three letters that hold
it (``pieces.py``, built after the index) and the lines joined since, found by a
``str.find`` that goes on from the next line at each hit (``_Tree.spellings``); they are
kept for the last ``MAX_HELD_TERMS`` terms.
What rg does that is not modelled makes the index decline the whole query, and rg runs:
a file holding a NUL byte past its first ``BINARY_PROBE`` bytes (rg stops at the buffer
holding the NUL, so what it printed depends on its buffer size; a NUL in its first buffer
means it prints nothing but the matches of a first line ending in the three bytes it reads
first, which is modelled: ``_before_nul``), a UTF-16 byte-order mark (rg transcodes), a file
that is not a regular file, or is over ``MAX_FILE_BYTES`` but within the query's
``max_filesize``, and more changed files than a query may read again.
``tests/test_word_index.py`` holds it to rg's answer on generated trees.

**Freshness.** Each query takes rg's listing of the tree (``rg --files``, so ignore rules are
rg's own: run again unless nothing it depends on changed since the last one, ``listing.py``)
and ``lstat``s every listed file. A file is taken on its stamp (device, inode, mode, size,
modification and change times) only when those times are older than ``RACY_SECONDS`` before
its content was read, as the chunk memory does (``slm_rerank/lexical/chunk_memory.py``);
any other file is read again (and its words replaced when its bytes changed). Where the
kernel reports every change (Linux, a local file system: ``watch.py``), a query whose
watch reported nothing since a check that found every file unchanged and settled takes
that check's result instead of ``lstat``-ing each file again.

**Bounds.** Constants, not settings, so a repository's config cannot size the memory: at
most ``MAX_TREES`` trees, ``MAX_FILES`` files each and ``MAX_INDEX_BYTES`` (estimated) in
all, a file read whole only up to ``MAX_FILE_BYTES``. Building happens only as idle work,
after a search was answered (``plugin_kit.when_idle``): in the warm process's worker, for
at most ``BUILD_SECONDS`` at a time; in the MCP server or a process calling the Python API
again, in its background thread's windows of a few tens of ms (``Build`` goes on from the
file where its last window stopped). A tree is finished over several idle moments if it
needs them.

**Threads.** The index is read and changed (a query reads changed files again) under
``LOCK``: a query that finds it held (another thread's query, a build's window) leaves
the matching to rg, and a build window that finds it held does nothing this time.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import stat
import struct
import threading
import time
from array import array
from bisect import bisect_right
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from itertools import accumulate, compress
from pathlib import Path

from slm_rerank.plugin_kit import Unfinished, blake2b, give_back
from slm_rerank_ripgrep import mapped
from slm_rerank_ripgrep.listing import Listing
from slm_rerank_ripgrep.mapped import Numbers
from slm_rerank_ripgrep.pieces import PieceBuild, Pieces
from slm_rerank_ripgrep.watch import Watch, folder_of
from slm_rerank_ripgrep.word_ids import WordIds

#: trees kept, the files of one, and its estimated size
MAX_TREES = 2
MAX_FILES = 20_000
MAX_INDEX_BYTES = 96 << 20
#: a file over this is not indexed (a query whose max_filesize reaches it goes to rg)
MAX_FILE_BYTES = 4 << 20
#: a NUL byte this early is in the first buffer rg reads (64 KiB, one read of a regular
#: file; a FITS file's header is text for 20-40 KiB, then binary): rg prints nothing for
#: the file. 4 KiB short of it, for a byte-order mark rg drops and any slack in the read
BINARY_PROBE = 60 << 10
#: a file changed less than this long before it was read is read again by the next query
RACY_SECONDS = 60
_RACY_NS = RACY_SECONDS * 1_000_000_000
#: at most this many files (and bytes) a query reads again; more, and rg answers it
REREAD_FILES = 64
REREAD_BYTES = 8 << 20
#: terms whose folded words are kept between queries (per tree)
MAX_HELD_TERMS = 256
#: one idle build's time; a tree left unfinished is continued after the next search
BUILD_SECONDS = 5.0
#: a tree found beyond the bounds is not tried again for this long; trees remembered so
REFUSED_SECONDS = 600.0
MAX_REFUSED = 16

#: terms the index can answer for
_PLAIN_TERM = re.compile(r"[a-z0-9_]+")
#: what -i matches of those outside ASCII: the long s and the Kelvin sign, in UTF-8
_FOLDING_BYTES = (b"\xc5\xbf", b"\xe2\x84\xaa")
_WORD = re.compile(rb"(?:[A-Za-z0-9_]|\xc5\xbf|\xe2\x84\xaa)+")
_NOT_WORD = bytes(b if (48 <= b <= 57 or 65 <= b <= 90 or 97 <= b <= 122 or b == 95) else 32
                  for b in range(256))
#: a byte that no word holds, so no word goes on past it: any but a word's letters and the
#: bytes of the long s and the Kelvin sign (a non-breaking space or CJK text is one)
_WORD_EDGE = re.compile(rb"[^A-Za-z0-9_\xc5\xbf\xe2\x84\xaa]")
#: the bytes of a file whose words are split and counted at once (``word_parts``)
WORDS_SLICE = 64 << 10
#: different words a part of a file holds before it is posted (``word_parts``): about 2 MiB
PART_WORDS = 16_384
_UTF16_MARKS = (b"\xff\xfe", b"\xfe\xff")
_DIR_FLAGS = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_CLOEXEC", 0)
#: what ``Prepared.seen`` holds for a file over the query's max_filesize
_TOO_BIG = "over max_filesize"
_OPEN_FLAGS = (os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOFOLLOW", 0)
               | getattr(os, "O_CLOEXEC", 0))
#: bytes an entry is estimated to hold, as tracemalloc measures the index of a tree once
#: searched: a word (its first posting, ``starts`` entry, line end and the ids ``holding``
#: may keep of it; and each of its bytes, in its line: a hash or encoded data makes words
#: hundreds of bytes long; ``ids`` is counted by its own size), one not ASCII (its ``odd``
#: and ``odd_ids`` slots and its bytes object, whose bytes count as letters again), a
#: posting in ``more`` (one unsigned int with the array's slack; the second of 255
#: occurrences or more is counted apart, ``big_counts``) and a word's own array there
#: (with its slot, and its id, an int object only ``more`` keeps), a file (its record and
#: stamp, its entries in the last check and listing; and each byte of its path once: the
#: kept listing and the last check hold the strings of ``files``, and rg's output is not
#: kept; deep trees have paths of 200 bytes)
_WORD_BYTES = 32
_ODD_BYTES = 200
_POSTING_BYTES = 5
_MORE_BYTES = 160
_FILE_BYTES = 660
#: a posting in ``more``: its occurrences in its low bits, up to one less than
#: ``_BIG_COUNT`` (which says they are in the next number); its file id in the others, so
#: a tree is started again before its file ids need more (``_build``)
_COUNT_BITS = 8
_BIG_COUNT = (1 << _COUNT_BITS) - 1
MAX_FILE_IDS = 1 << (32 - _COUNT_BITS)
#: word ids a block of packed postings is for (``_Tree.pack``), and the arrays ``more``
#: (a query's reads of changed files post there) holds before a build's end packs them
PACK_WORDS = 4096
PACK_FROM = 256
#: a build posts into ``pending`` (two numbers a posting, no array a word: ``more`` held
#: 36 MiB of arrays for ten copies of sympy before each pack) and packs it on its way once
#: it holds this many postings and half as many as the blocks do (so a pack, which copies
#: every posting of the blocks it remakes, is not made once a file: three copies at most)
PENDING_FROM = 1 << 16
#: ...and at this many postings at most (2 MiB of ``pending``, and 1 more while a pack
#: puts them in order): the blocks are in a file the process maps (``_pack``), so
#: ``pending`` is most of what a build holds. A quarter of what it once was (issue 30: ten
#: copies of sympy take 26-27 packs, not 17, and 0.7-1.6 s more in a build of 15-16 s; the
#: build's peak is 2-3 MiB lower, which a query arriving during the build stacks on)
PENDING_MAX = 1 << 18
#: numbers a build's pack gathers of a block before it writes them to the block's file
#: (``_Tree._merged``): a block is not held whole (256 KiB)
WRITE_NUMBERS = 1 << 16
#: the bytes of mapped blocks a pack reads, or of mapped pages a query's count brings in,
#: before they let go of those pages (each such MiB is a MiB of a query's peak)
READ_PAGES_MAX = 1 << 20
#: set on a ``pending`` number that is a posting's second (its occurrences), not a word id
_SECOND = 1 << 31
#: the ids ``holding`` keeps, at most this many a word (4 bytes each; counted in a word's)
_HELD_PER_WORD = 2
#: spellings gathered before they are joined into ``text`` (a query reads them one by one)
_TAIL_LINES = 4096
#: the words a tree has before its spellings' three-letter pieces are kept (``pieces.py``)
PIECES_FROM = 4096
#: files of packed postings mapped at most (``_Tree.map_out``; the pieces have their own)
MAX_MAPPED = 4

#: a file's version as ``fstat`` gives it (device, inode, mode, size, and the modification
#: and change times, each as seconds and nanoseconds: a time in ns passes 64 bits after
#: 2262), packed: 88 bytes a file where a tuple of six ints takes 290 (4 MiB for 20,000)
Stamp = bytes
_STAMP = struct.Struct("<QQIQqIqI")
_NS = 1_000_000_000
#: where a packed stamp holds the size
_SIZE = slice(20, 28)
#: a block (or its word starts) while a pack writes it to a file, until that is mapped
_NOTHING: Numbers = array("I")


def now_ns() -> int:
    """The wall clock, as the file system stamps times (a name tests replace)."""
    return time.time_ns()


def plain_terms(terms: Iterable[str]) -> bool:
    """Whether the index can answer for these terms (lower-case, as rg is given them)."""
    return all(_PLAIN_TERM.fullmatch(term) for term in terms)


def words_of(data: bytes) -> dict[bytes, int]:
    """word -> occurrences, a word being a maximal run of what a term's letters match,
    its ASCII letters lower-cased (``word_parts``, all of them in one part)."""
    return next(word_parts(data, most=0))


def word_parts(data: bytes, most: int | None = None) -> Iterator[dict[bytes, int]]:
    """The words of ``data`` and their occurrences (``words_of``), as one part, or several
    when it holds more than ``most`` different words (``PART_WORDS`` unless given; 0: no
    bound): each part holds those of its slices, counted until ``most`` or more are held,
    so a word may be in more than one part and its occurrences are the sum of its counts
    there. Encoded data (a 2 MB picture
    in an SVG: 82,233 different words) took 8 MiB as one dict (issue 30). The text is read
    ``WORDS_SLICE`` bytes at a time, each slice ending before a byte no word holds
    (``_WORD_EDGE``), so a file of a few MB never has all its words as objects at once (2
    MiB of short words took 22 MiB so). A part is given up (``del``) before the next is
    counted."""
    if most is None:
        most = PART_WORDS
    counts: dict[bytes, int] = {}
    start, end = 0, len(data)
    while start < end:
        cut = _WORD_EDGE.search(data, start + WORDS_SLICE) if end - start > WORDS_SLICE else None
        stop = cut.start() if cut is not None else end
        part = data[start:stop].lower()  # a whole file's slice is the file, not a copy
        if any(mark in part for mark in _FOLDING_BYTES):
            found = _WORD.findall(part)
        else:
            found = part.translate(_NOT_WORD).split()
        del part
        for word in found:
            counts[word] = counts.get(word, 0) + 1
        del found
        start = stop
        if most and len(counts) >= most and start < end:
            yield counts
            counts = {}
    yield counts


#: ``_File.raw``: its flags (``_STATE``, ``_DIGESTED``, ``_RACY``) and its stamp's length,
#: then the stamp, then ``_TAIL`` (when it was read, its postings, its digest or zeros), then
#: why it could not be read
_HEAD = struct.Struct("<BH")
_TAIL = struct.Struct("<qI16s")
_STATES = ("text", "binary", "unknown", "unreadable")  # "text" is 0: a query's check reads it
_STATE_OF = {state: n for n, state in enumerate(_STATES)}
_STATE, _DIGESTED, _RACY = 3, 4, 8


class _File:
    """One listed file as last read: its version, what it holds for the index. All of it
    but its file id in one ``bytes``: 205 bytes a file, where a dataclass of the same
    fields took 330 (6.2 MiB for ten copies of sympy's 19,570 files). What a query's check
    reads of it are a byte, the stamp and the id (``_RACY``: the stamp's later time was
    within ``RACY_SECONDS`` of ``checked``, which stays so while the stamp is the same)."""

    __slots__ = ("raw", "fid")

    def __init__(self, stamp: Stamp, checked: int, state: str, fid: int = -1,
                 posted: int = 0, digest: bytes = b"", why: str = "") -> None:
        """``checked``: when its content was read (ns, wall clock). ``state``: "text" (its
        words are posted under ``fid``), "binary" (rg prints nothing for it), "unknown"
        (rg's answer for it is not modelled), "unreadable" (``why``). ``posted``: how many
        postings it made (what they hold once it is replaced): one a word, or more for a
        word in more than one of its parts (``word_parts``)."""
        flags = _STATE_OF[state] | (_DIGESTED if digest else 0)
        if _changed_of(stamp) >= checked - _RACY_NS:
            flags |= _RACY
        self.raw = (_HEAD.pack(flags, len(stamp)) + stamp + _TAIL.pack(checked, posted, digest)
                    + why.encode("utf-8", "replace"))
        self.fid = fid

    def _stamp_end(self) -> int:
        raw = self.raw
        return _HEAD.size + raw[1] + (raw[2] << 8)

    def _tail(self) -> tuple[int, int, bytes]:
        return _TAIL.unpack_from(self.raw, self._stamp_end())

    @property
    def stamp(self) -> Stamp:
        return self.raw[_HEAD.size:self._stamp_end()]

    @property
    def checked(self) -> int:
        return self._tail()[0]

    @property
    def state(self) -> str:
        return _STATES[self.raw[0] & _STATE]

    @property
    def posted(self) -> int:
        return self._tail()[1]

    @property
    def digest(self) -> bytes:
        return self._tail()[2] if self.raw[0] & _DIGESTED else b""

    @property
    def why(self) -> str:
        return self.raw[self._stamp_end() + _TAIL.size:].decode("utf-8")

    def unchanged(self, stamp: Stamp) -> bool:
        """Whether the file, now stamped ``stamp``, may be taken as it was read: the same
        stamp, and its later time more than ``RACY_SECONDS`` before its content was read
        (``_fresh``; inline in ``prepare``, the loop of a query's check)."""
        raw = self.raw
        return (not raw[0] & _RACY and raw[1] + (raw[2] << 8) == len(stamp)
                and raw.startswith(stamp, _HEAD.size))

    def __repr__(self) -> str:
        return (f"_File(stamp={self.stamp!r}, checked={self.checked}, state={self.state!r}, "
                f"fid={self.fid}, posted={self.posted}, digest={self.digest!r}, "
                f"why={self.why!r})")


@dataclass
class Answer:
    """What the matching pass would have given: per-file term counts, files it could not read."""

    body_counts: dict[str, dict[str, int]]
    skipped: dict[str, str]
    #: byte sizes of the files in ``body_counts``
    sizes: dict[str, int]


@dataclass
class _MapJob:
    """Blocks and pieces being written to a file to be mapped (``_Tree.map_out``)."""

    writing: mapped.MapOut
    #: (block number, its postings, where its words' postings start)
    blocks: list[tuple[int, Numbers, Numbers]]
    pieces: Pieces | None


@dataclass
class _Tree:
    """One tree's index, laid out for memory (issue 30: a worker within 64 MB): a word is
    one line of ``text`` (its spelling, which ``ids`` finds it by), two numbers of
    ``first`` and, only when more than one file holds it, an array in ``more``.

    A word is what rg -i matches alike: its ASCII letters lower-cased, so ``Path``,
    ``PATH`` and ``path`` are one word with their occurrences summed (the long s and the
    Kelvin sign stay as they are, and such a word is found by its bytes, ``odd_ids``)."""

    root: str
    #: spelling -> its id (word ids count up from 0 as words are first met)
    ids: WordIds = field(default_factory=WordIds)
    #: the words that are not ASCII, by their bytes
    odd_ids: dict[bytes, int] = field(default_factory=dict)
    #: each word's first posting, (file id, occurrences), at 2 * id; the others in ``more``,
    #: one number each: the file id shifted left by ``_COUNT_BITS`` with the occurrences
    #: in those bits, or with ``_BIG_COUNT`` there and the occurrences in the next number
    first: array[int] = field(default_factory=lambda: array("I"))
    more: dict[int, array[int]] = field(default_factory=dict)
    #: the postings of ``more`` as they were when a build ended, moved into one array for
    #: each ``PACK_WORDS`` word ids (``pack``): block k holds those of ids k * PACK_WORDS
    #: on, the postings of the i-th of them at ``packs[k][pack_at[k][i]:pack_at[k][i + 1]]``
    #: (an array, or once a build ended a view of a file the process maps: ``map_out``)
    packs: list[Numbers] = field(default_factory=list)
    pack_at: list[Numbers] = field(default_factory=list)
    #: the numbers in ``packs``
    packed: int = 0
    #: what a build posted since its last pack, in pairs: the word id (with ``_SECOND`` set
    #: for a posting's second number) and the number ``more`` would hold; ``building``
    #: while a build reads files (a query's reads post into ``more``, which it reads)
    pending: array[int] = field(default_factory=lambda: array("I"))
    building: bool = False
    #: each word's case-folded spelling (ASCII: the long s and the Kelvin sign fold to
    #: s and k), a line each in id order: those of ``text`` start at ``starts`` (and one
    #: past the last line), those met since are in ``tail``. ``text`` grows in place
    #: (glibc moves a large block's pages rather than copy them): a ``str`` made anew at
    #: each join held the whole text twice, a build's peak (issue 30)
    text: bytearray = field(default_factory=bytearray)
    starts: array[int] = field(default_factory=lambda: array("I", [0]))
    tail: list[bytes] = field(default_factory=list)
    #: the three-letter pieces of the spellings joined by the last build (``pieces.py``),
    #: and those being built
    pieces: Pieces | None = None
    piece_build: PieceBuild | None = None
    #: its pieces would take it past ``MAX_INDEX_BYTES``: it does without (``index_pieces``)
    pieceless: bool = False
    #: the words that are not ASCII (the long s, the Kelvin sign), by id
    odd: dict[int, bytes] = field(default_factory=dict)
    #: term -> the ids of the words whose spelling holds it (emptied when a word is added)
    holding: dict[str, array[int]] = field(default_factory=dict)
    #: the ids in ``holding``
    held: int = 0
    #: the bytes of the words' lines (twice for a word not ASCII: its bytes are kept too),
    #: and of the paths in ``files``
    letters: int = 0
    named: int = 0
    files: dict[str, _File] = field(default_factory=dict)
    #: by file id: 1 while it is the current version of its file
    live: bytearray = field(default_factory=bytearray)
    postings_count: int = 0
    #: the postings in ``more`` (or packed) that take a second number: 255 occurrences on
    big_counts: int = 0
    dead_postings: int = 0
    #: the files the last build was given (more of them than indexed: a build under way)
    listed: int = 0
    #: the last listing of the tree a query ran (``listing.py``), while it may be reused
    listing: Listing | None = None
    #: its stamps could not be taken (``listing.Unfollowable``): every query lists
    unfollowable: bool = False
    #: the index's clock (ns) before which a walk would find a stamp too recent to keep
    walk_after: int = 0
    #: the kernel's watch on its folders (``watch.py``), once a build finished
    watch: Watch | None = None
    #: the last check of every file, while it found nothing changed and nothing has since
    clean: _Clean | None = None
    #: why its packed postings or pieces are in memory rather than in a mapped file
    unmapped: str = ""
    #: their file being written (``map_out``)
    map_job: _MapJob | None = None
    #: arrays were mapped out and freed: the C heap's free pages are to be handed back
    trim_due: bool = False
    #: its last build's window ended before the build did: what is left (pieces, their
    #: file) is done by the next, which a search the tree answers asks for too
    unfinished: bool = False

    @property
    def words(self) -> int:
        """How many words it holds."""
        return len(self.starts) - 1 + len(self.tail)

    def size(self) -> int:
        """Its estimated bytes: what the bounds are on, so not below what it takes."""
        return (self.words * _WORD_BYTES + self.ids.nbytes() + self.letters
                + self.text.__alloc__() - len(self.text)  # the room it grows into
                + len(self.odd) * _ODD_BYTES
                + self.postings_count * _POSTING_BYTES + len(self.more) * _MORE_BYTES
                + 4 * len(self.pending)
                + 4 * self.big_counts
                + 4 * sum(map(len, self.pack_at))
                + len(self.files) * _FILE_BYTES + self.named
                + (self.pieces.nbytes() if self.pieces is not None else 0)
                + (self.piece_build.nbytes() if self.piece_build is not None else 0))

    def shared(self, paths: Sequence[str]) -> list[str]:
        """``paths``, each as the index's own string where it holds that path: a listing
        kept beside the index then holds no second copy of them (1.7 MiB for ten copies
        of sympy)."""
        own = {rel: rel for rel in self.files}
        return [own.get(rel, rel) for rel in paths]

    def index_pieces(self, by: float, clock: Callable[[], float]) -> bool:
        """Build the three-letter pieces of the spellings joined so far, or go on with
        them, until ``by`` (on ``clock``); whether they are done, still close enough to
        the text, or not worth it (a text this short is read through in microseconds).
        Pieces that would take the tree past ``MAX_INDEX_BYTES`` are not made (a tree of
        long words: they take four bytes a letter): the tree does without them, each term
        not asked before read through the text (``pieceless``)."""
        lines = len(self.starts) - 1
        if self.piece_build is None:
            if lines < PIECES_FROM or self.pieceless or (
                    self.pieces is not None
                    and lines - self.pieces.lines <= max(_TAIL_LINES, lines // 8)):
                return True
            self.piece_build = PieceBuild(self.text, self.starts, to_file=True)
        built = self.piece_build.step(by, clock)
        if built is None and self.piece_build.sized():  # counted: what they would take
            if self.size() > MAX_INDEX_BYTES:
                self.piece_build, self.pieceless = None, True
                return True
            built = self.piece_build.step(by, clock)  # they fit: made
        if built is None:
            return False
        if self.piece_build.unmapped:
            self.unmapped = self.piece_build.unmapped
        self.pieces, self.piece_build = built, None
        return True

    def post(self, counts: dict[bytes, int], fid: int = -1) -> int:
        """Post ``counts`` under file id ``fid``, or a new one (-1): the file id. A file
        posted in parts (``word_parts``) has more than one posting of a word that more
        than one part holds: a query adds their counts up."""
        self.clean = None
        if fid < 0:
            fid = len(self.live)
            self.live.append(1)
        ids, odd_ids, first, more, tail = self.ids, self.odd_ids, self.first, self.more, self.tail
        spelling_of, text, starts = self.spelled, self.text, self.starts
        pending = self.pending if self.building else None
        lines = len(starts) - 1  # neither changes before the loop ends: join() comes after
        added = False
        for word, n in counts.items():
            ascii_word = word.isascii()
            if ascii_word:
                spelling = word  # lower-cased by ``words_of``: its key is its spelling
                wid = ids.get(spelling, text, starts, tail)
            else:
                wid = odd_ids.get(word, -1)
            if wid < 0:
                wid = lines + len(tail)
                self.letters += len(word)
                first.append(fid)
                first.append(n)
                if ascii_word:
                    tail.append(spelling)
                    ids.add(spelling, wid, spelling_of)
                else:
                    tail.append(word.decode("utf-8").casefold().encode("ascii"))
                    self.letters += len(word)  # its bytes, kept as well as its line
                    self.odd[wid] = word
                    odd_ids[word] = wid
                added = True
                continue
            posting = (fid << _COUNT_BITS) | (n if n < _BIG_COUNT else _BIG_COUNT)
            if pending is not None:
                pending.append(wid)
                pending.append(posting)
                if n >= _BIG_COUNT:
                    pending.append(wid | _SECOND)
                    pending.append(n)
                    self.big_counts += 1
                continue
            extra = more.get(wid)
            if extra is None:
                extra = more[wid] = array("I", (posting,))
            else:
                extra.append(posting)
            if n >= _BIG_COUNT:
                extra.append(n)
                self.big_counts += 1
        if added:
            self.holding.clear()
            self.held = 0
            if len(tail) >= _TAIL_LINES:
                self.join()
        self.postings_count += len(counts)
        return fid

    def pack(self) -> None:
        """``_pack``; a tree it fails in (a ``MemoryError``, a file it wrote blocks to that
        cannot be read back) is dropped, not kept with postings it had taken out and not
        put back (``_drop``: rg answers its queries)."""
        try:
            self._pack()
        except BaseException as exc:
            _drop(self.root, f"its index failed ({type(exc).__name__}: {exc})")
            raise

    def _pack(self) -> None:
        """Move the postings of ``more`` and ``pending`` into the blocks of ``packs``: an
        array in ``more`` costs about 150 bytes (the array, its key, its slot) before its
        first posting, 11 MiB for the 76,000 words of ten copies of sympy. A block is made
        again only when it has postings there, one block at a time, each array of ``more``
        dropped as it is copied, ``pending`` dropped once its postings are put in word
        order (a counting sort: 8 bytes a word and 4 a posting while it runs).

        Each block is written to a new file the process maps (``mapped.Appender``) as it
        is made, ``WRITE_NUMBERS`` at a time, so neither a build nor a query that packs
        what a build left holds the blocks it makes in its own memory (24 MiB of them for
        ten copies of sympy, and as much again while a pack made them anew), nor one whole
        block (the first, of the commonest words, is 7.4 MiB there). When they are too few
        to be worth a file, when no file can be made, or one fails, they stay in memory
        (those written already read back, the one being written made again) and
        ``unmapped`` says why."""
        more, packs, pack_at = self.more, self.packs, self.pack_at
        words = self.words
        out = self._pack_file()
        #: the blocks written to ``out``: (block number, where it starts there, its length)
        written: list[tuple[int, int, int]] = []
        blocks = {wid // PACK_WORDS for wid in more}
        waiting = self._pending_by_word()
        if waiting is not None:
            begins, placed = waiting
            blocks.update(k for k in range((words + PACK_WORDS - 1) // PACK_WORDS)
                          if begins[min(words, (k + 1) * PACK_WORDS)] > begins[k * PACK_WORDS])
        while len(packs) < (words + PACK_WORDS - 1) // PACK_WORDS:
            packs.append(array("I"))
            pack_at.append(array("I", [0]))
            blocks.add(len(packs) - 1)
        # a pack reads every mapped block it makes again: their pages, all at once, were
        # the worker's peak
        pages = mapped.PagesRead(READ_PAGES_MAX, every=1)
        for k in sorted(blocks):
            old = packs[k]
            if isinstance(old, memoryview):
                pages.step()  # before the block is read: none is let go under it
            if out is not None:
                start = out.size // 4
                try:
                    tail, at, flushed = self._merged(k, waiting, out, pages)
                    out.append(tail)
                    out.append(at)
                except OSError as exc:
                    self._pack_back(out, written, exc)
                    out = None  # and the block made again, in memory
                else:
                    written.append((k, start, flushed + len(tail)))
                    self._packed(k, flushed + len(tail), _NOTHING, _NOTHING)
                    continue  # in the file, until mapped
            block, at, _ = self._merged(k, waiting, None, pages)
            self._packed(k, len(block), block, at)
        self.more = {}  # emptied: a dict keeps the room it once took, 1 MiB for sympy
        if out is None:
            return
        if not written:
            out.close()
            return
        try:
            whole: Numbers = out.finish()
        except OSError as exc:
            self._pack_back(out, written, exc)
            return
        self._put_back(whole, written)
        self.unmapped = ""
        self.trim_due = True
        mapped.let_go_of_pages()  # the old blocks' pages it read, still mapped for others

    def _merged(self, k: int, waiting: tuple[array[int], array[int]] | None,
                out: mapped.Appender | None, pages: mapped.PagesRead
                ) -> tuple[array[int], array[int], int]:
        """Block ``k`` made again: each of its words' postings in the block, then in
        ``more``, then ``waiting`` (``_pending_by_word``). With ``out``, they are written
        there ``WRITE_NUMBERS`` at a time (``OSError`` when that fails); what is left to
        write, where each word's postings start (counted from the block's first number) and
        how many numbers were written."""
        old, old_at = self.packs[k], self.pack_at[k]
        # copied as bytes: a mapped block's items would be made objects one by one
        old_bytes, width = memoryview(old).cast("B"), old.itemsize
        more = self.more
        base = k * PACK_WORDS
        begins, placed = waiting if waiting is not None else (_NOTHING, _NOTHING)
        block, at = array("I"), array("I", [0])
        flushed = 0
        for i in range(min(PACK_WORDS, self.words - base)):
            if i + 1 < len(old_at):
                block.frombytes(old_bytes[width * old_at[i]:width * old_at[i + 1]])
            extra = more.get(base + i)
            if extra is not None:
                block.extend(extra)
            if placed:
                block.extend(placed[begins[base + i]:begins[base + i + 1]])
            at.append(flushed + len(block))
            if out is not None and len(block) >= WRITE_NUMBERS:
                out.append(block)
                flushed += len(block)
                block = array("I")
                pages.step()  # the old block's pages read so far
        return block, at, flushed

    def _packed(self, k: int, numbers: int, block: Numbers, at: Numbers) -> None:
        """Block ``k`` made again, of ``numbers`` numbers: ``block`` and ``at`` (or
        ``_NOTHING`` while they are in a file, until it is mapped); its words' arrays in
        ``more`` dropped."""
        self.packed += numbers - len(self.packs[k])
        self.packs[k], self.pack_at[k] = block, at
        if self.more:  # (a build posts into ``pending``: none there)
            base = k * PACK_WORDS
            for wid in range(base, base + PACK_WORDS):
                self.more.pop(wid, None)

    def _pack_file(self) -> mapped.Appender | None:
        """A file for the blocks a build's pack makes; None when they would be too few to
        be worth one, or none can be made (``unmapped`` then says why)."""
        numbers = self.packed + len(self.pending) // 2 + sum(map(len, self.more.values()))
        if 4 * numbers < mapped.MAP_FROM:
            return None
        try:
            return mapped.Appender()
        except OSError as exc:
            self.unmapped = mapped.no_file(exc)
            return None

    def _pack_back(self, out: mapped.Appender, written: list[tuple[int, int, int]],
                   exc: OSError) -> None:
        """The blocks ``written`` to ``out`` read back into memory: writing or mapping it
        failed (``exc``). A failure to read them back ends the pack (``pack``)."""
        self.unmapped = mapped.unwritten(exc)
        try:
            numbers = out.read_back()
        finally:
            out.close()
        self._put_back(numbers, written)

    def _put_back(self, numbers: Numbers, written: list[tuple[int, int, int]]) -> None:
        """Each block ``written`` (and its word starts, right after it) as a part of
        ``numbers``, what was written."""
        words = self.words
        for k, start, length in written:
            end = start + length + min(PACK_WORDS, words - k * PACK_WORDS) + 1
            self.packs[k] = numbers[start:start + length]
            self.pack_at[k] = numbers[start + length:end]

    def _pending_by_word(self) -> tuple[array[int], array[int]] | None:
        """``pending``'s numbers in word order, the order they came in within a word (a
        second number right after its posting), and where each word's begin (one past
        the last word: their number); ``pending`` emptied. None when it is empty."""
        pending = self.pending
        if not pending:
            return None
        words = self.words
        self.pending = array("I")
        # views, not copies: with the postings put in order, pending is held once (issue 30)
        view = memoryview(pending)
        wids, numbers = view[0::2], view[1::2]
        begins = array("I", [0]) * (words + 1)
        low = _SECOND - 1
        for wid in wids:
            begins[(wid & low) + 1] += 1
        begins = array("I", accumulate(begins))
        fill = array("I", begins)
        placed = array("I", [0]) * len(numbers)  # not from a bytes of as many: made once
        for wid, number in zip(wids, numbers, strict=True):
            wid &= low
            placed[fill[wid]] = number
            fill[wid] += 1
        del wids, numbers
        view.release()
        return begins, placed

    def map_out(self, by: float, clock: Callable[[], float]) -> bool:
        """Put the blocks of ``packs`` made since the last call, and pieces made in memory,
        in a file the process maps (``mapped.py``; all the blocks once ``MAX_MAPPED`` files
        of them are, so that those are let go): what is read of them then takes resident
        memory, not all of them. Written until ``by`` (on ``clock``) and gone on with at the
        next call; whether it is done. When they cannot be mapped, they stay, and ``unmapped``
        says why. A block or pieces made again meanwhile (a query packs) are left to the
        next call."""
        job = self.map_job
        if job is None:
            pieces = self.pieces
            # the new ones in a file of their own; once ``MAX_MAPPED`` files are mapped
            # (a build's packs map theirs too), all of them in one new file, so that those
            # before it, each held for a block or two still read from it (its space, a
            # descriptor), are let go
            again = len({id(part.obj) for part in (*self.packs, *self.pack_at)
                         if isinstance(part, memoryview)}) >= MAX_MAPPED
            numbers = [*self.packs, *self.pack_at, *([pieces.ids] if pieces is not None else [])]
            if not again and sum(len(part) for part in numbers
                                 if isinstance(part, array)) * 4 < mapped.MAP_FROM:
                return True
            blocks = [(k, block, at) for k, (block, at)
                      in enumerate(zip(self.packs, self.pack_at, strict=True))
                      if again or isinstance(block, array) or isinstance(at, array)]
            parts = [part for _, block, at in blocks for part in (block, at)]
            if pieces is not None and isinstance(pieces.ids, array):  # (pieces mapped
                parts.append(pieces.ids)  # stay in their file: they are made anew whole)
            else:
                pieces = None
            if not any(parts):  # the build's packs mapped theirs (``_pack``)
                return True
            job = self.map_job = _MapJob(mapped.MapOut(parts), blocks, pieces)
        views = job.writing.step(by, clock)
        if views is None:
            return False
        self.map_job = None
        if isinstance(views, str):
            self.unmapped = views
            return True
        self.unmapped = ""
        for n, (k, block, at) in enumerate(job.blocks):
            if self.packs[k] is block and self.pack_at[k] is at:
                self.packs[k], self.pack_at[k] = views[2 * n], views[2 * n + 1]
        pieces = job.pieces
        if len(views) > 2 * len(job.blocks) and pieces is not None and self.pieces is pieces:
            self.pieces = Pieces(pieces.lines, pieces.offsets, views[-1])
        self.trim_due = True
        return True

    def postings(self, wid: int) -> tuple[Numbers, ...]:
        """The postings of word ``wid`` but its first: in its block, in ``more``."""
        k, i = divmod(wid, PACK_WORDS)
        found: tuple[Numbers, ...] = ()
        if k < len(self.packs):
            at = self.pack_at[k]
            if i + 1 < len(at) and at[i + 1] > at[i]:
                found = (self.packs[k][at[i]:at[i + 1]],)
        extra = self.more.get(wid)
        return found if extra is None else (*found, extra)

    def join(self) -> None:
        """Move the spellings met since the last join into ``text``."""
        tail = self.tail
        if not tail:
            return
        at = len(self.text)
        starts = self.starts
        for spelling in tail:
            at += len(spelling) + 1
            starts.append(at)
        text = self.text
        for first in range(0, len(tail), _TAIL_LINES):  # a join takes 80 bytes a line
            text += b"\n".join(tail[first:first + _TAIL_LINES])  # while it runs: a file of
            text.append(10)  # 82,000 new words (an image in an SVG) took 6.5 MiB at once so
        self.tail = []

    def spelled(self, wid: int) -> bytes:
        """The word's case-folded spelling, as ``text`` holds it."""
        starts = self.starts
        if wid + 1 < len(starts):
            return bytes(self.text[starts[wid]:starts[wid + 1] - 1])
        return self.tail[wid + 1 - len(starts)]

    def spelling(self, wid: int) -> str:
        """The word's case-folded spelling."""
        return self.spelled(wid).decode("ascii")

    def retire(self, entry: _File) -> None:
        self.clean = None
        if entry.fid >= 0 and self.live[entry.fid]:
            self.live[entry.fid] = 0
            # its postings stay until a rebuild; counted so the rebuild comes in time
            self.dead_postings += entry.posted

    def read(self, rel: str, root_fd: int, old: _File | None,
             words_out: list[dict[bytes, int]] | None = None) -> _File:
        """Read ``rel`` (under the folder open as ``root_fd``) now and record it: its words
        posted when it changed (and appended to ``words_out``). A file not read before
        (``old`` None) is one more the caller records, under ``rel``."""
        self.clean = None  # the caller records what this returns: the check is stale
        if old is None:
            self.named += len(rel)
        checked = now_ns()
        try:
            fd = os.open(rel, _OPEN_FLAGS, dir_fd=root_fd)
        except OSError as exc:
            state = "unknown" if exc.errno == errno.ELOOP else "unreadable"
            entry = _File(_stamp_of(rel, root_fd), checked, state,
                          why=exc.strerror or str(exc))
            if old is not None:
                self.retire(old)
            return entry
        try:
            st = os.fstat(fd)
            stamp = _stamp(st)
            if not stat.S_ISREG(st.st_mode) or st.st_size > MAX_FILE_BYTES:
                if old is not None:
                    self.retire(old)
                return _File(stamp, checked, "unknown")
            data = _read_all(fd, st.st_size)
        except OSError as exc:
            if old is not None:
                self.retire(old)
            return _File(_stamp_of(rel, root_fd), checked, "unreadable",
                         why=exc.strerror or str(exc))
        finally:
            os.close(fd)
        digest = blake2b(data, digest_size=16).digest()
        if old is not None and old.digest == digest and old.state != "unreadable":
            return _File(stamp, checked, old.state, old.fid, old.posted, digest)
        if old is not None:
            self.retire(old)
        nul = data.find(b"\0")
        if len(data) > MAX_FILE_BYTES or data.startswith(_UTF16_MARKS) or nul >= BINARY_PROBE:
            return _File(stamp, checked, "unknown", digest=digest)
        if nul >= 0:
            data = _before_nul(data, nul)
            if not data:
                return _File(stamp, checked, "binary", digest=digest)
        if len(self.live) >= MAX_FILE_IDS:  # no id left to post it under: rg reads it,
            return _File(stamp, checked, "unknown", digest=digest)  # until a fresh build
        fid = -1
        posted = 0
        for words in word_parts(data):  # a word is its spelling (``_Tree``)
            fid = self.post(words, fid)
            posted += len(words)
            if words_out is not None:
                words_out.append(words)
            del words
        return _File(stamp, checked, "text", fid, posted, digest)

    def spellings(self, term: str) -> array[int]:
        """The ids of the words whose case-folded spelling holds ``term``."""
        found = self.holding.get(term)
        if found is not None:
            return found
        text, starts, pieces = self.text, self.starts, self.pieces
        needle = term.encode("ascii")  # a plain term (``prepare``): every spelling is ASCII
        if pieces is not None and len(term) >= 3:  # by its rarest three letters, then the
            found = pieces.holding(term, text, starts)  # lines joined since, as below
            at = text.find(needle, starts[pieces.lines])
        else:
            found = array("I")
            at = text.find(needle)
        while at >= 0:  # one find a word that holds it: it goes on from the next line
            wid = bisect_right(starts, at) - 1
            found.append(wid)
            at = text.find(needle, starts[wid + 1])
        base = len(starts) - 1
        found.extend(base + i for i, spelling in enumerate(self.tail) if needle in spelling)
        # a term of three letters is in thousands of words: what is kept is bounded by the
        # words as well as by the terms (the estimate counts it in each word's bytes)
        if (len(self.holding) >= MAX_HELD_TERMS
                or self.held + len(found) > _HELD_PER_WORD * self.words):
            self.holding.clear()
            self.held = 0
        self.holding[term] = found
        self.held += len(found)
        return found


def _stamp(st: os.stat_result) -> Stamp:
    fields = (st.st_dev, st.st_ino, st.st_mode, st.st_size, *divmod(st.st_mtime_ns, _NS),
              *divmod(st.st_ctime_ns, _NS))
    try:
        return _STAMP.pack(*fields)
    except struct.error:  # a number past its field (a file id of 128 bits): spelt out,
        return _SPELT + repr(fields).encode()  # longer than any stamp packed


#: what a stamp spelt out starts with
_SPELT = b"\xff" * _STAMP.size


def _stamp_of(rel: str, root_fd: int) -> Stamp:
    try:
        return _stamp(os.lstat(rel, dir_fd=root_fd))
    except OSError:
        return _STAMP.pack(0, 0, 0, 0, -1, 0, -1, 0)


def _spelt_fields(stamp: Stamp) -> tuple[int, ...]:
    """The numbers of a stamp spelt out: (device, inode, mode, size, seconds, ns, seconds,
    ns)."""
    return tuple(int(n) for n in stamp[len(_SPELT) + 1:-1].split(b","))


def _size_of(stamp: Stamp) -> int:
    if len(stamp) == _STAMP.size:
        return int.from_bytes(stamp[_SIZE], "little")
    return _spelt_fields(stamp)[3]


def _changed_of(stamp: Stamp) -> int:
    """The later of the modification and change times a stamp holds (ns)."""
    fields = _STAMP.unpack(stamp) if len(stamp) == _STAMP.size else _spelt_fields(stamp)
    return max(fields[4] * _NS + fields[5], fields[6] * _NS + fields[7])


def _read_all(fd: int, size: int) -> bytes:
    """The file's bytes, up to one past MAX_FILE_BYTES (a file that grew is then declined)."""
    pieces = []
    left = MAX_FILE_BYTES + 1
    while left > 0:
        piece = os.read(fd, min(left, max(size, 1 << 16)))
        if not piece:
            break
        pieces.append(piece)
        left -= len(piece)
    return b"".join(pieces)


def _before_nul(data: bytes, nul: int) -> bytes:
    """What rg searches of a file whose first NUL byte is at ``nul`` (under BINARY_PROBE).

    rg's first read is the three bytes it looks at for a byte-order mark (a UTF-8 one is
    dropped, and the read goes on): the lines that end in them are searched before the
    next read meets the NUL and stops the search. Nothing else is.
    """
    if nul < 3 or data.startswith(b"\xef\xbb\xbf"):
        return b""
    return data[:data.rfind(b"\n", 0, 3) + 1]


def _fresh(entry: _File, st: os.stat_result) -> bool:
    """Whether ``entry`` may be taken for the file ``st`` describes without reading it."""
    return entry.unchanged(_stamp(st))


#: held while the index is read or changed (``prepare`` to ``finish``, a build, ``forget``)
LOCK = threading.Lock()
_TREES: OrderedDict[str, _Tree] = OrderedDict()
#: root -> (why it is not indexed, when that was found; monotonic)
_REFUSED: dict[str, tuple[str, float]] = {}


def _key(root: Path) -> str:
    return os.path.realpath(root)


def indexed(root: Path) -> bool:
    """Whether ``root`` has an index (which may still decline a query)."""
    return _key(root) in _TREES


def tree_of(root: Path) -> _Tree | None:
    """The index of ``root``, if it has one (read with ``LOCK`` held)."""
    return _TREES.get(_key(root))


def wanted(root: Path) -> bool:
    """Whether an idle build for ``root`` would be worth running (not recently refused)."""
    refused = _REFUSED.get(_key(root))
    return refused is None or time.monotonic() - refused[1] > REFUSED_SECONDS


@dataclass
class _Clean:
    """What a check of every file found when it found each unchanged and settled: a query
    whose watch reported nothing since takes it instead of checking again."""

    max_filesize: int
    #: each file as checked (``Prepared.settled``: read, never changed)
    seen: dict[str, _File | str]
    #: the ids of the text files among them
    texts: array[int]
    #: files checked at every query all the same (``Watch``: more than one link, or on
    #: another device than the root)
    exposed: list[str]


def prepare(root: Path, terms: Sequence[str], max_filesize: int) -> Prepared | None:
    """The work that needs no listing, done while rg lists the tree: each indexed file
    checked (read again if it changed) and the terms counted in every file that may be
    listed. ``Prepared.finish`` takes the listing. None: the index cannot answer."""
    key = _key(root)
    tree = _TREES.get(key)
    if tree is None or not plain_terms(terms):
        return None
    if tree.listed - len(tree.files) > REREAD_FILES:
        return None  # half built: more files left than a query may read (``finish``)
    _TREES.move_to_end(key)
    if tree.pending:  # a build's last window left them: what follows reads the blocks
        # packed as the build packs them, to a file mapped: they were once packed in
        # memory, every block they touch made again there (24 MiB for ten copies of sympy)
        tree.pack()
    prepared = Prepared(key, tree, terms, max_filesize)
    try:
        fd = os.open(key, _DIR_FLAGS)
    except OSError:
        return None
    seen = prepared.seen
    texts = array("I")  # the file ids of the text files seen
    settled_texts: array[int] = array("I")  # and of those the clean check saw
    lstat = os.lstat
    armed = False
    try:
        watch, clean = tree.watch, tree.clean
        if clean is not None and (watch is None or clean.max_filesize != max_filesize
                                  or _root_id(fd) != watch.root_id or not watch.quiet()):
            clean = None
        if clean is not None:  # the kernel saw no change since a check that found none
            prepared.settled = clean.seen  # read where it is kept, not copied each query
            settled_texts = clean.texts
            todo: Sequence[str] = clean.exposed
        else:
            tree.clean = None
            if watch is not None:
                watch.quiet()  # what it reported is what this check looks at
                armed = watch.arm(fd, {folder_of(rel) for rel in tree.files})
                if not armed:  # too many folders, or watches refused: its watches let go
                    watch.close()
                    tree.watch = watch = None
            todo = list(tree.files)  # paths only: a list of (path, record) pairs took 1.1
            # MiB for ten copies of sympy, whose files are all exposed (hard links)
        root_dev = watch.root_id[0] if watch is not None else -1
        # the exposed files, for a check that may be kept (``_settled``)
        exposed: list[str] | None = [] if clean is None and armed else None
        changed_any = False
        files = tree.files
        # _fresh, inline: one lstat a file is most of a warm query's own time
        for rel in todo:
            entry = files.get(rel)
            if entry is None:  # an exposed file of the clean check, gone since
                continue
            try:
                st = lstat(rel, dir_fd=fd)
            except OSError as exc:
                changed_any = True
                if exc.errno == errno.ENOENT:  # gone: its words no longer count
                    tree.retire(tree.files.pop(rel))
                    tree.named -= len(rel)
                else:
                    seen[rel] = f"unreadable ({exc.strerror or exc})"
                continue
            if exposed is not None and (st.st_nlink != 1 or st.st_dev != root_dev):
                exposed.append(rel)
            size = st.st_size
            if size > max_filesize:
                seen[rel] = _TOO_BIG  # rg lists it and never searches it
                continue
            # entry.unchanged, inline (a call took 4 ms more for ten copies of sympy)
            stamp, raw = _stamp(st), entry.raw
            if (raw[0] & _RACY or raw[1] + (raw[2] << 8) != len(stamp)
                    or not raw.startswith(stamp, _HEAD.size)):
                if not prepared.spend(size):
                    return None
                changed_any = True
                entry = tree.files[rel] = tree.read(rel, fd, entry)
                raw = entry.raw
            seen[rel] = entry
            if not raw[0] & _STATE:  # "text": its words are posted, under its file id
                texts.append(entry.fid)
        if exposed is not None and not changed_any:
            tree.clean = _settled(max_filesize, seen, texts, exposed)
    finally:
        os.close(fd)
    allowed = bytearray(len(tree.live))
    for fid in settled_texts:
        allowed[fid] = 1
    for fid in texts:
        allowed[fid] = 1
    prepared.by_fid = _count(tree, prepared, allowed)
    # the pages of postings and pieces it read leave the process before the ranking's own
    # memory is taken: 5-13 MiB of them on ten copies of sympy (issue 30); the next read
    # maps them again from the page cache
    mapped.let_go_of_pages()
    return prepared


def _root_id(fd: int) -> tuple[int, int]:
    st = os.fstat(fd)
    return st.st_dev, st.st_ino


def _settled(max_filesize: int, seen: dict[str, _File | str], texts: array[int],
             exposed: list[str]) -> _Clean:
    """A full check's result to take while nothing changes, less the exposed files (each
    query checks those again, and adds what it finds)."""
    if not exposed:  # the query's own, kept as they are: it changes them no more
        return _Clean(max_filesize, seen, texts, [])
    out = set(exposed)
    kept = {rel: entry for rel, entry in seen.items() if rel not in out}
    fids = {entry.fid for rel, entry in seen.items()
            if rel in out and not isinstance(entry, str) and entry.state == "text"}
    return _Clean(max_filesize, kept, array("I", (fid for fid in texts if fid not in fids)),
                  exposed)


class Prepared:
    """A query half answered (``prepare``): what the listing then settles (``finish``)."""

    def __init__(self, key: str, tree: _Tree, terms: Sequence[str], max_filesize: int) -> None:
        self.key = key
        self.tree = tree
        self.terms = list(terms)
        self.max_filesize = max_filesize
        self.matcher = re.compile("|".join(re.escape(term) for term in terms), re.IGNORECASE)
        #: matched text -> the terms it holds
        self.contained: dict[str, tuple[str, ...]] = {}
        #: rel -> its entry, why it could not be checked, or _TOO_BIG: as this query
        #: checked it, else as the clean check it took did (``settled``, shared with it)
        self.seen: dict[str, _File | str] = {}
        self.settled: dict[str, _File | str] = {}
        self.by_fid: dict[int, dict[str, int]] = {}
        self.reread = 0
        self.reread_bytes = 0

    def spend(self, size: int) -> bool:
        """Count one more file read again; False when that is past the bounds."""
        self.reread += 1
        self.reread_bytes += size
        return self.reread <= REREAD_FILES and self.reread_bytes <= REREAD_BYTES

    def found_in(self, word: bytes) -> list[tuple[str, int]]:
        """(term, occurrences) in one word, as rg -o finds and count_grouped_terms counts."""
        per_word: dict[str, int] = {}
        for text in self.matcher.findall(word.decode("utf-8")):
            found = self.contained.get(text)
            if found is None:
                lowered = text.lower()
                found = self.contained[text] = tuple(t for t in self.terms if t in lowered)
            for term in found:
                per_word[term] = per_word.get(term, 0) + 1
        return list(per_word.items())

    def finish(self, files: Sequence[str]) -> Answer | None:
        """The answer for the listed ``files``; None when rg must answer after all."""
        tree = self.tree
        # more listed files not indexed than a query may read (a tree half built between a
        # long-lived process's calls, many files added): rg answers without reading any
        # of them first (each such query read 64 files, in vain, in the MCP server)
        seen_now, settled = self.seen, self.settled
        if self.reread + sum(rel not in seen_now and rel not in settled
                             for rel in files) > REREAD_FILES:
            return None
        counts: dict[str, dict[str, int]] = {}
        skipped: dict[str, str] = {}
        sizes: dict[str, int] = {}
        by_fid = self.by_fid
        fd = -1
        try:
            for rel in files:
                seen = seen_now.get(rel)
                if seen is None:
                    seen = settled.get(rel)
                if seen is None:  # listed, not indexed: a new file
                    if fd < 0:
                        fd = os.open(self.key, _DIR_FLAGS)
                    seen = self._new(rel, fd, counts)
                    if seen is None:
                        return None
                if isinstance(seen, str):
                    if seen is not _TOO_BIG:
                        skipped[rel] = seen
                    continue
                if not seen.raw[0] & _STATE:  # "text" (inline, as the check reads it: a
                    found = by_fid.get(seen.fid)  # property took 8 ms more for ten copies)
                    if found is not None:
                        counts[rel] = found
                        sizes[rel] = _size_of(seen.stamp)
                elif seen.state == "unknown":
                    _drop(self.key, f"rg reads {rel!r} in a way the index does not model")
                    return None
                elif seen.state == "unreadable":
                    skipped[rel] = f"unreadable ({seen.why})"
        except OSError:
            return None
        finally:
            if fd >= 0:
                os.close(fd)
        if tree.size() > MAX_INDEX_BYTES:
            _drop(self.key, "its index outgrew the memory it may take")
        return Answer(counts, skipped, sizes)

    def _new(self, rel: str, fd: int, counts: dict[str, dict[str, int]]) -> _File | str | None:
        try:
            st = os.lstat(rel, dir_fd=fd)
        except OSError as exc:
            return f"unreadable ({exc.strerror or exc})"
        if st.st_size > self.max_filesize:
            return _TOO_BIG
        if not self.spend(st.st_size):
            return None
        words: list[dict[bytes, int]] = []
        entry = self.tree.files[rel] = self.tree.read(rel, fd, None, words)
        if entry.state == "text" and words:
            per_file: dict[str, int] = {}
            for part in words:  # (a part each, ``word_parts``)
                for word, n in part.items():
                    for term, k in self.found_in(word):
                        per_file[term] = per_file.get(term, 0) + n * k
            if per_file:
                self.by_fid[entry.fid] = per_file
        return entry


def _count(tree: _Tree, prepared: Prepared, allowed: bytearray) -> dict[int, dict[str, int]]:
    """file id -> term -> occurrences, for the allowed files.

    One term at a time, in one array of a count per file id, which then goes into the
    files' counts: a dict of the files a term is in took a MiB for a word in 10,000 files,
    and every term's at once were most of a query's peak on ten copies of sympy (issue 30).
    A word holding two terms is read once for each."""
    if not prepared.terms:
        return {}
    held: dict[int, list[str]] = {}  # word id -> the query's terms its spelling holds
    for term in prepared.terms:
        for wid in tree.spellings(term):
            held.setdefault(wid, []).append(term)
    by_term: dict[str, list[tuple[int, int]]] = {}  # term -> (word id, occurrences in it)
    #: a spelling -> what rg finds in an ASCII word spelled so (case variants share it)
    shared: dict[str, list[tuple[str, int]]] = {}
    odd = tree.odd
    for wid, terms in held.items():
        word = odd.get(wid)
        if word is not None:
            # the long s and the Kelvin sign fold to ASCII letters, but their lower case
            # holds no term: the word itself is matched
            items = prepared.found_in(word)
        else:
            # an ASCII word matches as its folded spelling does. A word holding one term
            # only: rg -o finds it where str.count does (leftmost, not overlapping), and
            # the text it matched holds no other term of the query.
            spelling = tree.spelling(wid)
            found_items = shared.get(spelling)
            if found_items is None:
                if len(terms) == 1:
                    found_items = [(terms[0], spelling.count(terms[0]))]
                else:
                    found_items = prepared.found_in(spelling.encode())
                shared[spelling] = found_items
            items = found_items
        for term, k in items:
            by_term.setdefault(term, []).append((wid, k))
    del held, shared
    first = tree.first
    pages = mapped.PagesRead(READ_PAGES_MAX)
    counts: dict[int, dict[str, int]] = {}
    every = range(len(allowed))
    for term, words in by_term.items():
        found = array("q", bytes(8 * len(allowed)))
        for wid, k in words:
            pages.step()  # between two words: none is read from a page let go under it
            found[first[2 * wid]] += first[2 * wid + 1] * k
            for extra in tree.postings(wid):
                postings = iter(extra)
                for posting in postings:
                    n = posting & _BIG_COUNT
                    if n == _BIG_COUNT:
                        n = next(postings)
                    found[posting >> _COUNT_BITS] += n * k
        for fid in compress(every, found):
            if allowed[fid]:
                per_file = counts.get(fid)
                if per_file is None:
                    counts[fid] = {term: found[fid]}
                else:
                    per_file[term] = found[fid]
    return counts


def refuse(root: Path, error: Exception) -> None:
    """The index of ``root`` failed on a query: dropped (rg answers that query and the
    next ones) and not built again for ``REFUSED_SECONDS``; ``warm status`` says why.
    Called with ``LOCK`` held."""
    _drop(_key(root), f"its index failed ({type(error).__name__}: {error})")


def _drop(key: str, why: str) -> None:
    _TREES.pop(key, None)
    _REFUSED.pop(key, None)
    while len(_REFUSED) >= MAX_REFUSED:
        del _REFUSED[next(iter(_REFUSED))]
    _REFUSED[key] = (why, time.monotonic())


def build(root: Path, files: Sequence[str], by: float) -> str:
    """Index (or bring up to date) ``root``'s listed ``files`` until ``by`` (monotonic);
    what is then indexed, in one line (``summary``).

    A tree beyond the bounds is dropped and not tried again for ``REFUSED_SECONDS``; one
    not finished by ``by`` is continued by the next build.
    """
    with LOCK:
        _build(root, files, by)
        return summary()


class Build:
    """The idle task that indexes ``root``'s listed ``files``, over as many windows as it
    needs: each run goes on from the file where the last one stopped (while the tree it
    built into is still the one kept), and says ``Unfinished`` until it reached the end."""

    def __init__(self, root: Path, files: Sequence[str]) -> None:
        self.root = root
        self.files = list(files)
        #: the next file to look at, in the tree built into
        self.at = 0
        self.tree: _Tree | None = None

    def __call__(self, by: float) -> str:
        lock = LOCK
        if not lock.acquire(blocking=False):  # a query of another thread reads the index
            return Unfinished(summary())
        try:
            self.tree, self.at = _build(self.root, self.files, by, self.tree, self.at)
            kept = self.tree or tree_of(self.root)
            if kept is not None:
                kept.unfinished = self.tree is not None
            said = summary()
        finally:
            lock.release()
        return said if self.tree is None else Unfinished(said)


def summary() -> str:
    """The trees indexed and refused, for ``warm status``."""
    parts = [f"{tree.root} ({len(tree.files):,} files, {tree.words:,} words, "
             f"about {tree.size() >> 20} MiB"
             + (f"; kept in memory, not mapped: {tree.unmapped}" if tree.unmapped else "")
             + ")" for tree in _TREES.values()]
    parts += [f"not {root}: {why}" for root, (why, _) in _REFUSED.items()]
    return "; ".join(parts) or "nothing"


def _build(root: Path, files: Sequence[str], by: float, before: _Tree | None = None,
           start: int = 0) -> tuple[_Tree | None, int]:
    """Index ``files`` from ``start`` on, if ``before`` is still the tree kept (else from
    the first) until ``by``: the tree built into and the file to go on from, or (None, 0)
    when nothing is left to do (done, or the tree is not indexed)."""
    key = _key(root)
    if not wanted(root):
        return None, 0
    if len(files) > MAX_FILES:
        _drop(key, f"it lists {len(files):,} files, over {MAX_FILES:,}")
        return None, 0
    tree = _TREES.get(key)
    if (tree is None or tree.dead_postings * 2 > max(tree.postings_count, 1)
            or len(tree.live) >= MAX_FILE_IDS):
        tree = _Tree(key)
        _TREES.pop(key, None)  # replaced, not a tree more
        while len(_TREES) >= MAX_TREES:
            _TREES.popitem(last=False)
        _TREES[key] = tree
    _TREES.move_to_end(key)
    tree.listed = len(files)
    if tree is not before:
        start = 0
    try:
        fd = os.open(key, _DIR_FLAGS)
    except OSError:
        return None, 0
    try:
        for at in range(start, len(files)):
            if (at - start) % 64 == 0 and time.monotonic() > by:
                return tree, at
            rel = files[at]
            entry = tree.files.get(rel)
            if entry is not None:
                try:
                    if _fresh(entry, os.lstat(rel, dir_fd=fd)):
                        continue
                except OSError:
                    continue
            if time.monotonic() > by:  # a read can take a while (a file of MAX_FILE_BYTES)
                return tree, at
            tree.building = True
            try:
                tree.files[rel] = tree.read(rel, fd, entry)
            finally:
                tree.building = False
            if len(tree.pending) >= 2 * min(max(PENDING_FROM, tree.packed // 2), PENDING_MAX):
                tree.pack()  # on the way too: pending takes twice what a block does
            if not _fits(key, tree):
                return None, 0
        tree.join()
        if tree.pending or len(tree.more) >= PACK_FROM:
            tree.pack()
        if tree.watch is None:  # built: from now on the kernel may say nothing changed
            tree.watch = Watch.open(fd)
        pieced = tree.index_pieces(by, time.monotonic)
        if not _fits(key, tree):
            return None, 0
        if not pieced or not tree.map_out(by, time.monotonic):  # the next window goes on
            return tree, len(files)
        if tree.trim_due:  # it may take a while after a large build: in time of its own
            if time.monotonic() > by:
                return tree, len(files)
            tree.trim_due = False
            give_back()
    finally:
        os.close(fd)
    return None, 0


def _fits(key: str, tree: _Tree) -> bool:
    """Whether ``tree`` (kept under ``key``) is within the bound (else it is dropped); the
    bound is on all trees together (a worker over 256 MiB is replaced, and with it
    everything it keeps): the trees searched longest ago make room."""
    if tree.size() > MAX_INDEX_BYTES:
        _drop(key, "its index would outgrow the memory it may take")
        return False
    while len(_TREES) > 1 and sum(t.size() for t in _TREES.values()) > MAX_INDEX_BYTES:
        _TREES.popitem(last=False)
    return True


def _after_fork_in_child() -> None:
    """A fork made while another thread held ``LOCK`` (a build's window, a query) has the
    index half changed and the lock held by a thread it does not have: it starts without.
    A fork's trees have no watch: its inotify queue is the parent's, and what one of them
    read of it the other would never see."""
    global LOCK
    if LOCK.locked():
        _TREES.clear()
        LOCK = threading.Lock()
    for tree in _TREES.values():
        if tree.watch is not None:
            tree.watch.close()
        tree.watch = tree.clean = None
        tree.map_job = None  # its file is the parent's, at the parent's offset
        if tree.piece_build is not None and tree.piece_build.out is not None:
            tree.piece_build = None  # the same: made again from the start if asked for


os.register_at_fork(after_in_child=_after_fork_in_child)


def forget() -> None:
    """Drop every index (tests, and a process that wants its memory back)."""
    with LOCK:
        _TREES.clear()
        _REFUSED.clear()


@contextlib.contextmanager
def set_aside() -> Iterator[None]:
    """Within it, no tree is indexed, so rg answers every query as in a process that keeps
    no index; the trees are back after it (tests and benchmarks: rg's own answer)."""
    kept = dict(_TREES)
    _TREES.clear()
    try:
        yield
    finally:
        _TREES.update(kept)
