"""The warm process's worker: one long-lived process that runs commands one after another in
itself, so what a command keeps in memory (the chunk memory, the histories by HEAD) is
there for the next one.

The server forks the worker once it has imported everything, and hands it each connection
that arrives while it is idle, with two memory files for the command's stdout and stderr,
over a control socket (``SOCK_SEQPACKET``, the descriptors passed with ``SCM_RIGHTS``). The
worker reads the request, takes the caller's folder and environment (``isolation``), tells
the server the deadline it works to, acknowledges, runs the command, puts itself back as it
was, answers, and tells the server it is done (and whether it may run another). A
connection that arrives while it is busy is answered by a fork of the server, as before.

The server watches its worker: past the command's deadline, or over ``MAX_RSS_BYTES``
resident, it kills the worker's process group (the worker and the tools it started); a
worker that dies while serving (a crash, a signal) is answered for by the server with a
failure, so the caller runs the command in its own process; a command that ends the worker
with ``os._exit`` is answered with that exit code and what it wrote, as its own process
would be. Then the server forks a fresh worker.
"""

from __future__ import annotations

import contextlib
import gc
import itertools
import json
import os
import signal
import socket
import sys
import time
from typing import Any, NoReturn

from slm_rerank import idle_work, memory_budget
from slm_rerank.lexical.chunk_memory import CHUNK_MEMORY
from slm_rerank.warm_process import client, command_fork, isolation, wire

#: a worker over this resident size while it runs a command is killed (the caller falls back)
MAX_RSS_BYTES = 1 << 30
#: the longest control message (a status's figures, a deadline)
CONTROL_BYTES = 4096
#: prctl's option for the signal a process gets when its parent ends (linux/prctl.h)
PR_SET_PDEATHSIG = 1
#: after each command the young generations are collected (what the command made: 0.1 ms
#: on sympy); after every this many, everything (7-10 ms there: the kept chunks)
FULL_COLLECTION_EVERY = 16
#: idle work ends this long before the server's deadline for the command (seconds)
IDLE_MARGIN = 1.0
_commands = itertools.count(1)


class Worker:
    """The server's side of its worker: which command it serves, until when."""

    def __init__(self, pid: int, ctl: socket.socket) -> None:
        self.pid = pid
        self.ctl = ctl
        #: the caller being served (None: idle), and the memory files of its command
        self.conn: socket.socket | None = None
        self.fds: tuple[int, int] = (-1, -1)
        self.deadline = 0.0
        #: the worker said the deadline it works to (it acknowledges right after)
        self.acked = False
        #: the commands it ran (searches and hook runs, not status requests)
        self.commands = 0
        #: what the worker said it keeps for later commands (``idle_work.kept``)
        self.kept: dict[str, str] = {}

    @property
    def busy(self) -> bool:
        return self.conn is not None

    def hand(self, conn: socket.socket, status: dict[str, Any], request_seconds: float
             ) -> bool:
        """Give ``conn`` to the worker; False if it could not take it (the caller is then
        served by a fork)."""
        out_fd = command_fork.memory_file("stdout")
        err_fd = command_fork.memory_file("stderr")
        try:
            socket.send_fds(self.ctl, [json.dumps(status).encode()],
                            [conn.fileno(), out_fd, err_fd])
        except OSError:
            os.close(out_fd)
            os.close(err_fd)
            return False
        self.conn, self.fds, self.acked = conn, (out_fd, err_fd), False
        self.deadline = time.monotonic() + request_seconds + client.ACK_SECONDS
        return True

    def message(self) -> bool:
        """Read what the worker said; False when it closed its side (it is ending)."""
        try:
            raw = self.ctl.recv(CONTROL_BYTES)
        except ConnectionResetError:
            # a worker that ended with a message of the server's unread (a connection
            # handed as it died): Linux reports the reset once, ahead of what the worker
            # said before it ended, which is still to be read (that it took the command)
            try:
                raw = self.ctl.recv(CONTROL_BYTES)
            except OSError:
                return False
        except OSError:
            return False
        if not raw:
            return False
        said = json.loads(raw)
        if "deadline" in said:
            self.deadline, self.acked = float(said["deadline"]), True
        elif said.get("done"):
            self.commands += bool(said.get("ran"))
            kept = said.get("kept")
            if isinstance(kept, dict):
                self.kept = {str(k): str(v) for k, v in kept.items()}
            self.release()
        return True

    def release(self) -> None:
        if self.conn is not None:
            self.conn.close()
            self.conn = None
        for fd in self.fds:
            if fd >= 0:
                os.close(fd)
        self.fds = (-1, -1)

    def overdue(self) -> str | None:
        """Why the busy worker must be killed now, or None."""
        if not self.busy:
            return None
        if time.monotonic() > self.deadline:
            return "the command did not finish by its deadline"
        if memory_budget.resident_bytes(self.pid) > MAX_RSS_BYTES:
            return f"the command used more than {MAX_RSS_BYTES >> 20} MiB"
        return None

    def kill(self) -> None:
        with contextlib.suppress(OSError):
            os.killpg(self.pid, signal.SIGKILL)
        with contextlib.suppress(OSError):
            os.kill(self.pid, signal.SIGKILL)

    def ended(self, status: int | None, why: str | None) -> None:
        """The worker is gone (``status``: its wait status, None if unknown): answer the
        caller it was serving, from a fork, so the server's loop never waits on a caller."""
        self.ctl.close()
        if self.conn is None:
            return
        pid = os.fork()
        if pid == 0:
            with contextlib.suppress(BaseException):
                _answer_for(self.conn, self.fds, self.acked, self.deadline, status, why)
            os._exit(0)
        self.release()


def _answer_for(conn: socket.socket, fds: tuple[int, int], acked: bool, deadline: float,
                status: int | None, why: str | None) -> None:
    """In a fork of the server: the answer for a caller whose worker is gone."""
    by = max(deadline, time.monotonic()) + 1.0
    if status is not None and why is None and os.WIFEXITED(status):
        # the command ended the process itself (os._exit): what it left, as its own would
        if acked:
            answer = command_fork.read_answer(status, *fds)
            wire.send_json(conn, answer[0], by)
            if "exit" in answer[0]:
                wire.send_frame(conn, answer[1], by)
                wire.send_frame(conn, answer[2], by)
            return
        why = "the warm process's worker ended before it took the request"
    if why is None:
        why = (f"the command was ended by signal {os.WTERMSIG(status)}"
               if status is not None and os.WIFSIGNALED(status) else "the worker ended")
    reply = {"failed": why} if acked else {"accepted": False, "reason": why}
    wire.send_json(conn, reply, by)


def start(listening: socket.socket | None, server_pid: int, lock: int | None = None
          ) -> Worker:
    """Fork a worker from the server (``lock``: the server's lock file, not the worker's to
    hold: a worker left running would keep any new warm process from starting)."""
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    pid = os.fork()
    if pid == 0:
        ours.close()
        if listening is not None:
            listening.close()
        if lock is not None:
            os.close(lock)
        _die_with_server(server_pid)
        _serve(theirs, server_pid)
    theirs.close()
    return Worker(pid, ours)


def _die_with_server(server_pid: int) -> None:
    """Have the kernel kill this worker when its server ends (Linux): a server killed while
    the worker runs a command leaves nobody to hold the worker to the deadline and memory."""
    if not sys.platform.startswith("linux"):
        return
    import ctypes

    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != server_pid:  # it ended before that was set
        os._exit(1)


def _serve(ctl: socket.socket, server_pid: int) -> NoReturn:
    """The worker's loop: a request at a time, until the server closes its side."""
    code = 0
    try:
        os.setpgid(0, 0)  # the tools a command starts die with it at a deadline
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        from slm_rerank.host import keep_plugins

        keep_plugins()
        idle_work.accept()
        # what the worker keeps for its life (modules, plugins) is never scanned again by
        # the cyclic collector; each command runs with it off and collects once answered
        # (all it made is in the youngest generation then)
        gc.collect()
        gc.freeze()
        isolation.note_frozen()
        while True:
            try:
                raw, fds, _, _ = socket.recv_fds(ctl, CONTROL_BYTES, 3)
            except OSError:
                break
            if not raw or len(fds) != 3:
                break
            conn = socket.socket(fileno=fds[0])
            ran: list[bool] = []
            try:
                keep = _one(conn, json.loads(raw), ctl, fds[1], fds[2], server_pid, ran)
            except wire.WireError:  # the caller is gone or spoke wrongly: this worker is fine
                keep = True
            except BaseException:  # noqa: BLE001 - its caller falls back; a fresh worker next
                keep = False
            finally:
                conn.close()
                os.close(fds[1])
                os.close(fds[2])
            done = {"done": True, "keep": keep, "ran": bool(ran), "kept": idle_work.kept()}
            ctl.send(json.dumps(done).encode())  # idle_work bounds what is kept: < 3 KiB
            if not keep:
                break
    except BaseException:  # noqa: BLE001, S110 - the server forks another
        code = 1
    os._exit(code)


def _one(conn: socket.socket, status: dict[str, Any], ctl: socket.socket, out_fd: int,
         err_fd: int, server_pid: int, ran_one: list[bool]) -> bool:
    """Serve one connection; whether this worker may serve another (``ran_one`` holds True
    once it ran a command)."""
    by = time.monotonic() + 2.0
    head = wire.receive_json(conn, by)
    stdin = wire.receive_frame(conn, wire.MAX_STDIN_BYTES, by)
    if isolation.answer_control(conn, head, status, server_pid, by):
        return True
    try:
        snapshot = isolation.prepare(head)
    except OSError as exc:  # its folder is gone (or unreadable): this worker is fine
        wire.send_json(conn, {"accepted": False, "reason": f"cannot enter the command's "
                                                           f"folder {head.get('cwd')!r} "
                                                           f"({exc.strerror or exc})"}, by)
        return True
    ran: list[isolation.Ran] = []
    deadline: list[float] = []
    gc.disable()  # the command runs without the cyclic collector: one collection after it
    try:
        keep = _command(conn, head, stdin, ctl, (out_fd, err_fd), snapshot, by, ran_one, ran,
                        deadline)
    finally:
        gc.enable()  # once answered; what its garbage held (files) is released first
        gc.collect(2 if next(_commands) % FULL_COLLECTION_EVERY == 0 else 1)
    keep = isolation.settle(snapshot, ran[0] if ran else None) and keep
    _idle_work(keep, deadline)
    idle_work.note_kept("the chunk memory", CHUNK_MEMORY.summary() if len(CHUNK_MEMORY) else "")
    return keep


def _idle_work(keep: bool, deadline: list[float]) -> None:
    """What the command asked to have done once answered (``idle_work``), within the time
    left before the server's deadline for it (it kills the worker there)."""
    if not keep or not deadline:
        idle_work.drop_pending()
        return
    now = time.monotonic()  # the caller's clock, which the deadline is on: one per boot
    by = min(now + idle_work.IDLE_SECONDS, deadline[0] - IDLE_MARGIN)
    if by <= now:
        idle_work.drop_pending()
        return
    if idle_work.run_pending(by):
        # what it built lives as long as the worker: kept out of every later collection
        gc.collect()
        gc.freeze()
        isolation.note_frozen()
    kept = memory_budget.keep_within(by)
    idle_work.note_kept("its memory within a budget", _budget_line(kept) if kept.found else "")


def _budget_line(kept: memory_budget.Kept) -> str:
    """What ``warm status`` says of the last command's budget check."""
    mib = 1 << 20
    budget = memory_budget.BUDGET_BYTES
    line = (f"{kept.left / mib:.1f} MiB resident after the last command (budget "
            f"{budget // mib} MiB between commands)")
    if kept.steps:
        line += f"; it was {kept.found / mib:.1f} MiB and let go of " + ", ".join(kept.steps)
    if kept.left > budget:
        line += "; still over it: what else it keeps (a word index) is not let go"
    return line


def _command(conn: socket.socket, head: dict[str, Any], stdin: bytes, ctl: socket.socket,
             fds: tuple[int, int], snapshot: isolation.Snapshot, by: float,
             ran_one: list[bool], done: list[isolation.Ran], deadline: list[float]) -> bool:
    """Run the command of ``head`` and answer it; whether the worker may keep going so far
    (``done`` holds what it left, ``deadline`` the server's for it, on the monotonic clock;
    ``by``: the acknowledgement's deadline)."""
    out_fd, err_fd = fds
    ran: isolation.Ran | None = None
    try:
        started = float(head["started"])
        seconds = command_fork.deadline_seconds(head, stdin)
        deadline.append(started + seconds + client.ANSWER_GRACE)
        ctl.send(json.dumps({"deadline": deadline[0]}).encode())
        wire.send_json(conn, {"accepted": True, "deadline": seconds}, by)
        ran_one.append(True)
        ran = isolation.run(head, stdin, out_fd, err_fd)
        done.append(ran)
    finally:
        keep = isolation.finish(snapshot, ran)
    answer_by = started + seconds + 1.0
    try:
        if ran.failed is not None:
            wire.send_json(conn, {"failed": ran.failed}, answer_by)
            return keep
        answer = command_fork.read_answer(0, out_fd, err_fd, code=ran.exit)
        wire.send_json(conn, answer[0], answer_by)
        if "exit" in answer[0]:
            wire.send_frame(conn, answer[1], answer_by)
            wire.send_frame(conn, answer[2], answer_by)
    except wire.WireError:  # the caller is gone: the command ran, the worker is checked
        pass
    return keep
