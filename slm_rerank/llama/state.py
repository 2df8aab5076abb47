"""The managed server's files in ``<cache>/serve/``, opened only as regular files.

``server.pid`` holds the supervising process's pid and its cache folder, locked while it
lives (a pid in an unlocked file is stale, whoever holds that number now); ``server.json``
records the running server (port, model, the llama-server pid, start time, idle timeout,
the cache folder; written once it answers); ``server.log`` holds both processes' output;
``last-used`` is touched by every query that uses the server, for the idle stop;
``start.lock`` is held by a start under way.
The locks are taken where they are held: ``supervisor`` (``server.pid``) and ``control``
(``start.lock``).

Both files name the cache folder they were written for (``folder_id``): a cache folder
copied or restored elsewhere brings them along, and the server they describe is the
original folder's, alive perhaps, never the copy's to report as its own or to stop.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import stat
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path

from slm_rerank import safefile
from slm_rerank.errors import ServeError


@dataclass
class ServerState:
    """What ``server.json`` records about a running managed server."""

    pid: int
    server_pid: int
    url: str
    host: str
    port: int
    model: str
    slots: int
    started: float
    idle: float
    log: str
    #: ``folder_id`` of the cache folder whose supervisor wrote it ("": written by a version
    #: that did not say, taken for the folder it is found in)
    cache_dir: str = ""


def folder_id(cache_dir: Path) -> str:
    """What ``server.json`` and ``server.pid`` record of their cache folder: its real path."""
    return os.path.realpath(cache_dir)


def recorded_elsewhere(recorded: str | None, cache_dir: Path) -> str | None:
    """The other cache folder a record was written for (None: this one, or it does not say).
    A copied or restored cache folder holds its original's records."""
    if not recorded or recorded == folder_id(cache_dir):
        return None
    return recorded


# --- files ---------------------------------------------------------------------------------
#
# Every file in ``<cache>/serve/`` is opened through ``open_state_file``: a symlink there
# would make a write land in its target (a pid written over someone's file) and a FIFO would
# block the open or the read for ever. Anything but a regular file is refused by name.

#: The most of a state file ever read: a pid, a small JSON record, the log's last lines.
STATE_READ_CAP = 1 << 16


def state_dir(cache_dir: Path) -> Path:
    return cache_dir / "serve"


def _refused(path: Path, what: str) -> ServeError:
    return ServeError(f"refusing {path}: it is {what}, not a regular file; slm-rerank keeps "
                      f"only its own files in {path.parent}; remove it (rm {path}) and retry")


def open_state_file(path: Path, flags: int, mode: int = 0o644) -> int:
    """A descriptor on the regular file ``path``; never through a symlink, never blocking.

    ``safefile.open_regular`` does the opening; a refusal becomes a ServeError.
    """
    try:
        return safefile.open_regular(path, flags, mode)
    except safefile.NotRegularFile as exc:
        raise _refused(path, exc.what) from None


def _read_state_file(path: Path, cap: int = STATE_READ_CAP) -> bytes | None:
    """At most ``cap`` bytes of ``path`` (None: it does not exist); ServeError if unsafe."""
    try:
        fd = open_state_file(path, os.O_RDONLY)
    except FileNotFoundError:
        return None
    try:
        return os.read(fd, cap)
    finally:
        os.close(fd)


def load_state(cache_dir: Path) -> ServerState | None:
    """``server.json``, or None if it is missing or not one we wrote (pids are signalled).

    Raises ServeError if ``server.json`` is a symlink, a FIFO or another non-regular file.
    """
    try:
        raw = _read_state_file(state_dir(cache_dir) / "server.json")
    except OSError:
        return None
    if raw is None:
        return None
    try:
        state = ServerState(**json.loads(raw))
    except (ValueError, TypeError, RecursionError):
        return None
    ints = (state.pid, state.server_pid, state.port, state.slots)
    # pid 0 or -1 given to os.kill signals a whole process group or every process.
    if not all(type(n) is int and n > 0 for n in ints) or not all(
            isinstance(v, str) for v in (state.url, state.host, state.model, state.log,
                                         state.cache_dir)):
        return None
    if not all(isinstance(v, (int, float)) for v in (state.started, state.idle)):
        return None
    return state


def read_state(cache_dir: Path) -> ServerState | None:
    """``server.json``, or None if it is missing, unsafe to open, or not one we wrote."""
    try:
        return load_state(cache_dir)
    except ServeError:
        return None


def write_state(cache_dir: Path, state: ServerState) -> None:
    """Write ``server.json`` whole: a fresh temp file (O_EXCL, an unguessable name) renamed
    over it, so that a symlink at either name is replaced, never written through."""
    folder = state_dir(cache_dir)
    fd, tmp = tempfile.mkstemp(prefix="server.json.", suffix=".tmp", dir=folder)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(json.dumps(asdict(state), indent=1))
        os.replace(tmp, folder / "server.json")
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def clear_state(cache_dir: Path, pid: int) -> None:
    """Remove ``server.json`` if it still describes supervisor ``pid`` (or is unreadable).

    Unlinking removes a symlink itself, never its target.
    """
    state = read_state(cache_dir)
    if state is None or state.pid == pid:
        with contextlib.suppress(OSError):
            (state_dir(cache_dir) / "server.json").unlink()


# --- server.pid and last-used --------------------------------------------------------------


@dataclass(frozen=True)
class PidFile:
    """What ``server.pid`` says: whether a process holds its lock, the number in it, and
    the cache folder it was written for (None: an older supervisor's, which did not say)."""

    locked: bool
    pid: int | None
    cache_dir: str | None = None


def pid_file_bytes(pid: int, cache_dir: Path) -> bytes:
    """What a supervisor writes in ``server.pid``: its pid, then its cache folder (the
    file system's bytes of it: any name a folder may have is written and read back)."""
    return f"{pid}\n".encode() + os.fsencode(folder_id(cache_dir)) + b"\n"


def pid_file(cache_dir: Path) -> PidFile | None:
    """``server.pid`` as found (None: there is none); ServeError if it is not a regular file."""
    try:
        fd = open_state_file(state_dir(cache_dir) / "server.pid", os.O_RDONLY)
    except FileNotFoundError:
        return None
    except OSError:
        return PidFile(False, None)
    try:
        head, _, rest = os.read(fd, STATE_READ_CAP).partition(b"\n")
        text = head.decode("ascii", "replace").strip()
        pid = int(text) if text.isdigit() and int(text) > 0 else None
        folder = os.fsdecode(rest.removesuffix(b"\n")) if rest.strip() else None
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return PidFile(True, pid, folder)
        except OSError:
            return PidFile(False, pid, folder)
        fcntl.flock(fd, fcntl.LOCK_UN)  # we got it: nobody holds it
        return PidFile(False, pid, folder)
    finally:
        os.close(fd)


def touch(cache_dir: Path) -> None:
    """Mark the managed server as used now (its idle clock restarts).

    Best effort, and never blocking: a query must not fail or wait because of this file.
    """
    with contextlib.suppress(OSError, ServeError):
        fd = open_state_file(state_dir(cache_dir) / "last-used", os.O_WRONLY | os.O_CREAT)
        try:
            os.utime(fd)
        finally:
            os.close(fd)


def last_used(cache_dir: Path) -> float | None:
    """When ``last-used`` was touched (None: missing, or not a regular file of ours)."""
    try:
        info = os.lstat(state_dir(cache_dir) / "last-used")
    except OSError:
        return None
    return info.st_mtime if stat.S_ISREG(info.st_mode) else None


# --- the log -------------------------------------------------------------------------------


def log_tail(path: Path, lines: int = 6, offset: int = 0) -> str:
    """The log's last lines from ``offset`` on one line (errors are one line), ``|`` between.

    Reads at most the log's last STATE_READ_CAP bytes, however long it has grown.
    """
    try:
        fd = open_state_file(path, os.O_RDONLY)
    except (OSError, ServeError):
        return "(no log)"
    try:
        size = os.fstat(fd).st_size
        os.lseek(fd, max(offset, size - STATE_READ_CAP), os.SEEK_SET)
        text = os.read(fd, STATE_READ_CAP).decode("utf-8", "replace")
    except OSError:
        return "(no log)"
    finally:
        os.close(fd)
    kept = [line.strip()[:300] for line in text.splitlines() if line.strip()][-lines:]
    return " | ".join(kept) or "(empty)"


def log_size(path: Path) -> int:
    try:
        return os.lstat(path).st_size
    except OSError:
        return 0


def open_log(path: Path) -> int:
    """``server.log`` for appending: a descriptor both processes write (never a symlink)."""
    try:
        return open_state_file(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    except OSError as exc:
        raise ServeError(f"cannot open the log {path}: {exc.strerror or exc}") from None
