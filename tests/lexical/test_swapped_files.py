"""Files swapped for a FIFO or a device between the listing and the read are skipped."""

from __future__ import annotations

import os
import subprocess
import threading
from pathlib import Path

import pytest
from search_fixtures import write_tree

import slm_rerank
from slm_rerank.lexical import rank
from slm_rerank.lexical.reading import read_candidate as _read


def _release(fifos: list[Path]) -> None:
    """Open each FIFO's write end, so that a reader stuck in open() (the bug) gets free."""
    for fifo in fifos:
        try:
            os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        except OSError:
            pass  # no reader waits on it: nothing to release


def test_reading_a_fifo_returns_at_once_with_a_reason(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe.py"
    os.mkfifo(fifo)
    result: list[tuple[bytes | None, str | None]] = []
    reader = threading.Thread(target=lambda: result.append(_read(tmp_path, "pipe.py", 1000)),
                              daemon=True)
    reader.start()
    reader.join(timeout=10)
    _release([fifo])
    reader.join(timeout=10)
    assert result == [(None, "not a regular file (a pipe, socket or device)")]


def test_a_symlink_to_a_file_in_the_repository_is_still_read(tmp_path: Path) -> None:
    (tmp_path / "real.py").write_bytes(b"retry = 1\n")
    (tmp_path / "link.py").symlink_to("real.py")
    assert _read(tmp_path, "link.py", 1000) == (b"retry = 1\n", None)


def test_a_symlink_to_a_device_is_skipped(tmp_path: Path) -> None:
    (tmp_path / "zero.py").symlink_to("/dev/zero")
    assert _read(tmp_path, "zero.py", 1000) == (
        None, "not a regular file (a pipe, socket or device)")


def test_a_search_whose_listed_files_turn_into_fifos_ends_and_notes_each_skip(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "repo"
    write_tree(root, {f"d/f{i}.py": "def write_chunk_cache():\n    pass\n" for i in range(5)})
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    fifos: list[Path] = []
    listed = rank.candidates

    def swap_then_list(*args: object, **kwargs: object) -> list[object]:
        # Between the sources' listing and the read: every candidate becomes a FIFO.
        chosen = listed(*args, **kwargs)  # type: ignore[arg-type]
        for ev in chosen:
            path = root / ev.path
            path.unlink()
            os.mkfifo(path)
            fifos.append(path)
        return chosen  # type: ignore[return-value]

    monkeypatch.setattr(rank, "candidates", swap_then_list)
    reports: list[object] = []
    search = threading.Thread(
        target=lambda: reports.append(slm_rerank.search("where is the chunk cache written",
                                                        root=root, top_k=50)),
        daemon=True)
    search.start()
    search.join(timeout=60)  # a generous bound: the search takes well under a second
    ended = not search.is_alive()
    _release(fifos)
    search.join(timeout=10)
    assert ended, "the search hung opening a FIFO"
    report = reports[0]
    skips = [n for n in report.notes if n.startswith("skipped d/f")]  # type: ignore[attr-defined]
    assert len(skips) == 5 and all("not a regular file" in n for n in skips)
