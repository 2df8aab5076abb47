"""A repository's recent change history, as evidence for ranking: how often and how
recently each file changed, which files change together, and what the commits that
changed a file said.

One ``git log`` reads the newest commits (``read_history``), through the one
git runner (``git_runner``: nothing the repository's configuration names runs), within one
total deadline, and the result is cached by the commit read from.

What is read, and why:

- ``--no-merges``: with ``--name-only`` a merge lists no files (or its conflicts alone);
  a branch's commits count where they are, one change each, as ``calibrate`` mines them
  (``--first-parent`` would make a pull request one change, often over the cap below).
- ``--no-renames``: rename detection costs time that grows with a commit's added and
  deleted files and with ``diff.renameLimit``, which the repository's own configuration
  sets; without it a renamed file's history starts at its rename (its old path is not
  found in the tree any more), a small loss in a few hundred commits.
- git log runs at the work tree's top level, with ``--no-relative`` (a repository's
  ``diff.relative`` would list only the paths under the folder it runs in, relative to
  it): every path is read from the top and mapped to the searched root here.
- A commit that changes more than ``MAX_COMMIT_PATHS`` files (a reformat, a vendored
  import, a licence header) says nothing about any one of them: it keeps its place in the
  window (ages count it) but changes no file's count.
- A log past ``MAX_LOG_BYTES`` of output, or still printing at the deadline, is cut at its
  last whole commit: the history covers the commits before it, and a note says so (one
  cut by the deadline is not cached, so a later search may read it whole).
- Each commit's message, as its words (``commit_words``), over a wider window than the
  counts (``MESSAGE_COMMITS``; the same log reads both): what the commits that changed a
  file said they did is evidence of what it is about (``FileHistory.told``).

Outside git, in a repository without a commit, in a shallow clone (its cut history would
make every file look new), when git fails or prints no whole commit by the deadline,
there is no history: ``read_history`` returns None and adds one note saying why.

The cache (``history/`` in the cache folder) is one JSON file per repository, commit and
window, named by a hash of the three, written by rename and read through ``safefile`` with
a size cap; a file that does not hold what its name promises, in the shapes expected, is a
miss and is written again. A long-lived process (the MCP server, a script calling the API)
also keeps the last few histories in memory, by work tree, commit, window and root (a
commit's history never changes, and a new HEAD is a new key), and where HEAD is, while
nothing git reads to say it changed (``git_head``): a warm read then runs no git at all.
"""

from __future__ import annotations

import io
import json
import os
import re
import time
from dataclasses import dataclass, field
from pathlib import Path

from slm_rerank import digests, safefile
from slm_rerank.cache_folder import prune_entries
from slm_rerank.git_runner import GitError, GitTimeout, git_stream
from slm_rerank.lexical import git_head
from slm_rerank.lexical.commit_words import MAX_MESSAGE_WORDS, message_evidence, message_words

#: Bump when what a cache entry holds changes, so older entries are not reused.
HISTORY_VERSION = 2
#: The most commits one read may ask for (a caller's mistake must not read a whole history).
MAX_COMMITS = 5000
#: Commits whose message words a read keeps: wider than the change window, as a file is
#: named by few messages (the learned ranker's ``messages`` feature was chosen with it).
MESSAGE_COMMITS = 1000
#: A commit that changes more files than this changes none, as far as history goes.
MAX_COMMIT_PATHS = 100
#: Bytes of ``git log`` output read; the rest of a longer log is not read.
MAX_LOG_BYTES = 4 * 1024 * 1024
#: A cache entry larger than this is not read (300 commits of 100 paths is about 3 MB).
MAX_ENTRY_BYTES = 8 * 1024 * 1024
#: Entries kept in ``history/``: the oldest beyond these are removed on each write.
KEEP_ENTRIES = 64
#: Histories a process keeps in memory (the newest read): a few roots and commits.
KEEP_IN_MEMORY = 4

_COMMIT_ID_BYTES = re.compile(rb"[0-9a-f]{40}(?:[0-9a-f]{24})?")
#: git log's arguments before the commit; each commit's record starts with a NUL (an empty
#: field, which no path is), then its id, a newline and its message, then (after a NUL and
#: a newline) its paths, NUL-separated
_LOG_ARGS = ("log", "--no-merges", "-z", "--format=%x00%H%n%B", "--name-only", "--no-renames",
             "--no-relative")


@dataclass(frozen=True)
class FileHistory:
    """The newest ``commits`` non-merge commits up to ``head``, seen from the searched root.

    ``changed`` holds, for each commit newest first, the files it changed under the root
    (paths relative to the root, ``/``-separated, as the search names files); a commit over
    ``MAX_COMMIT_PATHS`` files, or that changed nothing under the root, holds none.
    ``cut``: the log was cut (``MAX_LOG_BYTES``, the deadline): fewer commits than asked.
    ``said``: for each commit of the (wider) messages window, newest first, the files it
    changed under the root and the words of its message (``message_words``).
    """

    head: str
    commits: int
    changed: tuple[frozenset[str], ...]
    cut: bool = False
    said: tuple[tuple[frozenset[str], frozenset[str]], ...] = ()
    _counts: dict[str, int] = field(init=False, repr=False, compare=False)
    _ages: dict[str, int] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        counts: dict[str, int] = {}
        ages: dict[str, int] = {}
        for age, paths in enumerate(self.changed):
            for path in paths:
                counts[path] = counts.get(path, 0) + 1
                ages.setdefault(path, age)
        object.__setattr__(self, "_counts", counts)
        object.__setattr__(self, "_ages", ages)

    def changes(self, path: str) -> int:
        """How many of the commits changed ``path``."""
        return self._counts.get(path, 0)

    def age(self, path: str) -> int | None:
        """How many commits ago ``path`` last changed (0: the newest), None if it did not."""
        return self._ages.get(path)

    def together(self, path: str, others: set[str]) -> int:
        """How many commits changed ``path`` and at least one of ``others`` (``path`` itself
        among them does not count)."""
        if path not in self._counts:
            return 0
        rest = others - {path}
        return sum(1 for paths in self.changed if path in paths and not rest.isdisjoint(paths))

    def paths(self) -> set[str]:
        """Every file (under the root) that one of the commits changed."""
        return set(self._counts)

    def messages(self, paths: list[str], words: set[str]) -> list[float]:
        """``told``'s scores alone."""
        return [score for score, _ in self.told(paths, words)]

    def told(self, paths: list[str], words: set[str]) -> list[tuple[float, tuple[str, ...]]]:
        """``messages`` with, for each path, which of ``words`` the messages say, the one
        adding most first: ``commit_words.message_evidence``."""
        return message_evidence(self.said, paths, words)


@dataclass(frozen=True)
class _Log:
    """What one ``git log`` read, from the top level: each commit's paths and its message's
    words, newest first."""

    changed: list[list[str]]
    cut: bool
    words: list[frozenset[str]] = field(default_factory=list)
    late: bool = False  # cut at the deadline: neither cached nor kept in memory


class _Full(Exception):
    """The capped sink is full: the runner kills git and this ends the read."""


class _CappedSink(io.BytesIO):
    """Keeps at most ``cap`` bytes; the write that would pass it stores what fits and
    raises ``_Full`` (the runner then kills git, whatever it has still to print)."""

    def __init__(self, cap: int) -> None:
        super().__init__()
        self.cap = cap

    def write(self, data: bytes) -> int:  # type: ignore[override]
        room = self.cap - self.tell()
        if len(data) > room:
            super().write(data[:max(room, 0)])
            raise _Full
        return super().write(data)


def parse_log(raw: bytes, cut: bool = False) -> tuple[list[list[str]], list[frozenset[str]]]:
    """Each commit's paths (top-level relative) and its message's words
    (``message_words``), newest first, from ``_LOG_ARGS`` output.

    A commit over ``MAX_COMMIT_PATHS`` paths gets none. ``cut``: the output stops part way:
    what follows its last NUL is not read, nor its last commit unless the next had begun.
    """
    changed: list[list[str]] = []
    words: list[frozenset[str]] = []
    current: list[str] | None = None
    commit_next = first_path = False
    tokens = raw.split(b"\0")
    for token in tokens[:-1] if cut else tokens:
        if not token:
            commit_next = True
            continue
        if commit_next:
            # the commit's id, a newline, its message (which git prints without a NUL)
            found = _COMMIT_ID_BYTES.match(token)
            if found is None or token[found.end():found.end() + 1] not in (b"", b"\n"):
                break  # not what _LOG_ARGS print: keep the commits read whole
            commit_next = False
            current = []
            changed.append(current)
            words.append(message_words(token[found.end() + 1:].decode("utf-8", "replace")))
            first_path = True
            continue
        if current is None:
            continue
        if first_path:  # git puts a newline between a commit's line and its paths
            token = token[1:] if token.startswith(b"\n") else token
            first_path = False
        if len(current) <= MAX_COMMIT_PATHS:  # one past the cap tells an oversized commit
            current.append(os.fsdecode(token))
    if cut and changed and not commit_next:  # the last may have more paths to come
        changed.pop()
        words.pop()
    return [paths if len(paths) <= MAX_COMMIT_PATHS else [] for paths in changed], words


def _under(changed: list[list[str]], prefix: str) -> tuple[frozenset[str], ...]:
    """Each commit's paths under ``prefix`` (the root's place in the work tree), relative
    to it."""
    return tuple(frozenset(path[len(prefix):] for path in paths
                           if path.startswith(prefix) and len(path) > len(prefix))
                 for paths in changed)


# --- the cache -----------------------------------------------------------------------------
def _entry_path(folder: Path, top: str, head: str, commits: int) -> Path:
    key = f"{HISTORY_VERSION}\0{top}\0{head}\0{commits}"
    name = digests.sha256(key.encode("utf-8", "surrogateescape")).hexdigest()[:32]
    return folder / "history" / f"{name}.json"


def _read_entry(path: Path, top: str, head: str, commits: int) -> _Log | None:
    """The log cached at ``path`` if it is the one its name promises, in the shapes
    written; None otherwise (absent, too big, not a regular file, not JSON, foreign)."""
    try:
        fd = safefile.open_regular(path, os.O_RDONLY)
    except OSError:
        return None
    try:
        raw = safefile.read_at_most(fd, MAX_ENTRY_BYTES + 1)
    except OSError:
        return None
    finally:
        os.close(fd)
    if len(raw) > MAX_ENTRY_BYTES:
        return None
    try:
        doc = json.loads(raw)
    except (ValueError, RecursionError):
        return None
    if not (isinstance(doc, dict) and doc.get("version") == HISTORY_VERSION
            and doc.get("top") == top and doc.get("head") == head
            and doc.get("asked") == commits and isinstance(doc.get("cut"), bool)):
        return None
    paths, rows = doc.get("paths"), doc.get("changed")
    if not (isinstance(paths, list) and isinstance(rows, list) and len(rows) <= commits
            and all(isinstance(p, str) and p for p in paths)):
        return None
    vocabulary, said = doc.get("vocabulary"), doc.get("said")
    if not (isinstance(vocabulary, list) and isinstance(said, list) and len(said) == len(rows)
            and all(isinstance(w, str) and w for w in vocabulary)):
        return None
    changed = []
    for row in rows:
        if not (isinstance(row, list) and len(row) <= MAX_COMMIT_PATHS
                and all(type(i) is int and 0 <= i < len(paths) for i in row)):
            return None
        changed.append([paths[i] for i in row])
    words = []
    for row in said:
        if not (isinstance(row, list) and len(row) <= MAX_MESSAGE_WORDS
                and all(type(i) is int and 0 <= i < len(vocabulary) for i in row)):
            return None
        words.append(frozenset(vocabulary[i] for i in row))
    return _Log(changed, doc["cut"], words)


def _write_entry(path: Path, top: str, head: str, commits: int, log: _Log) -> None:
    """Write by rename (a reader never sees half a file); a failure only costs speed."""
    index: dict[str, int] = {}
    rows = [[index.setdefault(p, len(index)) for p in paths] for paths in log.changed]
    vocabulary: dict[str, int] = {}
    said = [[vocabulary.setdefault(w, len(vocabulary)) for w in sorted(words)]
            for words in log.words]
    doc = {"version": HISTORY_VERSION, "top": top, "head": head, "asked": commits,
           "cut": log.cut, "paths": list(index), "changed": rows,
           "vocabulary": list(vocabulary), "said": said}
    try:
        safefile.replace_file(path, json.dumps(doc, separators=(",", ":")))
    except (OSError, ValueError):
        return
    prune_entries(path.parent, KEEP_ENTRIES, {path})  # a new commit makes a new entry


#: (work tree top, commit, commits asked, messages asked, root's prefix) -> the history
_IN_MEMORY: dict[tuple[str, str, int, int, str], FileHistory] = {}


def forget() -> None:
    """Drop what is kept in memory (the next read is from the cache folder or git)."""
    _IN_MEMORY.clear()
    git_head.forget()


def _remember(key: tuple[str, str, int, int, str], history: FileHistory) -> None:
    _IN_MEMORY.pop(key, None)
    _IN_MEMORY[key] = history
    while len(_IN_MEMORY) > KEEP_IN_MEMORY:
        _IN_MEMORY.pop(next(iter(_IN_MEMORY)), None)


# --- reading -------------------------------------------------------------------------------
def _read_log(top: str, head: str, commits: int, timeout: float) -> _Log:
    """The log; cut at ``MAX_LOG_BYTES`` or the deadline (GitTimeout: no whole commit)."""
    sink = _CappedSink(MAX_LOG_BYTES)
    cut = late = False
    try:
        git_stream(Path(top), [*_LOG_ARGS, f"-n{commits}", head, "--"], sink,
                   timeout=timeout, max_bytes=MAX_LOG_BYTES + (1 << 17))
    except _Full:
        cut = True
    except GitTimeout:
        cut = late = True
    changed, words = parse_log(sink.getvalue(), cut)
    if late and not changed:
        raise GitTimeout("git log printed no whole commit in time")
    return _Log(changed, cut, words, late)


class _NeedsLog(Exception):
    """``kept_history``: only a ``git log`` (or more time) can tell the history."""


def read_history(root: Path, *, cache_dir: Path | None, notes: list[str],
                 commits: int = 300, messages: int = MESSAGE_COMMITS,
                 deadline_s: float = 1.0, spent: float = 0.0,
                 rev: str = "HEAD") -> FileHistory | None:
    """The newest ``commits`` non-merge commits up to ``rev`` (HEAD: the checked-out one)
    of the repository holding ``root``, seen from ``root``; within ``deadline_s`` seconds
    in total, of which ``spent`` went already (a look-up before, ``kept_history``); and the
    words of the newest ``messages`` commits' messages (``said``), read by the same log.

    From ``cache_dir`` (the cache folder; None: no cache) when this repository's commit
    was read before: then only ``git rev-parse`` runs. None, with one note in ``notes``
    saying why, when there is no history to read (outside git, no commit yet, a shallow
    clone, git failed or ran out of time); one note, and the history, when the log was cut.
    """
    return _read(root, cache_dir, notes, commits, messages, deadline_s, rev, read_log=True,
                 spent=spent)


@dataclass(frozen=True)
class KeptHistory:
    """What ``read_history`` would give, found without reading a log."""

    history: FileHistory | None
    notes: list[str]


def kept_history(root: Path, *, cache_dir: Path, commits: int = 300,
                 messages: int = MESSAGE_COMMITS,
                 deadline_s: float = 1.0, rev: str = "HEAD") -> KeptHistory | None:
    """``read_history``'s answer when it needs no ``git log``: this commit's history was
    read before (kept in memory or in ``cache_dir``), or ``git rev-parse`` says there is none
    to read (outside git, no commit yet, a shallow clone, no git), with the same note. None
    when only a log can tell, or git did not answer within ``deadline_s``: a caller then
    calls ``read_history``, with what is left of its time (``spent``).
    """
    notes: list[str] = []
    try:
        history = _read(root, cache_dir, notes, commits, messages, deadline_s, rev,
                        read_log=False)
    except _NeedsLog:
        return None
    return KeptHistory(history, notes)


def _read(root: Path, cache_dir: Path | None, notes: list[str], commits: int,
          messages: int, deadline_s: float, rev: str, *, read_log: bool, spent: float = 0.0
          ) -> FileHistory | None:
    if rev.startswith("-") or "\0" in rev:
        raise ValueError(f"not a revision: {rev!r}")
    started = time.monotonic() - max(spent, 0.0)
    commits = max(1, min(commits, MAX_COMMITS))
    messages = max(0, min(messages, MAX_COMMITS))
    reading = max(commits, messages)  # one log holds both windows
    try:
        where = git_head.where(root, rev, deadline_s - (time.monotonic() - started))
        if isinstance(where, str):
            notes.append(f"no change history: {where}")
            return None
        key = (where.top, where.head, commits, messages, where.prefix)
        kept = None if cache_dir is None else _IN_MEMORY.get(key)
        if kept is not None:
            if kept.cut:
                notes.append(_cut_note(where.top, max(kept.commits, len(kept.said))))
            return kept
        entry = (None if cache_dir is None
                 else _entry_path(cache_dir, where.top, where.head, reading))
        log = None if entry is None else _read_entry(entry, where.top, where.head, reading)
        if log is None:
            if not read_log:
                raise _NeedsLog
            left = deadline_s - (time.monotonic() - started)
            if left <= 0:
                raise GitTimeout("no time left for git log")
            log = _read_log(where.top, where.head, reading, left)
            if entry is not None and not log.late:
                _write_entry(entry, where.top, where.head, reading, log)
    except (GitError, OSError) as exc:  # a GitTimeout is a GitError
        if not read_log:
            raise _NeedsLog from None
        # an OSError: git could not be started or given a temporary file (a full disk); the
        # history is an aid to the ranking, never a reason for a search to fail
        why = (f"git did not answer within {deadline_s:g} s in {root}"
               if isinstance(exc, GitTimeout) else str(exc) if isinstance(exc, GitError)
               else exc.strerror or str(exc))
        notes.append(f"no change history: {why}")
        return None
    if log.late:
        notes.append(f"change history: git log did not end within {deadline_s:g} s in "
                     f"{where.top}; the newest {len(log.changed)} commits it gave are used")
    elif log.cut:
        notes.append(_cut_note(where.top, len(log.changed)))
    window = log.changed[:commits]
    heard = log.changed[:messages]
    history = FileHistory(where.head, len(window), _under(window, where.prefix), log.cut,
                          tuple(zip(_under(heard, where.prefix), log.words[:messages],
                                    strict=True)))
    if cache_dir is not None and not log.late:
        _remember(key, history)
    return history


def _cut_note(top: str, commits: int) -> str:
    return (f"change history: the log of {top} passed {MAX_LOG_BYTES} bytes; the newest "
            f"{commits} commits are used")
