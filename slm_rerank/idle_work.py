"""Work a long-lived process does once a command has been answered (issue 30).

A plugin asks for it with ``plugin_kit.when_idle(task)``. Two kinds of process run it:

- the warm process's worker runs ``task(by)`` after the command's answer has gone out and
  the worker was put back as it was, before it takes the next command (meanwhile another
  caller is served by a fork, as when the worker is busy). ``by`` is a ``time.monotonic()``
  deadline the task must keep: ``IDLE_SECONDS`` at most, and never past the command's own
  deadline, where the server kills the worker.
- the MCP server and a process calling the Python API again (``run_in_background``) run
  it in a daemon thread of their own, in windows of ``WINDOW_SECONDS`` (``by`` is the
  window's end), only while no call is running: each call (``calling``) waits for the
  window under way to end, and no window starts until every call has ended. A task that
  returns ``Unfinished`` is run again in the next window, until it has had
  ``IDLE_SECONDS`` of windows in all; the thread ends when nothing is left to run.

Any other process (a command in its own process, a one-shot script) does not accept idle
work: ``when_idle`` returns False and the task never runs.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Callable, Iterator

#: the longest the worker spends on idle work after one command
IDLE_SECONDS = 5.0
#: tasks kept per command: one per source and tree is all a search asks for
MAX_PENDING = 4

#: given its deadline; may return one line saying what it keeps for later commands
IdleTask = Callable[[float], "str | None"]

#: what idle work says it keeps for later commands (the line a task returns), shown by
#: ``warm status``: at most this many names, each line cut to this length
MAX_KEPT_NAMES = 8
MAX_KEPT_CHARS = 300

#: one window of idle work in the background thread: a call arriving meanwhile waits for
#: it to end (and for the file a task is reading then: ``by`` is checked between files)
WINDOW_SECONDS = 0.005
#: "0": the MCP server and the Python API run no idle work (no thread; the user's choice)
IDLE_THREAD_ENV = "SLM_RERANK_IDLE_THREAD"
#: the thread's name (``threading.enumerate`` shows it while it runs)
THREAD_NAME = "slm-rerank-idle-work"


class Unfinished(str):
    """What a task returns when ``by`` came before it was done: the line it keeps so far.
    In the background thread it is run again in the next window (its ``IDLE_SECONDS``
    allowing); the worker's next command asks for it again instead."""

    __slots__ = ()


_accepting: list[bool] = [False]
_pending: list[tuple[str, IdleTask]] = []
_kept: dict[str, str] = {}


def accept() -> None:
    """This process runs idle work (the warm process's worker calls it once)."""
    _accepting[0] = True


def when_idle(task: IdleTask, name: str = "") -> bool:
    """Run ``task(by)`` once this process is idle; False if it never will be. A line the
    task returns is what ``name`` keeps for later commands, shown by ``warm status``."""
    if not _accepting[0]:
        background = _background[0]
        return background is not None and background.add(name, task)
    if len(_pending) < MAX_PENDING:
        _pending.append((name, task))
    return True


def note_kept(name: str, what: str) -> None:
    """Say what ``name`` keeps now, for ``warm status`` (an empty ``what``: nothing)."""
    name = name[:MAX_KEPT_CHARS // 4]
    if not what:
        _kept.pop(name, None)
    elif name in _kept or len(_kept) < MAX_KEPT_NAMES:
        _kept[name] = what[:MAX_KEPT_CHARS]


def kept() -> dict[str, str]:
    """name -> what the idle work of that name last said it keeps (for ``warm status``)."""
    return dict(_kept)


def drop_pending() -> None:
    _pending.clear()


def run_pending(by: float) -> int:
    """Run the tasks asked for, each given ``by``; how many ran. A task's failure is its own:
    what it would have built is simply not there, and the next command works as before."""
    tasks = list(_pending)
    _pending.clear()
    ran = 0
    for name, task in tasks:
        if time.monotonic() >= by:
            break
        try:
            said = task(by)
        except Exception:  # noqa: BLE001, S112 - idle work only ever speeds a later command
            continue
        ran += 1
        if name and isinstance(said, str):
            note_kept(name, said)
    return ran


class _Queued:
    """A task the background thread runs, and the window time it may still take."""

    __slots__ = ("left", "name", "task")

    def __init__(self, name: str, task: IdleTask) -> None:
        self.name = name
        self.task = task
        self.left = IDLE_SECONDS


class _Background:
    """Idle work in a thread, between the calls of a long-lived process."""

    def __init__(self) -> None:
        self.cond = threading.Condition()
        #: calls running or waiting for the window to end: no window starts meanwhile
        self.calls = 0
        #: a window is running (a call waits for it to end)
        self.window = False
        self.queue: list[_Queued] = []
        self.thread: threading.Thread | None = None

    def add(self, name: str, task: IdleTask) -> bool:
        with self.cond:
            if name and any(queued.name == name for queued in self.queue):
                return True  # already asked for: the one queued keeps what it has done
            if len(self.queue) >= MAX_PENDING:
                return True  # as in the worker: the tasks past the bound are not run
            if self.thread is None:
                thread = threading.Thread(target=self.run, daemon=True, name=THREAD_NAME)
                try:
                    thread.start()
                except RuntimeError:  # the interpreter is exiting: nothing to build for
                    return False
                self.thread = thread
            self.queue.append(_Queued(name, task))
            self.cond.notify_all()
        return True

    @contextlib.contextmanager
    def call(self) -> Iterator[None]:
        with self.cond:
            self.calls += 1
            while self.window:  # at most one window (and the file being read then)
                self.cond.wait()
        try:
            yield
        finally:
            with self.cond:
                self.calls -= 1
                self.cond.notify_all()

    def run(self) -> None:
        while True:
            with self.cond:
                while self.calls and self.queue:
                    self.cond.wait()
                if not self.queue:
                    self.thread = None
                    return
                queued = self.queue.pop(0)
                self.window = True
            said: object = None
            started = time.monotonic()
            try:
                said = queued.task(started + min(WINDOW_SECONDS, queued.left))
            except Exception:  # noqa: BLE001 - idle work only ever speeds a later call
                said = None
            finally:
                spent = time.monotonic() - started
                with self.cond:
                    self.window = False
                    queued.left -= spent
                    if isinstance(said, Unfinished) and queued.left > 0:
                        self.queue.append(queued)  # after any other task: each has its turn
                    self.cond.notify_all()
            if queued.name and isinstance(said, str):
                note_kept(queued.name, said)
            time.sleep(0)  # another thread (a call arriving) may take the interpreter

    def stop(self, seconds: float) -> None:
        with self.cond:
            self.queue.clear()
            thread = self.thread
        if thread is not None:
            thread.join(seconds)


#: the background thread's state, once this process runs idle work in the background
_background: list[_Background | None] = [None]


def _forget_in_child() -> None:
    """A fork has no idle-work thread (only the thread that forked goes on in it), and a
    window under way in the parent would hold its calls for ever: it starts without."""
    _background[0] = None


os.register_at_fork(after_in_child=_forget_in_child)


def run_in_background() -> bool:
    """Run idle work in a thread of this long-lived process, between its calls (the MCP
    server; the Python API from its second call). False, and nothing changes, in the warm
    process's worker (which runs idle work itself) or when ``$SLM_RERANK_IDLE_THREAD`` is
    ``0``."""
    if _accepting[0] or os.environ.get(IDLE_THREAD_ENV, "").strip() == "0":
        return False
    if _background[0] is None:
        _background[0] = _Background()
    return True


def calling() -> contextlib.AbstractContextManager[None]:
    """Held by each call of a process that runs idle work in the background: the call waits
    for the window under way to end (``WINDOW_SECONDS``, and the file a task is reading
    then), and no window starts until it has ended. Elsewhere it does nothing."""
    background = _background[0]
    return contextlib.nullcontext() if background is None else background.call()


def stop_background(seconds: float = 5.0) -> None:
    """Run no more idle work in the background: what is queued is dropped and the window
    under way ends (waited for at most ``seconds``). Tests; a process that wants its CPU."""
    background = _background[0]
    _background[0] = None
    if background is not None:
        background.stop(seconds)
