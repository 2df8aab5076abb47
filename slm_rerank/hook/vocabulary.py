"""A repository's vocabulary: the words of its path components and declared symbols.

The prompt hook asks whether a prompt's plain words ("the retry loop", "the latex printer")
are this codebase's words. Reading every source file for that on each prompt costs far more
than a hook may spend, so the vocabulary is cached in the cache folder under a key drawn
from the tree (each listed file's path, size and modification time, the way build tools
tell changed content): a warm check walks the tree's names and reads one small file.

A repository's files are untrusted: the walk, the bytes read for symbols, the number of
words and the length of each are bounded, so a huge tree or a huge file costs bounded time
and memory; only ASCII letters and digits become words, so no control character from a
file name reaches anyone; and the cache entry is read through ``safefile`` with a size cap
and written by rename, like the chunk cache.
"""

from __future__ import annotations

import functools
import itertools
import json
import os
import re
import stat
import time
from dataclasses import dataclass, field
from pathlib import Path

from slm_rerank import digests, safefile
from slm_rerank.cache_folder import prune_entries
from slm_rerank.lexical.filetypes import SOURCE_SUFFIXES
from slm_rerank.lexical.terms import split_identifier

#: Bump when what a vocabulary holds changes, so older cache entries are not reused.
VOCABULARY_VERSION = "1"
#: Files listed: a tree with more is described by its first ones (in sorted walk order).
MAX_FILES = 40_000
#: Folder entries looked at, files or not: a folder of a million entries stops here.
MAX_ENTRIES = 120_000
MAX_DEPTH = 24
#: Bytes read from one source file for its declarations; bytes read from all of them.
MAX_FILE_BYTES = 256 * 1024
MAX_SOURCE_BYTES = 24 * 1024 * 1024
MAX_WORDS = 120_000
#: Declarations taken from one file (a generated file may declare a million names).
MAX_FILE_SYMBOLS = 4096
MAX_WORD_CHARS = 40
#: A cache entry larger than this is not read (a real one is a few hundred KB at most).
MAX_ENTRY_BYTES = 16 * 1024 * 1024
#: Entries kept in the cache folder: the oldest beyond these are removed on each write.
KEEP_ENTRIES = 32
#: Folders that hold other people's code or build output, not the repository's own words.
SKIP_FOLDERS = frozenset({"node_modules", "__pycache__", "site-packages", "venv", "env",
                          "vendor", "third_party", "dist", "build", "target"})

#: Whole names: a word that is a path component (file stem, folder) or a declared symbol.
NAME = 1
#: A word that is one part of a compound name (``retry`` of ``retry_policy``).
PART = 2

#: Declaration keywords by file suffix. One pattern per keyword: a literal prefix lets the
#: regex engine skip ahead (two alternatives made it crawl: 1.7 s over sympy's 28 MB).
_PYTHON_KEYWORDS = (b"def", b"class")
_OTHER_KEYWORDS = (b"class", b"function", b"func", b"fn", b"struct", b"enum", b"interface",
                   b"trait", b"impl", b"module", b"namespace", b"record", b"object")
_PATTERNS = {kw: re.compile(kw + rb"[ \t]+\*?([A-Za-z_][A-Za-z0-9_]{0,79})")
             for kw in {*_PYTHON_KEYWORDS, *_OTHER_KEYWORDS}}
_PYTHON_SUFFIXES = frozenset({".py", ".pyi", ".pyx", ".pxd"})
#: the clock budgets are measured on (a test gives it one that runs fast)
_clock = time.monotonic
_WORD = re.compile(f"[a-z][a-z0-9]{{1,{MAX_WORD_CHARS - 1}}}")
#: one file's words as ``_file_words`` writes them; a cached list not of this shape is read
#: again (``int(kind)`` of a damaged one failed every later build of the tree)
_FILE_WORDS = re.compile(f"(?:{_WORD.pattern}:[0-9](?: (?!$)|$))*")


@dataclass(frozen=True)
class Vocabulary:
    """Words of a tree, each with the number of files that hold it and its kinds (flags)."""

    #: files the words were drawn from
    files: int
    #: word -> (files naming it, NAME | PART flags)
    words: dict[str, tuple[int, int]] = field(default_factory=dict)
    #: False when a bound stopped the walk or the reading (the words are of part of the tree)
    complete: bool = True

    def lookup(self, word: str) -> tuple[int, int] | None:
        """``(files, flags)`` for ``word`` and its forms (plural, -ing, -ed) together: the
        most files any form is in, and every kind any form has; None when none is here."""
        files, kinds = -1, 0
        for form in forms(word):
            found = self.words.get(form)
            if found is not None:
                files, kinds = max(files, found[0]), kinds | found[1]
        return (files, kinds) if files >= 0 else None


def forms(word: str) -> list[str]:
    """``word`` and the forms a name may take of it: routes -> route, parsing -> parse."""
    out = [word]
    for suffix in ("ies", "es", "s", "ing", "ed", "er", "ers"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            base = word[: -len(suffix)]
            out += [base + "y"] if suffix == "ies" else [base, base + "e"]
    out += [word + "s"]
    return out


class OutOfTime(Exception):
    """The budget given to ``load`` ran out before the vocabulary was ready."""


@dataclass
class _Listing:
    #: (relative path, size, modification time in ns), in sorted walk order
    paths: list[tuple[str, int, int]]
    key: str
    complete: bool


def _list(root: Path, stop_at: float) -> _Listing:
    """The files under ``root`` (sorted walk, bounded), and the key of that listing."""
    digest = digests.sha256(f"vocabulary {VOCABULARY_VERSION}\0".encode())
    paths: list[tuple[str, int, int]] = []
    seen = 0
    complete = True
    stack: list[tuple[str, int]] = [("", 0)]
    base = os.fsencode(root)
    while stack and complete:
        rel, depth = stack.pop()
        try:
            with os.scandir(os.path.join(base, os.fsencode(rel)) if rel else base) as it:
                # no more than the bound leaves: sorting a folder of millions whole read
                # them all, the memory and time the bound is there to save
                entries = sorted(itertools.islice(it, MAX_ENTRIES - seen + 1),
                                 key=lambda e: e.name)
        except OSError:
            continue
        folders = []
        for entry in entries:
            seen += 1
            if seen > MAX_ENTRIES or len(paths) >= MAX_FILES:
                complete = False
                break
            if seen % 512 == 0 and _clock() > stop_at:
                raise OutOfTime("listing the tree")
            name = os.fsdecode(entry.name)
            if name.startswith("."):
                continue  # .git, .venv, editor state: not the repository's own words
            child = f"{rel}/{name}" if rel else name
            try:
                info = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            if stat.S_ISDIR(info.st_mode):
                if depth >= MAX_DEPTH:
                    complete = False
                elif name not in SKIP_FOLDERS:
                    folders.append((child, depth + 1))
            elif stat.S_ISREG(info.st_mode):
                paths.append((child, info.st_size, info.st_mtime_ns))
                digest.update(os.fsencode(child) + b"\0%d\0%d\0" % (info.st_size,
                                                                    info.st_mtime_ns))
        stack.extend(reversed(folders))
    digest.update(b"complete" if complete else b"cut")
    return _Listing(paths, digest.hexdigest(), complete)


@functools.lru_cache(maxsize=1 << 16)
def _name_words(name: str) -> tuple[tuple[str, int], ...]:
    """The words of a name: itself whole (when it is one word), and its parts.

    Cached: a tree declares the same names again and again (``__init__``, ``test_x``).
    """
    whole = name.lower()
    out = [(whole, NAME)] if _WORD.fullmatch(whole) else []
    parts = split_identifier(name)
    if len(parts) > 1 or (parts and parts[0] != whole):
        out += [(part, PART) for part in parts if _WORD.fullmatch(part)]
    return tuple(out)


def _words_of(name: str, into: dict[str, int]) -> None:
    for word, kind in _name_words(name[:MAX_WORD_CHARS * 4]):
        into[word] = into.get(word, 0) | kind


def _read_head(path: bytes, limit: int) -> bytes:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return b""
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return b""  # a FIFO put there since the walk would block the read for ever
        return os.read(fd, limit)
    except OSError:
        return b""
    finally:
        os.close(fd)


def _file_words(base: bytes, rel: str, limit: int) -> str:
    """The words one file gives, as ``word:kind`` joined by spaces (compact in the cache)."""
    found: dict[str, int] = {}
    pieces = rel.split("/")
    for piece in [*pieces[:-1], pieces[-1].split(".")[0]]:
        _words_of(piece, found)
    suffix = os.path.splitext(pieces[-1])[1].lower()
    if limit > 0 and suffix in SOURCE_SUFFIXES:
        data = _read_head(os.path.join(base, os.fsencode(rel)), limit)
        keywords = _PYTHON_KEYWORDS if suffix in _PYTHON_SUFFIXES else _OTHER_KEYWORDS
        symbols: set[bytes] = set()
        for keyword in keywords:
            for match in _PATTERNS[keyword].finditer(data):
                start = match.start()
                # "undef foo" or "my_class x" is no declaration: the keyword starts a word
                if start == 0 or not (data[start - 1:start].isalnum()
                                      or data[start - 1:start] == b"_"):
                    symbols.add(match.group(1))
                    if len(symbols) >= MAX_FILE_SYMBOLS:
                        break
        for symbol in symbols:
            _words_of(symbol.decode("ascii"), found)
    return " ".join(f"{word}:{kind}" for word, kind in found.items())


#: word lists of files already read: path -> (size, mtime_ns, words)
FileWords = dict[str, tuple[int, int, str]]


class Unfinished(OutOfTime):
    """Out of time part way through the files: ``done`` holds the ones read, for next time."""

    def __init__(self, done: FileWords) -> None:
        super().__init__("reading declarations")
        self.done = done


def build(root: Path, listing: _Listing, stop_at: float,
          known: FileWords | None = None) -> tuple[Vocabulary, FileWords]:
    """The vocabulary of the listed files, re-reading only those that changed since
    ``known`` was made; Unfinished (with what it read) when ``stop_at`` comes first."""
    known = known or {}
    per_file: FileWords = {}
    budget = MAX_SOURCE_BYTES
    complete = listing.complete
    base = os.fsencode(root)
    for rel, size, mtime in listing.paths:
        if _clock() > stop_at:  # each file: one read may take long on a slow disk
            raise Unfinished(per_file)
        limit = min(size, MAX_FILE_BYTES, budget)
        if os.path.splitext(rel)[1].lower() in SOURCE_SUFFIXES:
            budget -= limit  # counted alike whether read now or before: the same words
            if budget <= 0:
                complete = False
        before = known.get(rel)
        if before is not None and before[0] == size and before[1] == mtime:
            per_file[rel] = before
        else:
            per_file[rel] = (size, mtime, _file_words(base, rel, limit))
    counts: dict[str, list[int]] = {}
    for _, _, words in per_file.values():
        for item in words.split():
            word, _, kind = item.partition(":")
            entry = counts.get(word)
            if entry is None:
                if len(counts) >= MAX_WORDS:
                    complete = False
                    continue
                counts[word] = [1, int(kind)]
            else:
                entry[0] += 1
                entry[1] |= int(kind)
    vocabulary = Vocabulary(len(per_file), {w: (n, k) for w, (n, k) in counts.items()},
                            complete)
    return vocabulary, per_file


# --- the cache ------------------------------------------------------------------------------
# One entry per root: ``<hash of the root>.json`` holds the listing's key and the words (all a
# warm check reads); ``<hash>.files.json`` the words of each file, read only to update the
# entry after a change, so that an edit re-reads the files it touched, not the tree.


def _entry_paths(folder: Path, root: Path) -> tuple[Path, Path]:
    name = digests.sha256(os.fsencode(root.resolve())).hexdigest()[:32]
    return (folder / "vocabulary" / f"{name}.json",
            folder / "vocabulary" / f"{name}.files.json")


def _read_json(path: Path) -> object:
    """The JSON document at ``path``; None for a miss (absent, too big, not regular, bad)."""
    try:
        fd = safefile.open_regular(path, os.O_RDONLY)
    except OSError:
        return None
    try:
        with os.fdopen(fd, "rb") as handle:
            raw = handle.read(MAX_ENTRY_BYTES + 1)
    except OSError:
        return None
    if len(raw) > MAX_ENTRY_BYTES:
        return None
    try:
        return json.loads(raw)
    except (ValueError, RecursionError):
        return None


#: vocabularies a process keeps (a warm process's hook runs): by entry file, with the file's
#: stamp and the listing key it was read for; at most KEEP_IN_MEMORY, the newest
KEEP_IN_MEMORY = 4
_KEPT: dict[str, tuple[tuple[int, int, int, int, int], str, Vocabulary]] = {}


def _read_entry(path: Path, key: str) -> Vocabulary | None:
    """The cached vocabulary at ``path`` if it was made from the listing ``key``: kept from
    an earlier read while the file is the same one (it is only ever replaced by a rename,
    so a new version is a new inode), else read."""
    try:
        info = os.stat(path)
        stamp = (info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns)
    except OSError:
        return None
    kept = _KEPT.get(str(path))
    if kept is not None and kept[0] == stamp and kept[1] == key:
        return kept[2]
    found = _parse_entry(path, key)
    if found is not None:
        _KEPT.pop(str(path), None)
        _KEPT[str(path)] = (stamp, key, found)
        while len(_KEPT) > KEEP_IN_MEMORY:
            _KEPT.pop(next(iter(_KEPT)), None)
    return found


def _parse_entry(path: Path, key: str) -> Vocabulary | None:
    doc = _read_json(path)
    if not (isinstance(doc, dict) and doc.get("key") == key):
        return None
    rows, files, complete = doc.get("words"), doc.get("files"), doc.get("complete")
    if not (isinstance(rows, dict) and len(rows) <= MAX_WORDS and type(files) is int
            and isinstance(complete, bool)):
        return None
    words = {}
    for word, row in rows.items():
        if not (_WORD.fullmatch(word) and isinstance(row, list) and len(row) == 2
                and type(row[0]) is int and type(row[1]) is int):
            return None
        words[word] = (row[0], row[1])
    return Vocabulary(files, words, complete)


def _read_files(path: Path) -> FileWords:
    doc = _read_json(path)
    if not isinstance(doc, dict):
        return {}
    known: FileWords = {}
    for rel, row in doc.items():
        if (isinstance(row, list) and len(row) == 3 and type(row[0]) is int
                and type(row[1]) is int and isinstance(row[2], str)
                and _FILE_WORDS.fullmatch(row[2])):
            known[rel] = (row[0], row[1], row[2])
    return known


def _write_json(path: Path, doc: object) -> None:
    """Write by rename (a reader never sees half a file); a failure only costs speed."""
    try:
        safefile.replace_file(path, json.dumps(doc, separators=(",", ":")))
    except OSError:
        pass


@dataclass(frozen=True)
class Loaded:
    """A vocabulary and whether it came from the cache as it was."""

    vocabulary: Vocabulary
    cached: bool


def load(root: Path, cache_folder: Path | None, seconds: float) -> Loaded:
    """The vocabulary of ``root``: from the cache when the tree is unchanged, else built
    (updated from the cached words of the files that did not change) within ``seconds``.

    OutOfTime when they run out first; the files read by then are kept for the next call,
    so a tree too large for one prompt's budget is finished over a few.
    """
    stop_at = _clock() + max(0.0, seconds)
    listing = _list(root, stop_at)
    if cache_folder is None:
        return Loaded(build(root, listing, stop_at)[0], False)
    words_path, files_path = _entry_paths(cache_folder, root)
    cached = _read_entry(words_path, listing.key)
    if cached is not None:
        return Loaded(cached, True)
    known = _read_files(files_path)
    try:
        vocabulary, per_file = build(root, listing, stop_at, known)
    except Unfinished as exc:
        _write_json(files_path, {**known, **exc.done})
        raise
    _write_json(files_path, per_file)
    _write_json(words_path, {"key": listing.key, "files": vocabulary.files,
                             "complete": vocabulary.complete,
                             "words": {w: list(v) for w, v in vocabulary.words.items()}})
    # two files a root: the entries of the KEEP_ENTRIES roots used last
    prune_entries(words_path.parent, 2 * KEEP_ENTRIES, {words_path, files_path})
    return Loaded(vocabulary, False)
