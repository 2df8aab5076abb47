"""What a command does to the managed server from outside: start it detached, report, stop.

``slm-rerank serve --background`` and ``--local`` start the supervisor as a detached
``python -m slm_rerank.llama`` and wait until it is ready; ``serve status`` and ``serve
stop`` read its files and signal only a process that is ours (``processes``).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from slm_rerank.errors import ServeError
from slm_rerank.llama.bundled import bundled_model, check_gguf, find_binary
from slm_rerank.llama.ports import check_bind, healthy, port_owner
from slm_rerank.llama.processes import (
    SUPERVISOR_MODULE,
    alive,
    clear_stale,
    describe,
    is_supervisor,
    kill_orphan,
    left_orphan,
    our_llama,
    running,
    supervisor_pid,
    wait_exited,
)
from slm_rerank.llama.state import (
    ServerState,
    clear_state,
    last_used,
    load_state,
    log_size,
    log_tail,
    open_log,
    open_state_file,
    pid_file,
    read_state,
    recorded_elsewhere,
    state_dir,
)
from slm_rerank.llama.supervisor import LOAD_SECONDS, PROGRESS_SECONDS, ServeOptions
from slm_rerank.safefile import flock_held

#: Seconds a start waits for another start of the same cache folder to finish.
START_LOCK_SECONDS = LOAD_SECONDS + 30


# --- starting it detached ------------------------------------------------------------------


@contextlib.contextmanager
def _start_lock(cache_dir: Path) -> Iterator[None]:
    """One start at a time per cache folder: two `--local` queries start one server.

    The wait is bounded: a start that holds the lock longer than any start can take is
    stuck, and this one says so instead of waiting with it.
    """
    folder = state_dir(cache_dir)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "start.lock"
    fd = open_state_file(path, os.O_RDWR | os.O_CREAT)  # never truncates: no O_TRUNC
    with flock_held(fd, START_LOCK_SECONDS, lambda: ServeError(
            f"another start has held {path} for over {START_LOCK_SECONDS:.0f} s; see "
            "slm-rerank serve status, or stop it with slm-rerank serve stop"), poll=0.1):
        yield


def start_background(options: ServeOptions, cache_dir: Path, argv: list[str],
                     say: Callable[[str], None]) -> ServerState:
    """Start ``slm-rerank serve ARGV`` detached and wait until it is ready (or failed)."""
    check_bind(options.host)
    with _start_lock(cache_dir):
        log = state_dir(cache_dir) / "server.log"
        current = running(cache_dir)
        if current is not None:
            say(f"already running: {current.url} (pid {current.pid}, {Path(current.model).name})")
            return current
        loading = supervisor_pid(cache_dir)
        if loading is not None:  # a foreground serve, or one whose starter gave up waiting
            say(f"a managed server is already starting (pid {loading}); waiting for it ...")
            return _wait_ready(cache_dir, loading, None, log, log_size(log), say)
        clear_stale(cache_dir)
        # Check now what the detached process would only write to its log.
        find_binary()
        check_gguf(options.model_file or bundled_model(cache_dir))
        owner = port_owner(options.host, options.port)
        if owner is not None:
            raise ServeError(f"port {options.port} on {options.host} is in use by {owner}; "
                             "pass --port N, or stop it")
        offset = log_size(log)
        out = open_log(log)
        try:
            process = subprocess.Popen(
                [sys.executable, "-m", SUPERVISOR_MODULE, *argv, "--log", str(log)],
                stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                start_new_session=True)
        finally:
            os.close(out)
        say(f"started in the background (pid {process.pid}); log: {log}; waiting for the "
            "model to load ...")
        return _wait_ready(cache_dir, process.pid, process, log, offset, say)


def _wait_ready(cache_dir: Path, pid: int, process: subprocess.Popen[bytes] | None,
                log: Path, offset: int, say: Callable[[str], None]) -> ServerState:
    """Wait for supervisor ``pid`` to record a server that answers; say so every 10 s."""
    started = time.monotonic()
    last_said = started
    while time.monotonic() - started < LOAD_SECONDS + 15:
        code = process.poll() if process is not None else None
        if code is not None or (process is None and supervisor_pid(cache_dir) != pid):
            status = f" (status {code})" if code is not None else ""
            raise ServeError(f"the server stopped while starting{status}; {log} ends: "
                             f"{log_tail(log, offset=offset)}")
        state = read_state(cache_dir)
        if state is not None and state.pid == pid and healthy(state.url):
            return state
        if time.monotonic() - last_said >= PROGRESS_SECONDS:
            say(f"still loading ({time.monotonic() - started:.0f} s); log: {log}")
            last_said = time.monotonic()
        time.sleep(0.2)
    if process is not None:
        process.terminate()
    raise ServeError(f"the server did not become ready in {LOAD_SECONDS:.0f} s; "
                     f"{log} ends: {log_tail(log, offset=offset)}")


# --- status and stop -----------------------------------------------------------------------


def _foreign_lock(cache_dir: Path) -> str | None:
    """A note if ``server.pid`` is locked but names no supervisor of ours (else None)."""
    found = pid_file(cache_dir)
    if found is None or not found.locked:
        return None
    path = state_dir(cache_dir) / "server.pid"
    elsewhere = recorded_elsewhere(found.cache_dir, cache_dir)
    if elsewhere is not None:  # a hard-linked copy: the original's supervisor holds it
        return (f"{path} is locked by pid {found.pid or '?'} for the cache folder "
                f"{elsewhere} (this folder's file is linked to that one's); that server is "
                "not this folder's and nothing was signalled")
    if found.pid is not None and is_supervisor(found.pid):
        return None
    if found.pid is None:
        return f"{path} is locked by a process but holds no pid; nothing was signalled"
    return (f"{path} is locked but names pid {describe(found.pid)}, which is not a "
            "slm-rerank serve supervisor; nothing was signalled")


def _elsewhere_note(state: ServerState, elsewhere: str) -> str:
    """What a record copied from another cache folder describes: that folder's server."""
    serving = (f"; its supervisor (pid {state.pid}) still runs, serving that folder"
               if is_supervisor(state.pid) else "")
    return (f"the record was written for the cache folder {elsewhere} (a copied or restored "
            f"cache), not this one: it describes that folder's server{serving}")


def _stale_note(state: ServerState) -> str:
    """Why the record's supervisor is not running: gone, or its pid now someone else's."""
    if is_supervisor(state.pid):
        return (f"the record names supervisor pid {describe(state.pid)}, a slm-rerank serve "
                "that does not hold this folder's server.pid: it serves another cache "
                "folder, and the record is stale here")
    if alive(state.pid):
        return (f"the record names supervisor pid {describe(state.pid)}, which is another "
                "process now, not slm-rerank serve (a reused pid): the record is stale and "
                "that process is not ours")
    return f"its supervisor (pid {state.pid}) is gone; the record is stale"


def status_text(cache_dir: Path) -> tuple[bool, str]:
    """(running, what to print) for ``slm-rerank serve status``.

    Raises ServeError if a file in the serve folder is a symlink, a FIFO or not a regular
    file: it names the file and says to remove it.
    """
    folder = state_dir(cache_dir)
    pid = supervisor_pid(cache_dir)
    state = load_state(cache_dir)
    if pid is None:
        foreign = _foreign_lock(cache_dir)
        note = f"; {foreign}" if foreign else ""
        if state is None:
            return False, f"not running (no managed server recorded in {folder}){note}"
        elsewhere = recorded_elsewhere(state.cache_dir, cache_dir)
        if elsewhere is not None:
            return False, (f"not running: {_elsewhere_note(state, elsewhere)} (in {folder}; "
                           f"slm-rerank serve stop removes the copy){note}")
        orphan = (f"; its llama-server (pid {state.server_pid}) still runs on {state.url}: "
                  "slm-rerank serve stop stops it" if left_orphan(state, cache_dir) else "")
        return False, f"not running: {_stale_note(state)} (in {folder}){orphan}{note}"
    if state is None or state.pid != pid:
        return False, (f"starting: pid {pid} is loading the model; log "
                       f"{folder / 'server.log'}")
    up = time.time() - state.started
    if not healthy(state.url):
        return False, (f"pid {state.pid} is alive but {state.url}/health does not answer "
                       f"ok; see {state.log or 'its output'}")
    used = last_used(cache_dir)
    last = f", last query {time.time() - used:.0f} s ago" if used is not None else ""
    idle = f", stops after {state.idle:g} s idle" if state.idle else ""
    return True, (f"running: {state.url} model {Path(state.model).name}, {state.slots} slots, "
                  f"pid {state.pid} (llama-server {state.server_pid}), up {up:.0f} s"
                  f"{last}{idle}" + (f"; log {state.log}" if state.log else ""))


def stop(cache_dir: Path, wait: float = 15.0) -> str:
    """Stop the managed server, loaded or still loading; says what it did.

    Signals only a process that holds ``server.pid`` and is a ``slm-rerank serve``
    supervisor. Raises ServeError if a file in the serve folder is not a regular file.
    """
    pid = supervisor_pid(cache_dir)
    if pid is None:
        state = load_state(cache_dir)
        stale = (_stale_note(state) if state is not None and not left_orphan(state, cache_dir)
                 and recorded_elsewhere(state.cache_dir, cache_dir) is None else None)
        foreign = _foreign_lock(cache_dir)
        cleared = clear_stale(cache_dir)
        if cleared and cleared.startswith("stopped"):
            return cleared
        said = [f"{cleared}: {stale}" if stale else cleared] if cleared else []
        said += [foreign] if foreign else []
        return f"not running ({'; '.join(said)})" if said else "not running"
    state = load_state(cache_dir)
    what = state.url if state is not None and state.pid == pid else "the server (still loading)"
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + wait
    while time.monotonic() < deadline:
        if supervisor_pid(cache_dir) != pid:
            wait_exited(pid)
            return f"stopped {what} (pid {pid})"
        time.sleep(0.1)
    if supervisor_pid(cache_dir) == pid:  # still the holder of server.pid: still ours
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    if state is not None and state.pid == pid and our_llama(state) \
            and recorded_elsewhere(state.cache_dir, cache_dir) is None:
        kill_orphan(state, wait=0)
    clear_state(cache_dir, pid)
    return f"killed {what} (pid {pid}): it did not stop within {wait:.0f} s"

