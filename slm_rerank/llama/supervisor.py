"""The supervisor: runs llama-server as its child and stops it when it is no longer wanted.

It holds ``server.pid`` locked for its life (one per cache folder), starts llama-server,
waits for ``/health``, records the server in ``server.json``, and then watches: when the
child exits it reports why and exits; when ``idle`` seconds pass with no query
(``last-used`` untouched and no slot busy) it stops the child and exits; SIGTERM and SIGINT
stop both. It runs in the foreground (``slm-rerank serve``) or detached (``__main__``).

Standard library only: this runs in the detached supervisor, and ``--fast`` never imports it.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from slm_rerank.errors import ServeError
from slm_rerank.llama.bundled import bundled_model, check_gguf, find_binary
from slm_rerank.llama.ports import base_url, busy, check_bind, healthy, port_owner
from slm_rerank.llama.processes import clear_stale, supervisor_pid
from slm_rerank.llama.state import (
    ServerState,
    clear_state,
    folder_id,
    last_used,
    log_size,
    log_tail,
    open_log,
    open_state_file,
    pid_file_bytes,
    state_dir,
    touch,
    write_state,
)

#: In the discovery range (8033-8040), so queries find the server by their usual scan.
DEFAULT_PORT = 8035
DEFAULT_HOST = "127.0.0.1"
#: Reranking prompts are short (a chunk of at most prompt_chars, a query, an instruction):
#: 2048 tokens a slot holds them with room to spare.
CONTEXT_PER_SLOT = 2048

#: Slots of the managed server unless --slots says otherwise. The binary it runs is a CPU
#: build, and on a CPU a second slot adds no throughput (prompt processing already uses
#: every core: 22.6 prompt tokens a second with one request in flight, 22.7 with two, on
#: the judge), while each slot reads a query's shared prefix (the instruction and the
#: query) once: with one, every prompt after a query's first takes it from the cache (80 %
#: of a whole issue's prompt tokens, against 54 % with two slots). docs/benchmarks.md,
#: "The judge's token budget".
DEFAULT_SLOTS = 1

#: Seconds a start may take to load the model before it is given up.
LOAD_SECONDS = 180.0
#: How often a wait for the model to load says it is still waiting.
PROGRESS_SECONDS = 10.0


@dataclass(frozen=True)
class ServeOptions:
    """How to run the managed server."""

    model_file: Path | None = None
    host: str = DEFAULT_HOST
    port: int = DEFAULT_PORT
    slots: int = 0  # 0: DEFAULT_SLOTS
    idle: float = 0.0  # 0: never stop for idleness

    def slot_count(self) -> int:
        return self.slots or DEFAULT_SLOTS


# --- the supervisor ------------------------------------------------------------------------


@contextlib.contextmanager
def _supervisor_lock(cache_dir: Path) -> Iterator[None]:
    """Hold ``server.pid`` for this supervisor's life: one supervisor per cache folder.

    The lock, not the number, says a supervisor lives: the kernel drops it when the process
    dies (SIGKILL included), while a pid outlives its process and is handed to others.
    """
    path = state_dir(cache_dir) / "server.pid"
    fd = open_state_file(path, os.O_RDWR | os.O_CREAT)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            other = supervisor_pid(cache_dir)
            raise ServeError(f"a managed server already runs for {cache_dir} (pid "
                             f"{other or '?'} in {path}); see slm-rerank serve status, stop "
                             "it with slm-rerank serve stop, or use another cache_dir") from None
        os.ftruncate(fd, 0)
        os.write(fd, pid_file_bytes(os.getpid(), cache_dir))
        try:
            yield
        finally:
            os.ftruncate(fd, 0)  # no number left behind for someone to kill
    finally:
        os.close(fd)


def _command(binary: Path, model: Path, options: ServeOptions) -> list[str]:
    """llama-server's command line. ``--swa-full``: Gemma 3 (the bundled model) attends to
    a sliding window in most layers, and llama.cpp then keeps too little of a slot's cache
    to reuse a prompt's prefix: every prompt of a query read the instruction and the query
    again (``timings.cache_n`` 0 of 126 tokens; 118 with the flag). A model without a
    sliding window (the Qwen judge) is not changed by it."""
    slots = options.slot_count()
    return [str(binary), "-m", model.name, "--host", options.host, "--port", str(options.port),
            "--parallel", str(slots), "--ctx-size", str(slots * CONTEXT_PER_SLOT),
            "--swa-full"]


def _child_setup() -> Callable[[], None] | None:
    """Linux: llama-server gets SIGTERM when its supervisor dies, even by SIGKILL.

    Without it a killed supervisor leaves llama-server holding the port and the model's
    memory with nothing to stop it for idleness. Elsewhere stop and the next start find it
    by its record (``clear_stale``).
    """
    if not sys.platform.startswith("linux"):
        return None
    try:
        import ctypes

        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None

    def die_with_parent() -> None:
        prctl(1, int(signal.SIGTERM))  # PR_SET_PDEATHSIG

    return die_with_parent


def serve_foreground(options: ServeOptions, cache_dir: Path, say: Callable[[str], None],
                     log: Path | None = None) -> int:
    """Run llama-server under this process until it exits, idles out or is signalled."""
    check_bind(options.host)
    binary = find_binary()
    model = options.model_file or bundled_model(cache_dir)
    check_gguf(model)
    model = model.resolve()  # -m names the file in its own folder
    state_dir(cache_dir).mkdir(parents=True, exist_ok=True)
    stopping: list[str] = []

    def on_signal(signum: int, frame: object) -> None:
        stopping.append(signal.Signals(signum).name)

    with _supervisor_lock(cache_dir):
        clear_stale(cache_dir)
        owner = port_owner(options.host, options.port)
        if owner is not None:
            raise ServeError(f"port {options.port} on {options.host} is in use by {owner}; "
                             "pass --port N, or stop it (slm-rerank serve stop, if it is ours)")
        url = base_url(options.host, options.port)
        log = log or state_dir(cache_dir) / "server.log"
        # Set before the child exists: a SIGTERM while it starts must stop it too.
        previous = {s: signal.signal(s, on_signal) for s in (signal.SIGTERM, signal.SIGINT)}
        try:
            offset = log_size(log)  # an error quotes this start's lines, not older ones
            out = open_log(log)  # llama-server's own chatter goes to the log
            try:
                child = subprocess.Popen(_command(binary, model, options), cwd=model.parent,
                                         stdin=subprocess.DEVNULL, stdout=out,
                                         stderr=subprocess.STDOUT, preexec_fn=_child_setup())
            finally:
                os.close(out)
            try:
                return _supervise(child, options, cache_dir, say, url, model, stopping, log,
                                  offset)
            finally:
                if child.poll() is None:
                    child.terminate()
                    try:
                        child.wait(timeout=10)
                    except subprocess.TimeoutExpired:
                        child.kill()
                        child.wait()
                clear_state(cache_dir, os.getpid())
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)


def _supervise(child: subprocess.Popen[bytes], options: ServeOptions, cache_dir: Path,
               say: Callable[[str], None], url: str, model: Path, stopping: list[str],
               log: Path, offset: int = 0) -> int:
    say(f"starting llama-server on {url} with {model} ({options.slot_count()} slots); "
        "waiting for /health ...")
    started = time.monotonic()
    last_said = started
    while not healthy(url):
        if stopping:
            say(f"stopped by {stopping[0]} while loading")
            return 0
        code = child.poll()
        if code is not None:
            tail = log_tail(log, offset=offset)
            raise ServeError(f"llama-server exited with status {code} while loading "
                             f"{model}; {log} ends: {tail}")
        if time.monotonic() - started > LOAD_SECONDS:
            raise ServeError(f"llama-server did not answer {url}/health within "
                             f"{LOAD_SECONDS:.0f} s of starting")
        if time.monotonic() - last_said > PROGRESS_SECONDS:
            say(f"still waiting for {url}/health ({time.monotonic() - started:.0f} s)")
            last_said = time.monotonic()
        time.sleep(0.2)
    state = ServerState(pid=os.getpid(), server_pid=child.pid, url=url, host=options.host,
                        port=options.port, model=str(model), slots=options.slot_count(),
                        started=time.time(), idle=options.idle, log=str(log),
                        cache_dir=folder_id(cache_dir))
    write_state(cache_dir, state)
    touch(cache_dir)
    idle_note = f"; stops after {options.idle:g} s without a query" if options.idle else ""
    say(f"ready: {url} ({model.name}){idle_note}")
    while True:
        if stopping:
            say(f"stopping ({stopping[0]})")
            return 0
        code = child.poll()
        if code is not None:
            say(f"llama-server exited with status {code}")
            return 1
        if options.idle:
            used = last_used(cache_dir) or state.started
            if busy(url):
                touch(cache_dir)
            elif time.time() - used > options.idle:
                say(f"no query for {options.idle:g} s: stopping")
                return 0
        time.sleep(min(1.0, options.idle / 4) if options.idle else 1.0)


