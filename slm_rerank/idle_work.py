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

#: given its deadline; may return one line saying what it keeps for later commands
IdleTask = Callable[[float], "str | None"]

#: what idle work says it keeps for later commands (the line a task returns), shown by
#: ``warm status``: at most this many names, each line cut to this length
MAX_KEPT_NAMES = 8
MAX_KEPT_CHARS = 300

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
        return False
    if len(_pending) < MAX_PENDING:
        _pending.append((name, task))
    return True


def _keeps(name: str, what: str) -> None:
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
            _keeps(name, said)
    return ran
