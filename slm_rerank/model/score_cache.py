"""The score cache: one SQLite file (WAL) in the cache folder, safe for several processes.

A score is keyed by everything that could change it: the served model id, the profile and
its prompt version, the scorer, the normalised query and the hash of the judged text. A
bounded score (one answer missing from the server's top-K) or a failure is never stored.
"""

from __future__ import annotations

import errno
import os
import sqlite3
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from slm_rerank import digests, safefile
from slm_rerank.errors import ConfigError

FILE_NAME = "scores.sqlite3"
#: how long one operation waits for another process's write lock; WAL readers never wait,
#: and a write that times out is skipped (the cache is an optimisation)
BUSY_SECONDS = 2.0
#: how often opening is tried when another process holds the file at that moment
OPEN_ATTEMPTS = 10
SCHEMA = """
CREATE TABLE IF NOT EXISTS scores (
    key TEXT PRIMARY KEY,
    query_key TEXT NOT NULL,
    model TEXT NOT NULL,
    probability REAL NOT NULL,
    raw REAL,
    created REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS scores_by_query ON scores (query_key);
"""


def normalise_query(query: str) -> str:
    """Whitespace and case do not change what is asked."""
    return " ".join(query.split()).casefold()


def query_key(query: str) -> str:
    return digests.sha256(normalise_query(query).encode("utf-8", "surrogateescape")).hexdigest()


@dataclass(frozen=True)
class ScoreKey:
    """Everything a cached score depends on."""

    model_id: str
    profile: str
    prompt_version: str
    scorer: str
    query: str
    content_hash: str

    @property
    def digest(self) -> str:
        parts = (self.model_id, self.profile, self.prompt_version, self.scorer,
                 normalise_query(self.query), self.content_hash)
        return digests.sha256("\x1f".join(parts).encode("utf-8", "surrogateescape")).hexdigest()


@dataclass(frozen=True)
class CachedScore:
    probability: float
    raw: float | None


@dataclass(frozen=True)
class CacheStats:
    path: str
    entries: int
    queries: int
    bytes: int
    by_model: dict[str, int]


def _locked(exc: sqlite3.Error) -> bool:
    return isinstance(exc, sqlite3.OperationalError) and any(
        word in str(exc).lower() for word in ("locked", "busy"))


#: SQLite's primary result codes for a write the disk refused: SQLITE_IOERR, SQLITE_FULL
_DISK_CODES = (10, 13)
_DISK_ERRNOS = (errno.ENOSPC, errno.EIO, errno.EFBIG, errno.EDQUOT)


def disk_fault(exc: BaseException) -> bool:
    """Whether ``exc`` is the disk refusing a write (full, over quota, failing).

    The cache file is not corrupt then: it must not be called broken, nor deleted.
    """
    if isinstance(exc, OSError):
        return exc.errno in _DISK_ERRNOS
    if not isinstance(exc, sqlite3.OperationalError):
        return False
    code = getattr(exc, "sqlite_errorcode", None)  # Python 3.11+; the text before that
    if code is not None:
        return code & 0xFF in _DISK_CODES
    text = str(exc).lower()
    return "disk is full" in text or "disk i/o error" in text


def _disk_message(path: Path, exc: BaseException, going_on: bool = False) -> str:
    reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
    then = ": this run goes on without it" if going_on else ""
    return (f"score cache {path} cannot be written ({reason}): the disk is full or failing, "
            f"the cache is not broken{then}; free space, or set cache_dir or "
            "SLM_RERANK_CACHE_DIR to a folder on another disk")


def _folder_unwritable(folder: Path) -> bool:
    """Whether no new file can be made in ``folder`` (a probe, not os.access: root and
    read-only mounts answer os.access wrongly)."""
    probe = folder / f".score-cache-probe-{os.getpid()}"
    try:
        fd = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    except FileExistsError:
        return False
    except OSError:
        return True
    os.close(fd)
    try:
        os.unlink(probe)
    except OSError:
        pass
    return False


def _read_only_folder(path: Path, exc: BaseException) -> ConfigError:
    """A cache in a folder that refuses new files: SQLite cannot open it (WAL needs its
    -wal and -shm files), and deleting it would fail too, so `cache clear` is no remedy."""
    folder = path.parent
    if path.exists():
        return ConfigError(f"score cache {path} cannot be opened ({exc}): its folder {folder} "
                           "is read-only, and SQLite must create files beside it; make the "
                           f"folder writable (chmod u+w {folder}), set cache_dir or "
                           "SLM_RERANK_CACHE_DIR to a writable folder, or pass --no-cache")
    return ConfigError(f"no score cache in {folder}: the folder is read-only, so none can be "
                       "created and there is nothing to clear; make it writable (chmod u+w "
                       f"{folder}) or set cache_dir or SLM_RERANK_CACHE_DIR to a writable "
                       "folder")


def refused_message(exc: safefile.NotRegularFile, going_on: bool = True) -> str:
    """Why a symlink, FIFO or other non-regular file at a score cache name is not used."""
    then = ": this run goes on without the score cache" if going_on else ""
    return (f"score cache {exc.path} is refused: {exc.strerror} (slm-rerank opens only its "
            f"own files there, never through a link){then}; remove it (rm {exc.path}), or "
            "set cache_dir or SLM_RERANK_CACHE_DIR to another folder")


def _unusable(path: Path, exc: BaseException) -> ConfigError:
    """The error for a cache file we cannot use, with the remedy that fits the cause."""
    if isinstance(exc, sqlite3.OperationalError) and "unable to open" in str(exc) and \
            path.parent.is_dir() and _folder_unwritable(path.parent):
        return _read_only_folder(path, exc)
    if disk_fault(exc):
        return ConfigError(_disk_message(path, exc))
    if isinstance(exc, sqlite3.Error) and _locked(exc):
        return ConfigError(f"score cache {path} is held locked by another process ({exc}); "
                           "try again when it is done, or pass --no-cache")
    if path.is_dir():
        return ConfigError(f"score cache {path} is a folder, not a file; remove it, or "
                           "pass --no-cache")
    if isinstance(exc, sqlite3.Error) and "readonly" in str(exc).replace("-", "").lower():
        return ConfigError(f"score cache {path} is read-only ({exc}); make it writable, or "
                           "pass --no-cache")
    if isinstance(exc, OSError):
        return ConfigError(f"score cache {path} cannot be created ({exc.strerror or exc}); "
                           "set cache_dir or SLM_RERANK_CACHE_DIR to a writable folder, or "
                           "pass --no-cache")
    return ConfigError(f"score cache {path} cannot be used ({exc}); run `slm-rerank cache "
                       "clear` to delete it, or pass --no-cache")


def discard(folder: Path) -> list[Path]:
    """Delete the score cache files in ``folder`` without opening them (a broken cache)."""
    gone = []
    for path in (folder / FILE_NAME, *(folder / (FILE_NAME + s) for s in ("-wal", "-shm"))):
        if path.is_file():
            path.unlink()
            gone.append(path)
    return gone


class ScoreCache:
    """Reads and writes scores; every operation is one short transaction.

    Any SQLite fault leaves as a ``ConfigError`` naming the file, except that a write which
    finds the cache busy or read-only is skipped (that only costs speed next time), and that
    a disk which refuses writes (full, failing) turns the cache off for the rest of this
    run: ``warning`` then says so, lookups miss and writes are dropped, and the query goes
    on without the cache (``clear`` and ``stats`` still raise, naming the disk).

    A symlink, FIFO or other non-regular file at the cache's name (or its -wal, -shm) is
    never opened: SQLite would follow a link and create our tables in its target. The
    cache is then off for the run, as for a refusing disk, and ``warning`` names the file.
    """

    def __init__(self, folder: Path) -> None:
        self.path = folder / FILE_NAME
        #: why the cache was turned off in this run (the disk refused a write), else None
        self.warning: str | None = None
        self._refusal: safefile.NotRegularFile | None = None
        self._db: sqlite3.Connection | None = None
        # Two processes creating the file at once can meet a lock SQLite's busy handler does
        # not wait on (the switch to WAL); such a moment passes, so the opening is retried.
        for attempt in range(OPEN_ATTEMPTS):
            began = time.monotonic()
            try:
                folder.mkdir(parents=True, exist_ok=True)
                self._refuse_unsafe()
                self._db = sqlite3.connect(self.path, timeout=BUSY_SECONDS,
                                           isolation_level=None)
                self._db.execute("PRAGMA journal_mode=WAL")
                self._db.execute("PRAGMA synchronous=NORMAL")
                self._db.executescript(SCHEMA)
                return
            except safefile.NotRegularFile as exc:
                self._close()
                self._refusal = exc
                self.warning = refused_message(exc)
                return
            except (sqlite3.Error, OSError) as exc:
                if not disk_fault(exc):
                    self._close()
                    self._open_failed(exc, began, attempt)
                    continue
                self._turn_off(exc)
                return

    def _refuse_unsafe(self) -> None:
        """NotRegularFile when a cache file's name holds a symlink, a FIFO, a folder...

        Checked by lstat just before SQLite opens the files by name (it has no O_NOFOLLOW);
        what replaces a checked file in between is the one race left, and it needs a hand
        already writing in the user's own cache folder.
        """
        for suffix in ("", "-wal", "-shm"):
            path = self.path.with_name(FILE_NAME + suffix)
            try:
                safefile.check_regular(path)
            except safefile.NotRegularFile as exc:
                if suffix == "" and exc.what == "a directory":
                    raise OSError(errno.EISDIR, "is a directory", str(path)) from None
                raise

    def _open_failed(self, exc: BaseException, began: float, attempt: int) -> None:
        """Return to try the opening again, or raise the error that fits ``exc``."""
        if isinstance(exc, sqlite3.OperationalError):
            waited = time.monotonic() - began >= BUSY_SECONDS / 2
            # a lock the busy handler already waited on is held, not passing: say so
            if not _locked(exc) or waited or attempt == OPEN_ATTEMPTS - 1:
                raise _unusable(self.path, exc) from None
            time.sleep(0.05 * (attempt + 1))
            return
        raise _unusable(self.path, exc) from None

    def _turn_off(self, exc: BaseException) -> None:
        self._close()
        self.warning = _disk_message(self.path, exc, going_on=True)

    def _close(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None

    def _live(self) -> sqlite3.Connection:
        """The open database, for ``clear`` and ``stats``; raises when the disk refused it."""
        if self._db is None:
            if self._refusal is not None:  # `stats`, `clear`: no run goes on
                raise ConfigError(refused_message(self._refusal, going_on=False))
            raise ConfigError(self.warning or f"score cache {self.path} is closed")
        return self._db

    def close(self) -> None:
        self._close()

    def get_many(self, keys: Iterable[ScoreKey]) -> dict[str, CachedScore]:
        """digest -> cached score, for the keys that are cached."""
        digests = [k.digest for k in keys]
        found: dict[str, CachedScore] = {}
        if self._db is None:
            return found
        try:
            for start in range(0, len(digests), 500):
                batch = digests[start:start + 500]
                marks = ",".join("?" * len(batch))
                rows = self._db.execute(
                    f"SELECT key, probability, raw FROM scores WHERE key IN ({marks})", batch)
                found.update({key: CachedScore(p, raw) for key, p, raw in rows})
        except sqlite3.Error as exc:
            if not disk_fault(exc):
                raise _unusable(self.path, exc) from None
            self._turn_off(exc)
            return {}
        return found

    def put_many(self, entries: Iterable[tuple[ScoreKey, float, float | None]]) -> None:
        now = time.time()
        rows = [(k.digest, query_key(k.query), k.model_id, p, raw, now) for k, p, raw in entries]
        if not rows or self._db is None:
            return
        try:
            with self._db:
                self._db.execute("BEGIN IMMEDIATE")
                self._db.executemany(
                    "INSERT OR REPLACE INTO scores VALUES (?, ?, ?, ?, ?, ?)", rows)
        except sqlite3.OperationalError as exc:
            if disk_fault(exc):
                self._turn_off(exc)
            elif not (_locked(exc) or "readonly" in str(exc).replace("-", "").lower()):
                raise _unusable(self.path, exc) from None
            # a busy or read-only cache only costs speed next time
        except sqlite3.Error as exc:  # a malformed file: the user must hear of it
            raise _unusable(self.path, exc) from None

    def clear(self, query: str | None = None) -> int:
        """Delete every score, or those of one query; returns how many went."""
        db = self._live()
        try:
            with db:
                if query is None:
                    done = db.execute("DELETE FROM scores")
                else:
                    done = db.execute("DELETE FROM scores WHERE query_key = ?",
                                      (query_key(query),))
        except sqlite3.Error as exc:
            raise _unusable(self.path, exc) from None
        return done.rowcount

    def stats(self) -> CacheStats:
        db = self._live()
        try:
            entries, queries = db.execute(
                "SELECT COUNT(*), COUNT(DISTINCT query_key) FROM scores").fetchone()
            by_model = dict(db.execute(
                "SELECT model, COUNT(*) FROM scores GROUP BY model ORDER BY model").fetchall())
        except sqlite3.Error as exc:
            raise _unusable(self.path, exc) from None
        size = sum(p.stat().st_size for p in self.path.parent.glob(FILE_NAME + "*")
                   if p.is_file())
        return CacheStats(str(self.path), entries, queries, size, by_model)
