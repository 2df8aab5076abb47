"""The three-letter pieces of the word index's spellings (``pieces.py``), made in memory or
straight into a file the process maps (``mapped.py``)."""

from __future__ import annotations

import errno
import random
import time
import tracemalloc
from array import array
from itertools import accumulate
from pathlib import Path

import pytest
from slm_rerank_ripgrep import mapped, pieces
from slm_rerank_ripgrep.pieces import PieceBuild, Pieces

LETTERS = "abcdefghijklmnopqrstuvwxyz0123456789_"


def spellings(n: int, seed: int, longest: int = 30) -> tuple[bytes, array[int]]:
    rng = random.Random(seed)
    words = ["".join(rng.choice(LETTERS) for _ in range(rng.randint(1, longest)))
             for _ in range(n)]
    words += ["aaa", "aaaa" * 20, "abcabc", "_" * 5]  # one slot many times in a line
    text = "".join(word + "\n" for word in words).encode("ascii")
    return text, array("I", accumulate([0] + [len(word) + 1 for word in words]))


def made(text: bytes, starts: array[int], to_file: bool, window: float = 60.0) -> Pieces:
    build = PieceBuild(text, starts, to_file=to_file)
    steps = 0
    while True:
        built = build.step(time.monotonic() + window)
        steps += 1
        assert steps < 1_000_000
        if built is not None:
            return built


@pytest.fixture
def folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setattr(mapped, "FOLDER", tmp_path / "mapped")
    monkeypatch.setattr(mapped, "MAP_FROM", 0)
    return tmp_path / "mapped"


@pytest.mark.parametrize("range_pieces", [300, 5000, 1 << 20])
@pytest.mark.parametrize("window", [60.0, -1.0])  # one step, or a chunk of lines a step
def test_pieces_made_a_range_at_a_time_into_a_file_are_those_made_in_memory(
        monkeypatch: pytest.MonkeyPatch, folder: Path, range_pieces: int,
        window: float) -> None:
    monkeypatch.setattr(pieces, "RANGE_PIECES", range_pieces)
    text, starts = spellings(3000, range_pieces)
    in_memory = made(text, starts, to_file=False)
    in_file = made(text, starts, to_file=True, window=window)
    assert isinstance(in_memory.ids, array) and isinstance(in_file.ids, memoryview)
    assert in_file.offsets == in_memory.offsets
    assert list(in_file.ids) == list(in_memory.ids)
    for term in ["abc", "aaaa", "zz9", "q_w", "___", "0123"]:
        assert in_file.holding(term, text, starts) == in_memory.holding(term, text, starts)
    assert list(folder.iterdir()) == []


def test_pieces_going_to_a_file_hold_a_range_at_a_time_not_all(
        monkeypatch: pytest.MonkeyPatch, folder: Path) -> None:
    text, starts = spellings(4000, 5, longest=160)  # 1.4 MiB of pieces
    total = made(text, starts, to_file=False).nbytes()
    monkeypatch.setattr(pieces, "RANGE_PIECES", total // 4 // 5)  # five ranges
    peaks = {}
    for to_file in (False, True):
        tracemalloc.start()
        try:
            made(text, starts, to_file=to_file)
            peaks[to_file] = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
    assert total > 1 << 20
    assert peaks[True] < peaks[False] - total * 0.4, (peaks, total)


def test_pieces_are_made_without_a_copy_of_the_text(
        monkeypatch: pytest.MonkeyPatch, folder: Path) -> None:
    # a translated copy of the text was held through the build: 4 MiB for ten copies of
    # sympy, and twice that while it was made
    monkeypatch.setattr(pieces, "RANGE_PIECES", 500)
    text, starts = spellings(3000, 9)
    build = PieceBuild(text, starts, to_file=True)
    copies: list[int] = []
    steps = 0
    while (built := build.step(-1.0)) is None:  # a chunk of lines a step
        steps += 1
        copies += [len(held) for held in vars(build).values()
                   if isinstance(held, bytes | bytearray) and held is not text]
    assert steps > 20 and copies == []
    assert list(built.ids) == list(made(text, starts, to_file=False).ids)


@pytest.mark.parametrize("fails_at", ["create", "append 0", "append 3", "finish"])
def test_pieces_whose_file_fails_are_made_in_memory_and_say_why(
        monkeypatch: pytest.MonkeyPatch, folder: Path, fails_at: str) -> None:
    monkeypatch.setattr(pieces, "RANGE_PIECES", 500)
    text, starts = spellings(2000, 8)
    in_memory = made(text, starts, to_file=False)
    full = OSError(errno.ENOSPC, "No space left on device")
    if fails_at == "create":
        monkeypatch.setattr(mapped, "_nameless", lambda where: (_ for _ in ()).throw(full))
    elif fails_at == "finish":
        monkeypatch.setattr(mapped.Appender, "finish",
                            lambda self: (_ for _ in ()).throw(full))
    else:
        real = mapped.Appender.append
        calls = []

        def append(self: mapped.Appender, numbers: array[int]) -> None:
            calls.append(len(numbers))
            if len(calls) > int(fails_at.split()[1]):
                raise full
            real(self, numbers)

        monkeypatch.setattr(mapped.Appender, "append", append)
    build = PieceBuild(text, starts, to_file=True)
    while (built := build.step(time.monotonic() + 60)) is None:
        pass
    assert isinstance(built.ids, array) and list(built.ids) == list(in_memory.ids)
    assert "No space left on device" in build.unmapped
    assert not folder.exists() or list(folder.iterdir()) == []


def test_no_pieces_make_no_file(folder: Path) -> None:
    build = PieceBuild(b"ab\n_\n", array("I", [0, 3, 5]), to_file=True)
    while (built := build.step(time.monotonic() + 60)) is None:
        pass
    assert len(built.ids) == 0 and build.unmapped == ""


def test_a_mapping_without_its_hint_is_kept(monkeypatch: pytest.MonkeyPatch,
                                             folder: Path) -> None:
    import mmap
    from types import SimpleNamespace

    class Refusing(mmap.mmap):
        def madvise(self, *args: int) -> None:
            raise OSError(errno.EINVAL, "Invalid argument")

    monkeypatch.setattr(mapped, "mmap", SimpleNamespace(
        mmap=Refusing, ACCESS_READ=mmap.ACCESS_READ, MADV_RANDOM=1))
    text, starts = spellings(500, 3)
    built = made(text, starts, to_file=True)
    assert isinstance(built.ids, memoryview)
    assert list(built.ids) == list(made(text, starts, to_file=False).ids)


def test_a_range_going_to_a_file_is_let_go_before_the_next_is_made(
        monkeypatch: pytest.MonkeyPatch, folder: Path) -> None:
    # each range was made while the one just written was still held: twice a range at once
    # (8 MiB for ten copies of sympy, on top of the index being built)
    text, starts = spellings(8000, 5, longest=160)  # 2.8 MiB of pieces
    total = made(text, starts, to_file=False).nbytes()
    one_range = total // 3
    monkeypatch.setattr(pieces, "RANGE_PIECES", one_range // 4)  # three ranges
    build = PieceBuild(text, starts, to_file=True)
    assert build.step(time.monotonic() + 60.0) is None  # a step counts the lines
    assert build.sized()
    tracemalloc.start()
    try:
        built = build.step(time.monotonic() + 60.0)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert built is not None and list(built.ids) == list(made(text, starts, False).ids)
    counts = 4 * len(build.counts)  # and ``fill``, a copy of them, held through it
    assert peak < one_range * 1.5 + 2 * counts, (peak, one_range, counts)
