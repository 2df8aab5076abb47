"""Work a long-lived process does once a command has been answered (issue 30).

A plugin asks for it with ``plugin_kit.when_idle(task)``: the warm process's worker runs
``task(by)`` after the command's answer has gone out and the worker was put back as it
was, before it takes the next command (meanwhile another caller is served by a fork, as
when the worker is busy). ``by`` is a ``time.monotonic()`` deadline the task must keep:
``IDLE_SECONDS`` at most, and never past the command's own deadline, where the server
kills the worker. Any other process (a command in its own process, the API, the MCP
server) does not accept idle work: ``when_idle`` returns False and the task never runs.
"""

from __future__ import annotations

import time
from collections.abc import Callable

#: the longest the worker spends on idle work after one command
IDLE_SECONDS = 5.0
#: tasks kept per command: one per source and tree is all a search asks for
MAX_PENDING = 4

IdleTask = Callable[[float], None]

_accepting: list[bool] = [False]
_pending: list[IdleTask] = []


def accept() -> None:
    """This process runs idle work (the warm process's worker calls it once)."""
    _accepting[0] = True


def when_idle(task: IdleTask) -> bool:
    """Run ``task(by)`` once this process is idle; False if it never will be."""
    if not _accepting[0]:
        return False
    if len(_pending) < MAX_PENDING:
        _pending.append(task)
    return True


def drop_pending() -> None:
    _pending.clear()


def run_pending(by: float) -> int:
    """Run the tasks asked for, each given ``by``; how many ran. A task's failure is its own:
    what it would have built is simply not there, and the next command works as before."""
    tasks = list(_pending)
    _pending.clear()
    ran = 0
    for task in tasks:
        if time.monotonic() >= by:
            break
        try:
            task(by)
        except Exception:  # noqa: BLE001, S112 - idle work only ever speeds a later command
            continue
        ran += 1
    return ran
