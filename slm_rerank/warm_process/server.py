"""The warm process: answers ``--fast`` searches and hook runs for the commands that ask it.

Started by a command (``client.start``) as ``python -m slm_rerank.warm_process.server
SOCKET``; it imports what a search and the hook run, loads the plugins, then listens on
its user-only socket. Each connection is checked (the peer's user id, ``SO_PEERCRED``: any
other user is refused) and handed to the worker (``worker``: one long-lived fork that runs
commands one after another in itself, so their in-memory caches last, each isolated from
the next by ``isolation``) when it is idle. One that arrives while the worker is busy goes
to a forked handler, which forks again to run the command (``command_fork``), with the
caller's folder, environment, arguments and stdin, its stdout and stderr going to memory
files; it waits for it until the deadline, and sends back the exit code and both outputs.
Either way settings and config files are read again by every command as a new process
would read them, and a command that crashes, hangs or exits ends only its own process (the
worker, which the server then forks again, or the fork).

It stops itself when idle (``warm_process_idle``), when the user turns it off
(``warm_process`` in the user's config), when what is installed changes (a plugin
installed, removed or upgraded: ``plugin_listing.installed_key``), or when its socket is
removed or taken over; ``slm-rerank warm stop`` asks it to stop.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import select
import signal
import socket
import struct
import sys
import time
from typing import Any

from slm_rerank import memory_budget
from slm_rerank.warm_process import client, command_fork, isolation, wire, worker

#: concurrent commands; a request past them runs in the caller's process
MAX_RUNNING = 4
#: how often an idle warm process looks whether its socket is still its own
CHECK_SECONDS = 5.0
#: how long a connected caller may take to send its request
REQUEST_SECONDS = 2.0
#: how often a busy worker's deadline and memory are looked at
WATCH_SECONDS = 0.02


def _preload() -> None:
    """Import what a ``--fast`` search and the hook run, and load the plugins, once: one
    search of a scratch folder (its cache folder scratch too), then what it left forgotten."""
    import tempfile
    import threading
    from pathlib import Path

    import click  # noqa: F401

    import slm_rerank.cli.commands  # noqa: F401
    import slm_rerank.cli.hook  # noqa: F401
    import slm_rerank.cli.search  # noqa: F401
    import slm_rerank.hook.claude  # noqa: F401
    import slm_rerank.hook.vocabulary  # noqa: F401
    import slm_rerank.lexical.why  # noqa: F401
    from slm_rerank import config
    from slm_rerank.api import search
    from slm_rerank.host import Host
    from slm_rerank.plugin_listing import cache_listing

    cache_listing()
    saved = dict(os.environ)
    with tempfile.TemporaryDirectory(prefix="slm-rerank-warm-") as scratch:
        root = Path(scratch) / "tree"
        root.mkdir()
        (root / "warm.py").write_text("def warm_up():\n    return 'warm'\n")
        try:
            # the plugins' listing from the user's cache folder, as a command reads it: kept
            # in the process (``plugin_listing``), the scratch search below reads no
            # distribution's metadata, whose modules took 1.9 MiB of every worker
            Host.from_environment(start=root, flags={"usage_log": False}).registry  # noqa: B018
            os.environ["SLM_RERANK_CACHE_DIR"] = str(Path(scratch) / "cache")
            host = Host.from_environment(start=root, flags={"usage_log": False})
            host.registry.formatters()
            search("warm up", root, fast=True, host=host)
        except Exception:  # noqa: BLE001, S110 - a broken config: each command says so itself
            pass
        finally:
            os.environ.clear()
            os.environ.update(saved)
    config._WARNED.clear()  # each command warns as a new process would
    if threading.active_count() > 1:
        time.sleep(0.1)  # the search's pool winding down, before the first fork


def _code_stamp() -> tuple[str, float]:
    """What is installed, and when this package's modules last changed."""
    from slm_rerank.plugin_listing import installed_key

    package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    newest = 0.0
    for folder, _, names in os.walk(package):
        for name in names:
            if name.endswith(".py"):
                with contextlib.suppress(OSError):
                    newest = max(newest, os.stat(os.path.join(folder, name)).st_mtime)
    return installed_key(), newest


def _peer_uid(conn: socket.socket) -> int | None:
    try:
        raw = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    except (OSError, AttributeError):
        return None
    _, uid, _ = struct.unpack("3i", raw)
    return int(uid)


def _refuse(conn: socket.socket, reason: str) -> None:
    with contextlib.suppress(wire.WireError, OSError):
        # the request is read first: a caller still sending would see a broken pipe instead
        by = time.monotonic() + REQUEST_SECONDS
        wire.receive_json(conn, by)
        wire.receive_frame(conn, wire.MAX_STDIN_BYTES, by)
        wire.send_json(conn, {"accepted": False, "reason": reason}, by)
    conn.close()


class Server:
    """The listening process (see the module's docstring)."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.pid = os.getpid()
        self.sock: socket.socket | None = None
        self.inode: int | None = None
        self.running: set[int] = set()
        self.served = 0
        self.started = time.time()
        self.stamp: tuple[str, float] | None = None
        self.worker: worker.Worker | None = None
        #: the lock file's descriptor (held while this process serves the socket)
        self.lock: int | None = None
        #: workers started so far (a fresh one after each that ended)
        self.workers = 0

    def listen(self) -> None:
        old = os.umask(0o077)
        try:
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.path)  # under the lock: no other warm process owns it
            sock.bind(self.path)
        finally:
            os.umask(old)
        os.chmod(self.path, 0o600)
        sock.listen(16)
        self.sock = sock
        self.inode = os.lstat(self.path).st_ino

    def still_ours(self) -> bool:
        try:
            return os.lstat(self.path).st_ino == self.inode
        except OSError:
            return False

    def remove(self) -> None:
        if os.getpid() == self.pid and self.still_ours():
            with contextlib.suppress(OSError):
                os.unlink(self.path)

    def reap(self) -> None:
        self.watch_worker()
        for pid in list(self.running):
            with contextlib.suppress(ChildProcessError):
                done, _ = os.waitpid(pid, os.WNOHANG)
                if not done:
                    continue
            self.running.discard(pid)

    def watch_worker(self) -> None:
        """Kill a worker past its command's deadline or memory; answer for one that ended;
        fork a fresh one."""
        w = self.worker
        if w is None:
            return
        why = w.overdue()
        if why is not None:
            w.kill()
        try:
            done, status = os.waitpid(w.pid, 0 if why is not None else os.WNOHANG)
        except ChildProcessError:
            done, status = w.pid, None
        if not done:
            return
        while w.busy and w.message():  # what it said before it ended (done: nothing owed)
            pass
        w.ended(status, why)
        self.worker = None
        self.start_worker()

    def start_worker(self) -> None:
        self.worker = worker.start(self.sock, self.pid, self.lock)
        self.workers += 1

    def stop_worker(self) -> None:
        if self.worker is not None and os.getpid() == self.pid:
            self.worker.kill()
            with contextlib.suppress(ChildProcessError):
                os.waitpid(self.worker.pid, 0)
            self.worker = None

    def serve(self) -> None:
        from slm_rerank.warm_process.switch import user_switch

        assert self.sock is not None
        last = time.monotonic()
        while True:
            self.reap()
            switch = user_switch()
            idle_left = switch.idle_seconds - (time.monotonic() - last)
            if not switch.on or not self.still_ours():
                return
            busy = self.worker is not None and self.worker.busy
            if idle_left <= 0 and not self.running and not busy:
                return
            wait = min(CHECK_SECONDS, idle_left) if idle_left > 0 else 0.2
            if busy:
                wait = min(wait, WATCH_SECONDS)
            watched = [self.sock] + ([self.worker.ctl] if self.worker is not None else [])
            ready, _, _ = select.select(watched, [], [], max(0.01, wait))
            if self.worker is not None and self.worker.ctl in ready:
                self.worker.message()
            if self.sock not in ready:
                continue
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            if _peer_uid(conn) != os.getuid():
                conn.close()  # another user's process: never served, never answered
                continue
            last = time.monotonic()
            if not self.accept(conn, user_switch().on):  # as it is now, not before the wait
                return

    def accept(self, conn: socket.socket, on: bool) -> bool:
        """Hand ``conn`` to a handler; False when this process should stop."""
        if not on:
            _refuse(conn, "the warm process is turned off")
            return False
        if self.stamp != _code_stamp():
            _refuse(conn, "what is installed changed since the warm process started; it "
                          "stops, and the next command starts a new one")
            return False
        if len(self.running) >= MAX_RUNNING:
            _refuse(conn, f"{MAX_RUNNING} commands are running in it already")
            return True
        self.served += 1
        if self.worker is not None and not self.worker.busy and self.worker.hand(
                conn, _status(self), REQUEST_SECONDS):
            return True
        pid = os.fork()
        if pid == 0:
            assert self.sock is not None
            self.sock.close()
            if self.lock is not None:
                os.close(self.lock)
            if self.worker is not None:  # the worker's caller is not this fork's to hold
                self.worker.ctl.close()
                self.worker.release()
            _handle(conn, self)  # ends this fork (or, in the command's fork, returns its code)
        conn.close()
        self.running.add(pid)
        return True


def _status(server: Server) -> dict[str, Any]:
    w = server.worker
    return {"pid": server.pid, "served": server.served, "since": server.started,
            "running": len(server.running) + (w is not None and w.busy),
            "worker": None if w is None else w.pid,
            "worker_commands": 0 if w is None else w.commands, "workers": server.workers,
            "worker_keeps": {} if w is None else w.kept}


def _handle(conn: socket.socket, server: Server) -> None:
    """In the handler's fork: read the request, acknowledge, run it in a fork, answer."""
    try:
        by = time.monotonic() + REQUEST_SECONDS
        head = wire.receive_json(conn, by)
        stdin = wire.receive_frame(conn, wire.MAX_STDIN_BYTES, by)
        if isolation.answer_control(conn, head, _status(server), server.pid, by):
            os._exit(0)
        isolation.apply(head)  # this fork's own
        out_fd, err_fd = command_fork.memory_file("stdout"), command_fork.memory_file("stderr")
        pid = os.fork()
        if pid == 0:
            conn.close()
            command_fork.command(head, stdin, out_fd, err_fd)  # never returns
        started = float(head["started"])
        # after the fork: reading the settings here warns (once per process) in this
        # process only, and the command warns as it would on its own
        seconds = command_fork.deadline_seconds(head, stdin)
        wire.send_json(conn, {"accepted": True, "deadline": seconds}, by)
        answer = command_fork.finish(pid, out_fd, err_fd,
                                     started + seconds + client.ANSWER_GRACE)
        answer_by = started + seconds + 1.0
        wire.send_json(conn, answer[0], answer_by)
        if "exit" in answer[0]:
            wire.send_frame(conn, answer[1], answer_by)
            wire.send_frame(conn, answer[2], answer_by)
    except BaseException:  # noqa: BLE001, S110 - the caller falls back; this fork just ends
        pass
    os._exit(0)


def main() -> None:
    """``python -m slm_rerank.warm_process.server SOCKET``: one warm process per socket."""
    path = sys.argv[1]
    folder = os.path.dirname(path)
    try:
        client.check_folder(folder, create=True)
        lock = os.open(path + ".lock", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except (OSError, client.Refused):
        return  # another warm process has the socket (or is starting), or the folder is unsafe
    from slm_rerank.warm_process.switch import user_switch

    if not user_switch().on:
        return
    server = Server(path)
    server.lock = lock
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    try:
        memory_budget.fix_heap_thresholds()  # before anything is loaded; the worker inherits it
        _preload()
        server.stamp = _code_stamp()
        server.listen()
        server.start_worker()
        server.serve()
    finally:
        server.stop_worker()
        server.remove()


if __name__ == "__main__":
    main()
