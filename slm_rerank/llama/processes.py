"""Which processes are the managed server's, and cleaning up after a dead supervisor.

A pid in a file outlives its process and the number is handed to the next one, so a pid is
taken for ours only when its command line says so; nothing else is reported or signalled.
A server is also this cache folder's only when its files were written for this folder
(``state.recorded_elsewhere``): a copied or restored cache folder holds the original's
records, whose supervisor and llama-server may well be alive, serving the original.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from pathlib import Path

from slm_rerank.errors import ServeError
from slm_rerank.llama.ports import healthy, listening
from slm_rerank.llama.state import (
    ServerState,
    clear_state,
    pid_file,
    read_state,
    recorded_elsewhere,
)

#: What ``serve --background`` runs detached: ``python -m slm_rerank.llama`` (its
#: ``__main__``). A supervisor is known by this word in its command line, so the spawn
#: (``control.start_background``) and the recognition share it.
SUPERVISOR_MODULE = "slm_rerank.llama"
#: What installs before the ``llama/`` package spawned (``python -m slm_rerank.serve``).
#: A supervisor started by such an install lives on through an upgrade (a ``--local``
#: server idles for 15 minutes, a ``serve --background`` one may never stop): ``serve
#: status`` and ``serve stop`` must still know it, and a start must not run a second one.
OLD_SUPERVISOR_MODULE = "slm_rerank.serve"


# --- a process's command line --------------------------------------------------------------


#: The most of a process's command line read: enough for any arguments we look for.
ARGS_CAP = 1 << 16


def command_line(pid: int) -> list[str] | None:
    """Process ``pid``'s arguments; None if it is gone or a zombie."""
    if Path("/proc/self/cmdline").exists():
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as handle:
                raw = handle.read(ARGS_CAP)
        except OSError:
            return None
        words = raw.decode("utf-8", "replace").split("\0")
        return [w for w in words if w] or None
    try:  # no /proc (macOS): ps says the same, spaces and all
        done = subprocess.run(["ps", "-o", "args=", "-p", str(pid)], capture_output=True,
                              text=True, timeout=5)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout.split() or None


def _args(pid: int) -> str | None:
    """Process ``pid``'s command line as one string; None if it is gone or a zombie."""
    argv = command_line(pid)
    return " ".join(argv) if argv else None


def is_supervisor(pid: int) -> bool:
    """True if ``pid`` is a ``slm-rerank serve`` supervisor (detached or in the foreground).

    A pid in a file outlives its process, and the number is handed to the next one: only a
    process whose arguments are ours is taken for a supervisor, reported or signalled.
    """
    if pid == os.getpid():
        return True  # serve_foreground called in this very process
    argv = command_line(pid)
    if argv is None:
        return False
    if SUPERVISOR_MODULE in argv or OLD_SUPERVISOR_MODULE in argv:
        return True
    names = {os.path.basename(word) for word in argv[:3]}
    return bool(names & {"slm-rerank", "slm_rerank"}) and "serve" in argv


def describe(pid: int) -> str:
    """``pid (its command line)`` for a message, the command line cut short and printable."""
    args = _args(pid) or "?"
    args = "".join(c if c.isprintable() else "?" for c in args)
    return f"{pid} ({args[:80]}{'...' if len(args) > 80 else ''})"


def alive(pid: int) -> bool:
    """True if ``pid`` is a process (a zombie counts as gone)."""
    if Path("/proc/self/cmdline").exists():
        return command_line(pid) is not None
    return _signalable(pid)


def _signalable(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


# --- the supervisor and llama-server a record names ----------------------------------------


def supervisor_pid(cache_dir: Path) -> int | None:
    """The pid of the living supervisor of this cache folder's server (None: none lives).

    A locked ``server.pid`` whose number is not a ``slm-rerank serve`` process (a file
    someone else locked, a number someone wrote) names no supervisor: it is never signalled.
    Nor does one written for another cache folder (a hard-linked copy shares the lock).
    Raises ServeError if ``server.pid`` is a symlink, a FIFO or another non-regular file.
    """
    found = pid_file(cache_dir)
    if found is None or not found.locked or found.pid is None:
        return None
    if recorded_elsewhere(found.cache_dir, cache_dir) is not None:
        return None
    return found.pid if is_supervisor(found.pid) else None


def our_llama(state: ServerState) -> bool:
    """True while ``state.server_pid`` is still the llama-server started for ``state``.

    A recorded pid may by now belong to anyone; only a process listening where the record
    says (its own arguments) is signalled.
    """
    args = _args(state.server_pid)
    return args is not None and f" --host {state.host} --port {state.port} " in f" {args} "


def left_orphan(state: ServerState, cache_dir: Path) -> bool:
    """True if ``state`` is this cache folder's record and its llama-server still runs with
    no supervisor (one killed where llama-server does not die with it): ours to stop.

    Not when the record was written for another cache folder (a copy's), nor while the
    supervisor it names lives: that llama-server is its child, serving its own folder.
    """
    return (recorded_elsewhere(state.cache_dir, cache_dir) is None
            and not is_supervisor(state.pid) and our_llama(state))


def kill_orphan(state: ServerState, wait: float = 10.0) -> None:
    """Stop the llama-server a dead supervisor left, and wait until it has let go the port."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(state.server_pid, signal.SIGTERM)
    deadline = time.monotonic() + wait
    while our_llama(state):
        if time.monotonic() > deadline:
            with contextlib.suppress(ProcessLookupError):
                os.kill(state.server_pid, signal.SIGKILL)
            break
        time.sleep(0.1)
    # An exiting process loses its arguments (its memory) before its sockets: the port can
    # still accept, and then reset, a connection after the loop above ends (a start then
    # called its own port "in use by a program that does not answer HTTP").
    while listening(state.host, state.port) and time.monotonic() < deadline:
        time.sleep(0.05)


def clear_stale(cache_dir: Path) -> str | None:
    """Drop a record its supervisor outlived, stopping the llama-server it left; say what.

    A record copied from another cache folder is dropped and its processes left alone.
    """
    state = read_state(cache_dir)
    if state is None or supervisor_pid(cache_dir) == state.pid:
        return None
    orphaned = left_orphan(state, cache_dir)
    clear_state(cache_dir, state.pid)
    if orphaned:
        kill_orphan(state)
        return f"stopped llama-server (pid {state.server_pid}) left by a dead supervisor"
    elsewhere = recorded_elsewhere(state.cache_dir, cache_dir)
    if elsewhere is not None:
        return (f"removed a record copied from the cache folder {elsewhere}; its server "
                "was not signalled")
    return "removed a stale record"


def running(cache_dir: Path) -> ServerState | None:
    """The managed server if its supervisor lives and it answers /health.

    None as well when a file in the serve folder is unsafe to open (a symlink, a FIFO):
    a query then finds no managed server, and ``serve status`` names the file.
    """
    state = read_state(cache_dir)
    if state is None:
        return None
    try:
        if supervisor_pid(cache_dir) != state.pid:
            return None
    except ServeError:
        return None
    return state if healthy(state.url) else None


# --- waiting for a stopped process ---------------------------------------------------------


def wait_exited(pid: int, wait: float = 5.0) -> None:
    """Wait until ``pid``, which has let go of ``server.pid``, is gone from the process table.

    It drops the lock a moment before it exits, and its parent (often init) reaps it later:
    a script that runs ``serve stop`` and then checks the pid should find it gone.
    """
    deadline = time.monotonic() + wait
    while time.monotonic() < deadline and not _reaped(pid):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.05)


def _reaped(pid: int) -> bool:
    """Reap ``pid`` if it is our own exited child (a zombie still answers kill 0)."""
    try:
        done, _ = os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        return False
    return done == pid
