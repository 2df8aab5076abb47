"""The progress line: on a terminal after a delay, never on a pipe."""

from __future__ import annotations

import io

import pytest

from slm_rerank.model.progress import Progress


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_long_run_on_a_terminal_shows_progress_and_clears_it() -> None:
    screen = Terminal()
    progress = Progress(4, stream=screen, delay=0.0)
    for _ in range(4):
        progress.advance()
    progress.close()
    text = screen.getvalue()
    assert "\rslm-rerank: judging [##########----------] 2/4" in text
    assert text.endswith("4/4\r\x1b[K")


def test_a_pipe_gets_nothing() -> None:
    pipe = io.StringIO()
    progress = Progress(4, stream=pipe, delay=0.0)
    progress.advance()
    progress.close()
    assert pipe.getvalue() == ""


def test_a_quick_run_shows_nothing() -> None:
    screen = Terminal()
    progress = Progress(4, stream=screen, delay=60.0)
    progress.advance(4)
    progress.close()
    assert screen.getvalue() == ""


def test_a_server_can_silence_every_bar(monkeypatch: pytest.MonkeyPatch) -> None:
    from slm_rerank.model import progress as module

    monkeypatch.setattr(module, "QUIET", True)
    stream = Terminal()

    bar = module.Progress(4, stream=stream, delay=0)
    bar.advance()
    bar.close()

    assert stream.getvalue() == ""
