"""One command of the warm process, in a fork: the caller's folder, environment and streams,
the command line's own code, and the answer it leaves (exit code, stdout, stderr).

A command arriving while the worker (``worker``) is busy runs here. The handler
(``server``) forks once per such command; the fork takes the caller's environment
and folder, points fd 0 at /dev/null and fds 1 and 2 at memory files, wraps them in text
streams that say whether the caller's streams are terminals, and runs ``slm_rerank.cli.run``
as ``slm-rerank`` would. It ends as the interpreter ends a process (the threads waited
for, the exit functions run, the streams flushed) with the command's exit code. The
handler waits for it until the deadline, kills its process group past it, and reads the
memory files, each under its cap.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import sys
import time
from typing import Any

from slm_rerank.warm_process import isolation, wire


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
    return read_answer(status, out_fd, err_fd)


def read_answer(status: int, out_fd: int, err_fd: int, code: int | None = None
                ) -> tuple[dict[str, Any], bytes, bytes]:
    """The answer a command left: its exit code (``code``, else from the wait ``status``)
    and the memory files' bytes, or why there is none."""
    if code is None and os.WIFSIGNALED(status):
        return ({"failed": f"the command was ended by signal {os.WTERMSIG(status)}"},
                b"", b"")
    out = _read_all(out_fd, wire.MAX_STDOUT_BYTES)
    err = _read_all(err_fd, wire.MAX_STDERR_BYTES)
    if out is None or err is None:
        return {"failed": "the output is larger than an answer may carry"}, b"", b""
    return {"exit": os.waitstatus_to_exitcode(status) if code is None else code}, out, err


def deadline_seconds(head: dict[str, Any], stdin: bytes) -> float:
    """The deadline the command of ``head`` works to, counted from when its caller started:
    the hook's own (read in the caller's folder and environment), a search's
    ``client.SEARCH_DEADLINE``."""
    from slm_rerank.warm_process import client

    if head["kind"] != "hook":
        return client.SEARCH_DEADLINE
    from slm_rerank.hook.claude import run_deadline

    return run_deadline(client.deadline_option(head["args"]), stdin)


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
    isolation.attach(head, stdin, out_fd, err_fd)
    for fd in (out_fd, err_fd):
        os.close(fd)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    os._exit(_exit_code(head["args"]))


def _exit_code(args: list[str]) -> int:
    """Run the command, then end as the interpreter ends a process: the threads waited
    for, the exit functions run, the streams flushed."""
    import atexit
    import threading

    try:
        code = isolation.exit_code(args)
    except MemoryError:
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
