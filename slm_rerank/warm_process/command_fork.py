"""One command of the warm process, in a fork: the caller's folder, environment and streams,
the command line's own code, and the answer it leaves (exit code, stdout, stderr).

The handler (``server``) forks once per command; the fork takes the caller's environment
and folder, points fd 0 at /dev/null and fds 1 and 2 at memory files, wraps them in text
streams that say whether the caller's streams are terminals, and runs ``slm_rerank.cli.run``
as ``slm-rerank`` would. It ends as the interpreter ends a process (the threads waited
for, the exit functions run, the streams flushed) with the command's exit code. The
handler waits for it until the deadline, kills its process group past it, and reads the
memory files, each under its cap.
"""

from __future__ import annotations

import contextlib
import io
import os
import select
import signal
import sys
import time
from typing import Any

from slm_rerank.warm_process import wire


class _Tty(io.TextIOWrapper):
    """A text stream on a memory file that says whether the caller's stream is a terminal."""

    tty = False

    def isatty(self) -> bool:
        return self.tty


def apply(head: dict[str, Any]) -> None:
    """Take the caller's environment and folder (this fork's own)."""
    env = head["env"]
    if not isinstance(env, dict) or not all(isinstance(v, str) for v in env.values()):
        raise wire.WireError("a malformed environment")
    os.environ.clear()
    os.environ.update(env)
    os.chdir(head["cwd"])


def memory_file(name: str) -> int:
    if hasattr(os, "memfd_create"):
        return os.memfd_create(name)
    import tempfile

    return os.dup(tempfile.TemporaryFile().fileno())


def finish(pid: int, out_fd: int, err_fd: int, deadline: float) -> tuple[dict[str, Any],
                                                                         bytes, bytes]:
    """Wait for the command's fork until ``deadline`` at most; its exit code and outputs."""
    status = _wait(pid, deadline)
    if status is None:
        with contextlib.suppress(OSError):
            os.killpg(pid, signal.SIGKILL)
        return {"failed": "the command did not finish by its deadline"}, b"", b""
    if os.WIFSIGNALED(status):
        return ({"failed": f"the command was ended by signal {os.WTERMSIG(status)}"},
                b"", b"")
    out = _read_all(out_fd, wire.MAX_STDOUT_BYTES)
    err = _read_all(err_fd, wire.MAX_STDERR_BYTES)
    if out is None or err is None:
        return {"failed": "the output is larger than an answer may carry"}, b"", b""
    return {"exit": os.waitstatus_to_exitcode(status)}, out, err


def _wait(pid: int, deadline: float) -> int | None:
    """The fork's wait status, or None once ``deadline`` passed."""
    pidfd = None
    with contextlib.suppress(AttributeError, OSError):
        pidfd = os.pidfd_open(pid)  # type: ignore[attr-defined,unused-ignore]
    try:
        while True:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                return status
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            if pidfd is not None:
                select.select([pidfd], [], [], left)
            else:
                time.sleep(min(left, 0.002))
    finally:
        if pidfd is not None:
            os.close(pidfd)


def _read_all(fd: int, cap: int) -> bytes | None:
    size = os.fstat(fd).st_size
    if size > cap:
        return None
    return os.pread(fd, size, 0) if size else b""


def command(head: dict[str, Any], stdin: bytes, out_fd: int, err_fd: int) -> None:
    """In the command's fork: the caller's streams, then the command, as ``slm-rerank`` runs it."""
    os.setpgid(0, 0)  # its tools (rg, git) with it: killed together at the deadline
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.dup2(out_fd, 1)
    os.dup2(err_fd, 2)
    for fd in (devnull, out_fd, err_fd):
        os.close(fd)
    sys.stdin = io.TextIOWrapper(open(0, "rb", closefd=False))  # noqa: SIM115

    def stream(fd: int, tty: bool, codec: list[str]) -> _Tty:
        wrapper = _Tty(open(fd, "wb", closefd=False), encoding=codec[0],  # noqa: SIM115
                       errors=codec[1], line_buffering=tty)
        wrapper.tty = tty
        return wrapper

    sys.stdout = stream(1, bool(head["stdout_tty"]), head["stdout_codec"])
    sys.stderr = stream(2, bool(head["stderr_tty"]), head["stderr_codec"])
    sys.argv = ["slm-rerank", *head["args"]]
    if head["kind"] == "hook":
        from slm_rerank.hook import stdio

        stdio.given = stdio.GivenInput(stdin, bool(head["stdin_in_time"]),
                                       float(head["started"]))
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    os._exit(_exit_code(head["args"]))


def _exit_code(args: list[str]) -> int:
    """Run the command, then end as the interpreter ends a process: the exit code of its
    ``SystemExit`` (a message printed), a traceback for anything else, the threads waited
    for, the exit functions run, the streams flushed."""
    import atexit
    import threading

    from slm_rerank.cli import run

    code = 0
    try:
        run(list(args))
    except SystemExit as exc:
        if exc.code is None:
            code = 0
        elif isinstance(exc.code, int):
            code = exc.code
        else:
            print(exc.code, file=sys.stderr)
            code = 1
    except BaseException:  # noqa: BLE001 - as the interpreter reports it
        sys.excepthook(*sys.exc_info())
        code = 1
    with contextlib.suppress(BaseException):
        getattr(threading, "_shutdown")()  # noqa: B009 - what the interpreter calls at exit
    with contextlib.suppress(BaseException):
        atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(BaseException):
            stream.flush()
    return code
