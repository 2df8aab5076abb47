"""The prompt hook's standard streams: stdin read within the deadline, stderr one line.

Claude Code writes the hook's JSON object on stdin and closes the pipe; a caller that left
it open held the prompt for 30 s against a 5 s deadline, because the hook read until the
pipe closed. ``read_stdin`` stops at a complete JSON value, ``cap`` bytes or the deadline.

The hook says at most one line on stderr; a repository's file with four refused keys
printed a warning for each. ``held_stderr`` holds back whatever is written to stderr while
the hook works (fd 2 itself points elsewhere: this process, its threads and the tools it
starts), and ``say_one_line`` makes the one line from the hook's problem or the first line
held back.

Standard library only (and ``plain_json``), and no click: the hook imports as little as it
can.
"""

from __future__ import annotations

import contextlib
import math
import os
import sys
import time

from slm_rerank import plain_json

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterator, Mapping

#: default time the hook may take from reading stdin to printing, in seconds
DEFAULT_DEADLINE = 5.0
DEADLINE_ENV = "SLM_RERANK_HOOK_DEADLINE"
#: Bytes read from stdin at a time while waiting for the JSON object.
READ_STEP = 1 << 16
#: The most of the held-back stderr read: only its first line is ever said.
MAX_HELD_BYTES = 1 << 16
#: The longest line said on stderr, before the count of lines held back.
MAX_LINE_CHARS = 300


def deadline_from(option: str | None, environ: Mapping[str, str],
                  configured: float | None = None) -> float:
    """The deadline in seconds: the option, else $SLM_RERANK_HOOK_DEADLINE, else the
    ``hook_deadline`` setting, else 5 s.

    A value that is not a positive finite number falls back to the default: a typo in a
    hook's environment must not cost the user's prompt.
    """
    for value in (option, environ.get(DEADLINE_ENV)):
        if value is None or value == "":
            continue
        try:
            seconds = float(value)
        except ValueError:
            continue
        if math.isfinite(seconds) and seconds > 0:
            return seconds
    return configured if configured is not None else DEFAULT_DEADLINE


class GivenInput:
    """Stdin as another process already read it (the warm process's caller, ``warm_process``).

    A plain class: the warm process's caller reads stdin before anything heavy is imported,
    ``dataclasses`` included.
    """

    __slots__ = ("data", "in_time", "started", "warm_process")

    def __init__(self, data: bytes, in_time: bool, started: float) -> None:
        self.data = data
        #: whether it was complete before the deadline
        self.in_time = in_time
        #: ``time.monotonic()`` when the hook started, in the caller's process (the same clock)
        self.started = started
        #: why the warm process did not answer and the hook runs in its own process (None:
        #: it was not asked, or it answered); the usage log's record says it
        self.warm_process: str | None = None


#: set by ``warm_process``: the hook reads this instead of stdin, and counts its deadline
#: from when the caller started
given: GivenInput | None = None


def started_at() -> float:
    """When the hook started: now, or when the caller that read stdin for it started."""
    return given.started if given is not None else time.monotonic()


def complete(data: bytes | bytearray) -> bool:
    """True once ``data`` holds a whole JSON value (what may follow it is not waited for)."""
    if not data.rstrip().endswith((b"}", b"]")):  # an object or array ends so; skip the parse
        return False
    try:
        plain_json.raw_decode(data.decode("utf-8", errors="replace").lstrip())
    except RecursionError:  # nested past any prompt: the parse says so, not a longer wait
        return True
    except ValueError:
        return False
    return True


def read_input(fd: int, seconds: float, cap: int) -> tuple[bytes, bool]:
    """What ``fd`` holds until it ends, holds a complete JSON value, or ``cap`` bytes:
    ``(data, True)``; ``(data so far, False)`` if ``seconds`` passed first."""
    import select

    deadline = time.monotonic() + seconds
    data = bytearray()
    while len(data) < cap:
        left = deadline - time.monotonic()
        try:
            ready = left > 0 and bool(select.select([fd], [], [], left)[0])
        except (OSError, ValueError):  # not a descriptor select takes: read it as it is
            ready = True
        if not ready:
            return bytes(data), False
        try:
            chunk = os.read(fd, min(READ_STEP, cap - len(data)))
        except BlockingIOError:
            continue
        except OSError:
            break
        if not chunk:
            break
        data += chunk
        if complete(data):
            break
    return bytes(data), True


def read_stdin(seconds: float, cap: int) -> tuple[bytes, bool]:
    """``read_input`` on this process's stdin (none, or closed: nothing, in time), or what
    the caller read for it (``given``)."""
    if given is not None:
        return given.data, given.in_time
    try:
        fd = sys.stdin.fileno() if sys.stdin is not None else None
    except (OSError, ValueError):
        fd = None
    return read_input(fd, seconds, cap) if fd is not None else (b"", True)


@contextlib.contextmanager
def held_stderr() -> Iterator[list[str]]:
    """Hold back what is written to stderr meanwhile; the list yielded holds its non-blank
    lines once the block ends (empty if fd 2 could not be moved: nothing was held)."""
    held: list[str] = []
    try:
        sys.stderr.flush()
        saved = os.dup(2)
    except (OSError, ValueError, AttributeError):  # no stderr: nothing to hold or to say
        yield held
        return
    try:
        import tempfile  # here: the warm process's caller reads stdin without it

        with tempfile.TemporaryFile() as spool:
            os.dup2(spool.fileno(), 2)
            try:
                yield held
            finally:
                with contextlib.suppress(Exception):
                    sys.stderr.flush()
                os.dup2(saved, 2)
                spool.seek(0)
                text = spool.read(MAX_HELD_BYTES).decode("utf-8", errors="replace")
                held.extend(line.strip() for line in text.splitlines() if line.strip())
    finally:
        os.close(saved)


def say_one_line(prefix: str, problem: str | None, held: list[str]) -> None:
    """At most one line on stderr: ``problem``, else the first line held back (without its
    own ``slm-rerank:``), with how many more were held back."""
    from slm_rerank.report import visible

    if problem is None and not held:
        return
    more = len(held) - (0 if problem else 1)
    text = problem if problem else held[0].removeprefix("slm-rerank: ")
    line = visible(" ".join(text.split()))[:MAX_LINE_CHARS]
    if more > 0:
        line += f" (and {more} more line{'s' if more > 1 else ''} held back)"
    try:
        print(f"{prefix}: {line}", file=sys.stderr)
        sys.stderr.flush()
    except Exception:  # noqa: BLE001, S110 - a closed stderr leaves nothing to tell
        pass
