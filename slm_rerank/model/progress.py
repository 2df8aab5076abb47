"""A one-line progress display on stderr for model runs that take a while.

Shown only when stderr is a terminal and the run has lasted ``DELAY`` seconds: a quick run
prints nothing, and a pipe or a log file never gets carriage returns.
"""

from __future__ import annotations

import sys
import time
from typing import TextIO

DELAY = 1.5
#: Set by long-running servers (``serve-api``): a bar per request would garble their log.
QUIET = False


class Progress:
    def __init__(self, total: int, label: str = "judging", stream: TextIO | None = None,
                 delay: float = DELAY) -> None:
        self.total = total
        self.label = label
        self.stream = stream if stream is not None else sys.stderr
        self.started = time.monotonic()
        self.delay = delay
        self.done = 0
        self.shown = False
        try:
            self.enabled = not QUIET and self.stream.isatty()
        except (AttributeError, ValueError):
            self.enabled = False

    def advance(self, count: int = 1) -> None:
        self.done += count
        if not self.enabled or time.monotonic() - self.started < self.delay:
            return
        width = 20
        filled = width * self.done // max(self.total, 1)
        bar = "#" * filled + "-" * (width - filled)
        self._write(f"\rslm-rerank: {self.label} [{bar}] {self.done}/{self.total}")
        self.shown = True

    def close(self) -> None:
        if self.shown:
            self._write("\r\x1b[K")

    def _write(self, text: str) -> None:
        try:
            self.stream.write(text)
            self.stream.flush()
        except (OSError, ValueError):
            self.enabled = False
