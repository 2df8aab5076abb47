"""The cited chunk is read from disk within bounds; what cannot be read is CHUNK_UNREADABLE,
and nothing in a file's place (a FIFO, a link out, a huge file) blocks or escapes."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from pathlib import Path

import pytest
from slm_rerank_review.reading import MAX_FILE_BYTES, ChunkUnreadable, read_lines


def test_the_lines_are_read_as_the_search_numbers_them(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_bytes(b"one\r\ntwo \x0c page\r\nthree\n\xffbad\n")

    assert read_lines(tmp_path, "a.py", 2, 4) == "two \x0c page\nthree\n\ufffdbad"


@pytest.mark.parametrize("make,expected", [
    (lambda p: None, "No such file"),
    (lambda p: p.mkdir(), "not a regular file"),
    (lambda p: p.write_bytes(b"x" * (MAX_FILE_BYTES + 1)), "over the"),
    (lambda p: p.write_text("only one line\n"), "has 1 lines"),
])
def test_what_cannot_be_read_says_why(tmp_path: Path, make: Callable[[Path], object],
                                      expected: str) -> None:
    make(tmp_path / "a.py")

    with pytest.raises(ChunkUnreadable, match=expected):
        read_lines(tmp_path, "a.py", 2, 3)


def test_a_link_out_of_the_root_is_not_followed(tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("password = hunter2\n")
    root = tmp_path / "repo"
    root.mkdir()
    (root / "a.py").symlink_to(secret)

    with pytest.raises(ChunkUnreadable, match="leads out of"):
        read_lines(root, "a.py", 1, 1)


def test_a_link_inside_the_root_is_read(tmp_path: Path) -> None:
    (tmp_path / "real.py").write_text("x = 1\n")
    (tmp_path / "a.py").symlink_to(tmp_path / "real.py")

    assert read_lines(tmp_path, "a.py", 1, 1) == "x = 1"


def test_a_fifo_in_a_files_place_is_refused_without_waiting_for_a_writer(
        tmp_path: Path) -> None:
    fifo = tmp_path / "a.py"
    os.mkfifo(fifo)
    outcome: list[BaseException] = []
    reader = threading.Thread(target=lambda: _catch(outcome, tmp_path), daemon=True)

    reader.start()
    reader.join(timeout=20)  # generous: it returns at once
    ended = not reader.is_alive()
    if not ended:  # let the blocked open return, so no thread is left behind
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        reader.join(timeout=20)

    assert ended, "reading a FIFO waited for a writer"
    assert isinstance(outcome[0], ChunkUnreadable) and "not a regular file" in str(outcome[0])


def _catch(outcome: list[BaseException], root: Path) -> None:
    try:
        read_lines(root, "a.py", 1, 1)
    except BaseException as exc:  # noqa: BLE001 - the test inspects whatever it was
        outcome.append(exc)
