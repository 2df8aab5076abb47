"""Reads what `rg -o --null` and `git grep -o -z` print: `path NUL match` records, file lists.

Also turns a tool's stderr into the short excerpt an error message carries, and starts the
tools themselves (``start_tool``), recording each live process so that a caller abandoning
a search at its deadline can end them (``kill_tools``).
"""

from __future__ import annotations

import os
import re
import selectors
import subprocess
import threading
from collections import Counter
from collections.abc import Callable, Collection, Iterable, Iterator
from pathlib import Path

#: ripgrep writes these notices to stdout, without a NUL, when it meets a NUL byte in a file
#: it was searching (`binary file matches (...)`, `WARNING: stopped searching binary file
#: after match (...)`). They are not records, and must not be read as the start of a path.
_BINARY_NOTICES = re.compile(rb'(?:[^\n]*\(found "\\0" byte around offset \d+\)\n)+')
#: The same before a path in `--heading` output, each with the empty line that may follow it
#: (the separator rg prints before the next file's matches).
_GROUP_NOTICES = re.compile(rb'(?:[^\n]*\(found "\\0" byte around offset \d+\)\n\n?)+')
#: One such notice as a whole line (without its newline).
_NOTICE_LINE = re.compile(rb'[^\n]*\(found "\\0" byte around offset \d+\)')

#: How much of a tool's stderr an error message carries.
STDERR_LINES = 12
STDERR_LINE_CHARS = 300


def order_for_search(terms: Iterable[str]) -> list[str]:
    """Distinct terms, longest first, so a leftmost-first matcher reports the longer one."""
    return sorted({t.lower() for t in terms if t}, key=lambda t: (-len(t), t))


def match_records(output: bytes) -> Iterator[tuple[bytes, bytes]]:
    """(path, matched text) for each `path\\0matched-text\\n` record, paths as raw bytes.

    A path may hold any byte but NUL (a newline or a carriage return included), so records
    are not lines: a path runs up to the next NUL, and the matched text after it up to the
    next newline. The text never holds a newline itself, because every term is a literal
    on one line.
    """
    pieces = _nul_pieces(output)
    path = _without_notices(next(pieces))
    for piece in pieces:
        text, _, rest = piece.partition(b"\n")
        yield path, text
        path = _without_notices(rest)


def _nul_pieces(output: bytes) -> Iterator[bytes]:
    """``output.split(b"\\0")``, one piece at a time: a query's matches printed by rg run to
    megabytes (3.7 MB for three common words in a tree of 20,000 files), and all their
    pieces at once took as much again."""
    start = 0
    while (end := output.find(b"\0", start)) >= 0:
        yield output[start:end]
        start = end + 1
    yield output[start:]


def _without_notices(segment: bytes) -> bytes:
    found = _BINARY_NOTICES.match(segment)
    return segment[found.end():] if found else segment


class _Contained:
    """Which wanted terms a matched text contains, worked out once per distinct raw text.

    A tree prints the same few spellings of each term (``Reals``, ``reals``) thousands of
    times: decoding and testing each printed match costs more than rg's whole search.
    """

    def __init__(self, wanted: list[str], notices: bool = False) -> None:
        self.wanted = wanted
        #: whether a text may be a whole binary-file notice line, which contains no term
        self.notices = notices
        self.known: dict[bytes, tuple[str, ...]] = {}

    def __call__(self, raw: bytes) -> tuple[str, ...]:
        found = self.known.get(raw)
        if found is None:
            if self.notices and _NOTICE_LINE.fullmatch(raw):
                found = self.known[raw] = ()
            else:
                text = raw.decode("utf-8", "replace").lower()
                found = self.known[raw] = tuple(t for t in self.wanted if t in text)
        return found


def count_terms(output: bytes, terms: Iterable[str]) -> dict[str, dict[str, int]]:
    """path -> term -> occurrences, from `path\\0matched-text` records.

    A matched text counts for every term it contains, so ``classes`` found in a file also
    counts for the shorter term ``class`` that the matcher did not report separately.
    """
    wanted = order_for_search(terms)
    contained = _Contained(wanted)
    # Fast path: while no path holds a newline, a record is one line, and equal lines are
    # the same (path, text) pair: counted by Counter in C instead of one by one.
    lines = Counter(output.split(b"\n"))
    lines.pop(b"", None)
    counts: dict[str, dict[str, int]] = {}
    for line, n in lines.items():
        raw_path, nul, raw_match = line.partition(b"\0")
        if not nul:
            if _NOTICE_LINE.fullmatch(line):
                continue
            return _count_records(output, contained)  # a path holding a newline
        found = contained(raw_match)
        if found:
            _add(counts.setdefault(_relative(os.fsdecode(raw_path)), {}), found, n)
    return counts


def _count_records(output: bytes, contained: _Contained) -> dict[str, dict[str, int]]:
    counts: dict[str, dict[str, int]] = {}
    for (raw_path, raw_match), n in Counter(match_records(output)).items():
        found = contained(raw_match)
        if found:
            _add(counts.setdefault(_relative(os.fsdecode(raw_path)), {}), found, n)
    return counts


def _add(per_file: dict[str, int], found: tuple[str, ...], n: int) -> None:
    for term in found:
        per_file[term] = per_file.get(term, 0) + n


def count_grouped_terms(output: bytes, terms: Iterable[str],
                        names: Collection[bytes] = ()) -> dict[str, dict[str, int]]:
    """path -> term -> occurrences, from what `rg -o --null --heading` prints
    (``GroupedCounts``, given the whole output at once)."""
    counts = GroupedCounts(terms, names)
    counts.feed(output)
    return counts.close()


#: what a ``GroupedCounts`` hands each piece to, with whether the piece starts the output
#: (else a NUL comes before it, and its first byte does not start a line)
PieceSeen = Callable[[bytes, bool], None]


class GroupedCounts:
    """path -> term -> occurrences, from what `rg -o --null --heading` prints, ``feed`` a
    part at a time as it arrives (``stream_output``) and ``close``d at its end: a query's
    output is megabytes on a large tree (3.9 MB for three common words in ten copies of
    sympy), and read whole, then joined from the pipe's pieces, it took twice that at once
    (issue 30). Held meanwhile: the counts, and the output since its last NUL.

    What rg prints is each file's path once, a NUL, then its matches one a line, and an
    empty line before the next file: about a fifth of the bytes of one `path NUL match`
    record per match, and each file's lines are counted by Counter in C. A path runs from
    the empty line to the NUL, so it may hold newlines (even two in a row): a match is never
    empty, so the first empty line after a NUL ends that file's matches. Binary-file notices
    come as lines of their own, among a file's matches or before a path; they are skipped.

    ``names`` are the paths the tool listed, as it prints them: a notice names its file, so
    a name holding a newline (or a notice's own words) makes the text before a NUL
    ambiguous; a listed name settles it (see ``listed_path``). They are looked in only for
    such a text. ``seen`` is given every piece between two NULs (and the first and the
    last), as ``PieceSeen`` says: a notice never spans a NUL.
    """

    def __init__(self, terms: Iterable[str], names: Collection[bytes] = (),
                 seen: PieceSeen | None = None) -> None:
        self.contained = _Contained(order_for_search(terms), notices=True)
        self.names = names
        self.seen = seen
        self.counts: dict[str, dict[str, int]] = {}
        #: the bytes fed so far
        self.fed = 0
        #: the output since its last NUL, in the parts it came in
        self._tail: list[bytes] = []
        #: the path whose matches the next piece holds, once the first NUL came
        self._path = b""
        self._first = True

    def feed(self, data: bytes) -> None:
        self.fed += len(data)
        start = 0
        while (end := data.find(b"\0", start)) >= 0:
            piece = data[start:end]
            if self._tail:
                self._tail.append(piece)
                piece = b"".join(self._tail)
                self._tail = []
            self._piece(piece)
            start = end + 1
        if start < len(data):
            self._tail.append(data[start:] if start else data)

    def close(self) -> dict[str, dict[str, int]]:
        """The counts, once the output ended (what follows its last NUL counted too)."""
        piece = b"".join(self._tail)
        self._tail = []
        self._piece(piece)
        return self.counts

    def _piece(self, piece: bytes) -> None:
        first, self._first = self._first, False
        if self.seen is not None:
            self.seen(piece, first)
        if first:
            self._path = _without_group_notices(piece, self.names)
            return
        end = piece.find(b"\n\n")
        block = piece if end < 0 else piece[:end]
        contained = self.contained
        per_file: dict[str, int] = {}
        for line, n in Counter(block.split(b"\n")).items():
            for term in contained(line):  # an empty line contains no term
                per_file[term] = per_file.get(term, 0) + n
        if per_file:
            name = _relative(os.fsdecode(self._path))
            counts = self.counts
            if name in counts:  # rg prints a file once; were it twice, its counts add up
                for term, n in per_file.items():
                    _add(counts[name], (term,), n)
            else:
                counts[name] = per_file
        self._path = b"" if end < 0 else _without_group_notices(piece[end + 2:], self.names)


def _without_group_notices(segment: bytes, names: Collection[bytes]) -> bytes:
    if b"\n" not in segment:  # no notice before it, and no name that could be in doubt
        return segment
    listed = listed_path(segment, len(segment), names)
    if listed is not None:
        return listed
    found = _GROUP_NOTICES.match(segment)
    return segment[found.end():] if found else segment


def listed_path(output: bytes, end: int, names: Collection[bytes],
                starts_line: bool = True) -> bytes | None:
    """The longest listed name that ends at ``end`` and starts a line of ``output``.

    What precedes a path in a tool's output (a binary-file notice, the empty line between
    files) ends with a newline, so the path is a line-start suffix; but a path may hold
    newlines itself, so the longest listed one wins. None when no listed name fits.
    ``starts_line``: whether ``output``'s first byte starts a line (not a piece of a
    tool's output that follows a NUL).
    """
    if not names:
        return None
    start = max(0, end - MAX_PATH_BYTES)
    found = None
    cut = end
    while True:
        line = output.rfind(b"\n", start, cut)
        if line < 0 and (start > 0 or not starts_line):
            return found  # the window's first bytes are not known to start a line
        candidate = output[line + 1:end]
        if candidate and candidate in names:
            found = candidate
        if line < 0:
            return found
        cut = line


#: Longer than any path a file system gives (Linux: PATH_MAX 4096).
MAX_PATH_BYTES = 4096


def split_file_list(output: bytes) -> list[str]:
    """NUL-separated file names as str (undecodable bytes kept via surrogateescape)."""
    return [_relative(os.fsdecode(raw)) for raw in output.split(b"\0") if raw]


def _relative(path: str) -> str:
    return path[2:] if path.startswith("./") else path


def stderr_excerpt(stderr: bytes) -> str:
    """The first lines of a tool's stderr, cut short and joined by " | " into one line.

    Error messages are printed on one line, so they can carry it as it is.
    """
    lines = [line.strip() for line in stderr.decode("utf-8", "replace").splitlines()]
    lines = [line for line in lines if line]
    if not lines:
        return "(nothing on stderr)"
    shown = [line if len(line) <= STDERR_LINE_CHARS else line[:STDERR_LINE_CHARS] + "…"
             for line in lines[:STDERR_LINES]]
    if len(lines) > STDERR_LINES:
        shown.append(f"… and {len(lines) - STDERR_LINES} more lines")
    return " | ".join(shown)


# --- the tools' processes -----------------------------------------------------------------
# A search runs rg or git as child processes. A caller that gives up on a search at its
# deadline (the prompt hook) returns while they still run: unless it ends them they go on,
# orphaned, for as long as the search would have taken. So every source starts its tools
# here, and the caller kills whatever is still live before it leaves.

_LIVE: set[subprocess.Popen[bytes]] = set()
_LIVE_LOCK = threading.Lock()
_CLOSED = False


class ToolsClosed(OSError):
    """``kill_tools(close=True)`` was called: no tool may start any more."""


def start_tool(argv: list[str], cwd: str | os.PathLike[str] | None = None,
               env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
    """``argv`` started with stdin on /dev/null and stdout, stderr piped; recorded as live.

    ``env``: its whole environment (default: this process's). A git command is started
    with ``plugin_kit.start_git``, which builds both.

    Raises OSError when it cannot start (``ToolsClosed`` once the process is closing).
    """
    # Starting under the lock: a search thread cannot start a tool between a kill_tools
    # that found nothing to kill and the caller's exit.
    with _LIVE_LOCK:
        if _CLOSED:
            raise ToolsClosed(f"not starting {argv[0]}: the search was abandoned at its "
                              "deadline")
        for done in [p for p in _LIVE if p.poll() is not None]:
            _LIVE.discard(done)
        proc = _Tool(argv, cwd=Path(cwd) if cwd is not None else None,
                     stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                     stderr=subprocess.PIPE, env=env)
        _LIVE.add(proc)
        return proc


class _Tool(subprocess.Popen[bytes]):
    """A tool's process that, once ``communicate`` has read all it printed and reaped it,
    holds nothing of that output and is no longer recorded as live.

    ``Popen.communicate`` keeps every piece it read from the pipes on the Popen object, and
    ``_LIVE`` kept the object until the next tool started: on a 64k-file tree the pieces of
    rg's two outputs were 8 MB, held through the whole ranking (issue 30).
    """

    def communicate(self, input: bytes | None = None, timeout: float | None = None
                    ) -> tuple[bytes, bytes]:
        out, err = super().communicate(input, timeout)
        for pieces in (getattr(self, "_fileobj2output", None) or {}).values():
            pieces.clear()  # joined into out and err already
        with _LIVE_LOCK:
            _LIVE.discard(self)
        return out, err


#: one read of a tool's pipe: what a Linux pipe holds
READ_BYTES = 1 << 16


def stream_output(proc: subprocess.Popen[bytes], feed: Callable[[bytes], None]) -> bytes:
    """What ``proc`` (started by ``start_tool``) prints on stdout handed to ``feed`` as it
    arrives, a read at a time, not held whole; its stderr read meanwhile (so it never
    blocks on a full pipe) and returned once it ended and is reaped.

    Where pipes cannot be waited on together (not POSIX), the output is read whole and fed
    at once. When ``feed`` raises, the tool is killed and reaped first. A caller giving up
    at a deadline kills the tool (``kill_tools``): its pipes then end, and so does this.
    """
    out, err = proc.stdout, proc.stderr
    if os.name != "posix" or out is None or err is None:
        whole, said = proc.communicate()
        feed(whole)
        return said
    said_parts: list[bytes] = []
    try:
        with selectors.DefaultSelector() as selector:
            selector.register(out, selectors.EVENT_READ)
            selector.register(err, selectors.EVENT_READ)
            while selector.get_map():
                for key, _ in selector.select():
                    data = os.read(key.fd, READ_BYTES)
                    if not data:
                        selector.unregister(key.fileobj)
                    elif key.fileobj is out:
                        feed(data)
                    else:
                        said_parts.append(data)
        proc.wait()
    except BaseException:
        proc.kill()  # Popen.kill: nothing when it was reaped already
        proc.wait()
        raise
    finally:
        out.close()
        err.close()
        with _LIVE_LOCK:
            _LIVE.discard(proc)
    return b"".join(said_parts)


def track_tool(start: Callable[[], subprocess.Popen[bytes]]) -> subprocess.Popen[bytes]:
    """The process ``start()`` starts, recorded as live, for a caller that must start it
    itself (``git_runner``'s bounded runner: its own session, stderr to a file), so that
    ``kill_tools`` ends it too.

    Raises ``ToolsClosed`` once the process is closing, and whatever ``start`` raises.
    """
    with _LIVE_LOCK:
        if _CLOSED:
            raise ToolsClosed("not starting a tool: the search was abandoned at its deadline")
        for done in [p for p in _LIVE if p.poll() is not None]:
            _LIVE.discard(done)
        proc = start()
        _LIVE.add(proc)
        return proc


def live_tools() -> list[int]:
    """The pids of the tools started here that are still running."""
    with _LIVE_LOCK:
        return [p.pid for p in _LIVE if p.poll() is None]


def kill_tools(close: bool = False) -> list[int]:
    """Kill every tool still running and reap it; the pids killed.

    ``close``: refuse to start any more tools, for a caller about to exit.
    """
    global _CLOSED
    with _LIVE_LOCK:
        _CLOSED = _CLOSED or close
        procs = list(_LIVE)
        _LIVE.clear()
    killed = []
    for proc in procs:
        if proc.poll() is None:
            try:
                proc.kill()  # Popen.kill: SIGKILL on POSIX, TerminateProcess on Windows
            except OSError:
                continue  # it ended between poll and kill
            killed.append(proc.pid)
    for proc in procs:
        try:
            proc.wait(timeout=5)  # SIGKILL cannot be ignored: this returns at once
        except subprocess.TimeoutExpired:
            pass
    return killed
