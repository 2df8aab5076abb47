"""One command run inside the warm process's worker, and the worker put back as it was after.

The worker runs commands one after another in one process, so that what a command keeps in
memory (the chunk memory, the histories by HEAD) is there for the next. Everything else a
command may change is taken before it and put back after it, so that the next command
starts as a new process would: the folder, ``os.environ``, ``sys.argv``, the standard
streams (fds 0-2 and the ``sys`` objects), signal handlers, the signal mask and timers, the
umask, ``sys.path``, the exception hooks, the cyclic collector's thresholds, debug flags,
callbacks and saved garbage, the warnings filters (and their "once" memory), logging's
handlers and levels, and the module globals of ``slm_rerank`` and its plugins
that a command rebinds; the settings' once-per-process warnings are forgotten.

What cannot be put back ends the worker once the answer is sent (``Ran.keep`` False): a
thread the command started that is still running, a child process it left running, exit
functions it registered (run when it ends, as its own process would run them), a
``MemoryError``; and, checked once it has answered and the garbage it left is collected
(``settle``), a file descriptor it left open, objects it froze or unfroze (``gc.freeze``:
counting them walks every frozen object, a few ms, so not before the answer) or a
resident size over ``KEEP_RSS_BYTES``. The server then forks a fresh worker. Settings and
config files are read again by each command, as before: nothing here keeps them.
"""

from __future__ import annotations

import atexit
import contextlib
import gc
import io
import logging
import os
import signal
import sys
import threading
import warnings
from types import ModuleType
from typing import Any

from slm_rerank.memory_budget import resident_bytes
from slm_rerank.warm_process import wire

#: a worker over this resident size after a command ends once it has answered
KEEP_RSS_BYTES = 256 << 20
#: module name prefixes whose globals are put back after each command (the host, its plugins)
GUARDED_MODULES = ("slm_rerank",)
#: the collector's frozen objects as the worker last counted them (``note_frozen``; -1: not
#: counted, each snapshot counts them). Changed in place: ``_globals`` leaves it be.
FROZEN = [-1]


def note_frozen() -> None:
    """Count the frozen objects once the worker froze them (idle time), so that a command's
    snapshot need not."""
    FROZEN[0] = gc.get_freeze_count()


class Tty(io.TextIOWrapper):
    """A text stream on a memory file that says whether the caller's stream is a terminal."""

    tty = False

    def isatty(self) -> bool:
        return self.tty


def text_stream(fd: int, tty: bool, codec: list[str]) -> Tty:
    """``fd`` as the caller's stream: its encoding, its errors, line-buffered at a terminal
    (stderr always, as the interpreter has it)."""
    wrapper = Tty(open(fd, "wb", closefd=False), encoding=codec[0],  # noqa: SIM115
                  errors=codec[1], line_buffering=tty or fd == 2)
    wrapper.tty = tty
    return wrapper


def exit_code(args: list[str]) -> int:
    """Run the command line on ``args``; its exit code as the interpreter would make it
    (a ``SystemExit``'s code, its message printed; a traceback for anything else). A
    ``MemoryError`` is raised on."""
    from slm_rerank import cli

    try:
        cli.run(list(args))
    except SystemExit as exc:
        if exc.code is None:
            return 0
        if isinstance(exc.code, int):
            return exc.code
        print(exc.code, file=sys.stderr)
        return 1
    except MemoryError:
        raise
    except BaseException:  # noqa: BLE001 - as the interpreter reports it
        sys.excepthook(*sys.exc_info())
        return 1
    return 0


def _open_fds() -> set[int]:
    """The descriptors open now. The listing opens one of its own, closed when it returns:
    left in, its number would hide the first descriptor a command leaves open (it gets the
    lowest free number, the one the listing had)."""
    try:
        names = os.listdir("/proc/self/fd")
    except OSError:
        return set()
    return {int(name) for name in names if _is_open(int(name))}


def _is_open(fd: int) -> bool:
    try:
        os.fstat(fd)
    except OSError:
        return False
    return True


def set_environ(env: dict[str, str]) -> None:
    """Make ``os.environ`` hold exactly ``env``, changing only the variables that differ
    (clearing and filling it is an unsetenv and a putenv a variable, twice a command)."""
    current = os.environ
    for key in [key for key in current if key not in env]:
        del current[key]
    for key, value in env.items():
        if current.get(key) != value:
            current[key] = value


def _guarded() -> list[ModuleType]:
    return [module for name, module in list(sys.modules.items())
            if name.startswith(GUARDED_MODULES) and isinstance(module, ModuleType)]


class Snapshot:
    """The process state a command may change, taken before it runs (see the module)."""

    def __init__(self) -> None:
        self.cwd = os.getcwd()
        self.environ = dict(os.environ)
        self.argv = list(sys.argv)
        self.path = list(sys.path)
        self.streams = (sys.stdin, sys.stdout, sys.stderr)
        self.fds = [os.dup(fd) for fd in (0, 1, 2)]
        self.open_fds = _open_fds()
        self.signals: dict[int, Any] = {}
        for number in signal.valid_signals():
            with contextlib.suppress(ValueError, OSError):
                self.signals[number] = signal.getsignal(number)
        self.mask = signal.pthread_sigmask(signal.SIG_BLOCK, [])
        self.umask = os.umask(0o022)
        os.umask(self.umask)
        self.hooks = (sys.excepthook, sys.displayhook, sys.unraisablehook,
                      threading.excepthook)
        self.recursion = sys.getrecursionlimit()
        self.gc = (gc.get_threshold(), gc.get_debug(), list(gc.callbacks), len(gc.garbage),
                   FROZEN[0] if FROZEN[0] >= 0 else gc.get_freeze_count())
        self.warnings = (list(warnings.filters), warnings.showwarning)
        manager = logging.Logger.manager
        self.loggers = {name: (logger.level, list(logger.handlers), logger.propagate,
                               logger.disabled)
                        for name, logger in manager.loggerDict.items()
                        if isinstance(logger, logging.Logger)}
        self.root_logger = (logging.root.level, list(logging.root.handlers))
        self.logging_disable = manager.disable
        self.globals = {module: dict(vars(module)) for module in _guarded()}
        self.threads = set(threading.enumerate())

    def restore(self) -> list[str]:
        """Put it all back; what could not be put back (the worker should end)."""
        left: list[str] = []
        left += self._threads()
        left += self._children()
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        for fd, saved in zip((0, 1, 2), self.fds, strict=True):
            os.dup2(saved, fd)
            os.close(saved)
        sys.stdin, sys.stdout, sys.stderr = self.streams
        os.chdir(self.cwd)
        set_environ(self.environ)
        sys.argv[:] = self.argv
        sys.path[:] = self.path
        for number, handler in self.signals.items():
            if signal.getsignal(number) is not handler and handler is not None:
                with contextlib.suppress(ValueError, OSError, TypeError):
                    signal.signal(number, handler)
        signal.pthread_sigmask(signal.SIG_SETMASK, self.mask)
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.setitimer(signal.ITIMER_VIRTUAL, 0)
        signal.setitimer(signal.ITIMER_PROF, 0)
        os.umask(self.umask)
        (sys.excepthook, sys.displayhook, sys.unraisablehook,
         threading.excepthook) = self.hooks
        sys.setrecursionlimit(self.recursion)
        self._collector()
        warnings.filters[:] = self.warnings[0]  # type: ignore[index]
        warnings.showwarning = self.warnings[1]
        warnings._filters_mutated()  # type: ignore[attr-defined]  # "once" shows again
        self._logging()
        self._globals()
        return left

    def _collector(self) -> None:
        """The cyclic collector's settings back (its being on or off is the worker's)."""
        threshold, debug, callbacks, garbage, _ = self.gc
        gc.set_threshold(*threshold)
        gc.set_debug(debug)
        gc.callbacks[:] = callbacks
        del gc.garbage[garbage:]

    def frozen(self) -> list[str]:
        """A command that froze or unfroze objects cannot be put back (frozen objects may
        also be freed: fewer frozen is not the sign, more or none is)."""
        frozen = self.gc[4]
        now = gc.get_freeze_count()
        if now > frozen or (frozen and not now):
            return ["objects frozen or unfrozen (gc.freeze)"]
        FROZEN[0] = now if FROZEN[0] >= 0 else -1
        return []

    def leaked_fds(self) -> list[str]:
        """The descriptors the command left open (``restore`` first, and a collection: a
        file held only by garbage is closed by it)."""
        leaked = _open_fds() - self.open_fds
        return [f"{len(leaked)} file descriptor(s) left open"] if leaked else []

    def _threads(self) -> list[str]:
        """Wait for the command's non-daemon threads, as the interpreter does at exit."""
        for thread in set(threading.enumerate()) - self.threads:
            if not thread.daemon:
                thread.join()
        running = [t.name for t in set(threading.enumerate()) - self.threads if t.is_alive()]
        return [f"thread {name} still running" for name in running]

    def _children(self) -> list[str]:
        """Reap what the command's children left; one still running cannot be."""
        while True:
            try:
                pid, _ = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return []
            if pid == 0:
                return ["a child process still running"]

    def _logging(self) -> None:
        manager = logging.Logger.manager
        logging.root.setLevel(self.root_logger[0])
        logging.root.handlers[:] = self.root_logger[1]
        logging.disable(self.logging_disable)
        for name, logger in list(manager.loggerDict.items()):
            if not isinstance(logger, logging.Logger):
                continue
            level, handlers, propagate, disabled = self.loggers.get(
                name, (logging.NOTSET, [], True, False))
            logger.setLevel(level)
            logger.handlers[:] = handlers
            logger.propagate, logger.disabled = propagate, disabled

    def _globals(self) -> None:
        """A module global the command rebound is bound back (what it mutated in place, the
        caches, stays: that is what the worker is for)."""
        for module, saved in self.globals.items():
            now = vars(module)
            for name, value in saved.items():
                if now.get(name, _MISSING) is not value:
                    now[name] = value


_MISSING = object()


class Ran:
    """What one command left: its exit code and outputs (None: it failed as a whole), and
    whether the worker may run the next command."""

    __slots__ = ("err", "exit", "failed", "keep", "out", "why_not")

    def __init__(self) -> None:
        self.exit: int | None = None
        self.out = b""
        self.err = b""
        self.failed: str | None = None
        self.keep = True
        self.why_not: list[str] = []


def caller_umask(head: dict[str, Any]) -> int:
    """The caller's umask: the files a command creates (the usage log, cache entries) get
    the modes they would get in its own process."""
    mask = head.get("umask")
    if type(mask) is not int or not 0 <= mask <= 0o777:
        raise wire.WireError("a malformed umask")
    return mask


def apply(head: dict[str, Any]) -> None:
    """Take the caller's environment, umask and folder (a malformed request changes none)."""
    env = head["env"]
    if not isinstance(env, dict) or not all(isinstance(v, str) for v in env.values()):
        raise wire.WireError("a malformed environment")
    mask = caller_umask(head)
    set_environ(env)
    os.umask(mask)
    os.chdir(head["cwd"])


def answer_control(conn: Any, head: dict[str, Any], status: dict[str, Any],
                   server_pid: int, by: float) -> bool:
    """Answer a request that runs no command (``status``, ``stop``, another version's);
    False when ``head`` is a command. ``stop`` is answered before the server is told, so
    the answer leaves even from the worker, which the server ends as it stops."""
    kind = head.get("kind")
    if kind == "status":
        wire.send_json(conn, {"accepted": False, "reason": "status", **status}, by)
    elif kind == "stop":
        wire.send_json(conn, {"accepted": False, "reason": "stopping", "pid": server_pid}, by)
        os.kill(server_pid, signal.SIGTERM)
    elif head.get("format") != wire.FORMAT or kind not in ("search", "hook"):
        wire.send_json(conn, {"accepted": False, "reason": "not a request of this version"},
                       by)
    else:
        return False
    return True


def prepare(head: dict[str, Any]) -> Snapshot:
    """Take the snapshot, then the caller's environment, umask and folder (``apply``)."""
    snapshot = Snapshot()
    try:
        apply(head)
    except BaseException:
        snapshot.restore()
        raise
    return snapshot


def attach(head: dict[str, Any], stdin: bytes, out_fd: int, err_fd: int) -> None:
    """The caller's side of a command (in the worker, or in a fork): stdin empty, stdout and
    stderr on the memory files ``out_fd`` and ``err_fd`` (one file when the caller's are
    one), its argv, and what its command's side read of stdin."""
    from slm_rerank import piped
    from slm_rerank.hook import stdio

    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    os.dup2(out_fd, 1)
    os.dup2(out_fd if head.get("merged") else err_fd, 2)  # one stream: in the order written
    sys.stdin = io.TextIOWrapper(open(0, "rb", closefd=False))  # noqa: SIM115
    sys.stdout = text_stream(1, bool(head["stdout_tty"]), head["stdout_codec"])
    sys.stderr = text_stream(2, bool(head["stderr_tty"]), head["stderr_codec"])
    sys.argv = ["slm-rerank", *head["args"]]
    if head["kind"] == "search" and head.get("stdin_given"):
        piped.given = piped.Given(stdin, bool(head.get("stdin_silent")))
    if head["kind"] == "hook":
        stdio.given = stdio.GivenInput(stdin, bool(head["stdin_in_time"]),
                                       float(head["started"]))


def run(head: dict[str, Any], stdin: bytes, out_fd: int, err_fd: int) -> Ran:
    """Run the command of ``head`` in this process (after ``prepare``), its stdout and stderr
    on the memory files ``out_fd`` and ``err_fd``; ``finish`` puts the process back."""
    from slm_rerank import config

    ran = Ran()
    config._WARNED.clear()  # each command warns as a new process would
    try:
        attach(head, stdin, out_fd, err_fd)
        registered = atexit._ncallbacks()
        ran.exit = exit_code(head["args"])
        if atexit._ncallbacks() > registered:  # the command's process would run them now
            with contextlib.suppress(BaseException):
                atexit._run_exitfuncs()
            ran.keep = False  # the worker's own were run with them: a fresh one next
            ran.why_not.append("the command registered exit functions")
    except MemoryError:
        ran.exit, ran.failed, ran.keep = None, "the command ran out of memory", False
    return ran


def finish(snapshot: Snapshot, ran: Ran | None) -> bool:
    """Put back what ``snapshot`` took, before the command answers; whether this worker may
    run another command so far (the reasons it may not in ``ran.why_not``). ``settle``
    checks the rest once the command has answered."""
    from slm_rerank import config

    left = snapshot.restore()
    config._WARNED.clear()
    if ran is None:
        return not left
    ran.why_not += left
    ran.keep = ran.keep and not left
    return ran.keep


def settle(snapshot: Snapshot, ran: Ran | None) -> bool:
    """After the command has answered (and a garbage collection): whether it left no
    descriptor open, the frozen objects as they were, and the worker's resident size under
    KEEP_RSS_BYTES."""
    left = snapshot.leaked_fds() + snapshot.frozen()
    if resident_bytes() > KEEP_RSS_BYTES:
        left.append(f"resident size over {KEEP_RSS_BYTES >> 20} MiB")
    if ran is not None:
        ran.why_not += left
    return not left
