"""The warm process's worker keeps near its memory budget once a command is answered
(``slm_rerank/memory_budget.py``): it lets go of mapped pages, then of the files its chunk
memory holds longest unused, then of the C heap's free pages, and only while over."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from slm_rerank import memory_budget
from slm_rerank.lexical import chunk_memory
from slm_rerank.lexical.chunk_memory import ChunkMemory, SlicedMemo
from slm_rerank.lexical.rank import slice_candidate
from slm_rerank.testing import mapped_resident_kib

MIB = 1 << 20


@pytest.fixture
def held(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """A chunk memory of 20 files and a memo of their counts, as the process's own; the
    order in which the worker let go of things (pages, files, memo, heap)."""
    memory, memo = ChunkMemory(), SlicedMemo()
    monkeypatch.setattr(chunk_memory, "CHUNK_MEMORY", memory)
    monkeypatch.setattr(chunk_memory, "SLICED_MEMO", memo)
    for i in range(20):
        (tmp_path / f"m{i}.py").write_text(f"def f{i}(x):\n    return x + {i}\n" * 200)
        sliced, _ = slice_candidate(tmp_path, f"m{i}.py", 1 << 20, None, memory)
        assert sliced is not None
        memo.get(sliced, "retry", lambda: dict.fromkeys(range(100), 1))
    order: list[str] = []
    monkeypatch.setattr(memory_budget, "_releasers", [])
    memory_budget.on_over_budget(lambda: order.append("pages") or 4096)
    real_cap, real_memo_cap = memory.cap, memo.cap
    monkeypatch.setattr(memory, "cap", lambda *a: order.append("files") or real_cap(*a))
    monkeypatch.setattr(memo, "cap", lambda *a: order.append("memo") or real_memo_cap(*a))
    monkeypatch.setattr(memory_budget, "give_back", lambda: order.append("heap") or True)
    yield order


def reader(values: list[int]):  # type: ignore[no-untyped-def]
    def read() -> int:
        return values.pop(0) if len(values) > 1 else values[0]
    return read


def test_within_its_budget_it_lets_go_of_nothing(held: list[str]) -> None:
    files = len(chunk_memory.CHUNK_MEMORY)
    kept = memory_budget.keep_within(time.monotonic() + 5, budget=50 * MIB,
                                     resident=reader([49 * MIB]))
    assert kept.steps == [] and held == []
    assert (kept.found, kept.left) == (49 * MIB, 49 * MIB)
    assert len(chunk_memory.CHUNK_MEMORY) == files


def test_over_its_budget_it_lets_go_of_mapped_pages_first_and_stops_once_within(
        held: list[str]) -> None:
    files = len(chunk_memory.CHUNK_MEMORY)
    kept = memory_budget.keep_within(time.monotonic() + 5, budget=50 * MIB,
                                     resident=reader([52 * MIB, 49 * MIB]))
    assert held == ["pages"]
    assert kept.steps == ["the pages of 4 KiB of mapped files"] and kept.left == 49 * MIB
    assert len(chunk_memory.CHUNK_MEMORY) == files


def test_still_over_it_lets_go_of_the_oldest_files_down_to_what_it_keeps_then_the_heap(
        held: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    memory, memo = chunk_memory.CHUNK_MEMORY, chunk_memory.SLICED_MEMO
    newest = list(memory._entries)[-3:]
    one = max(entry.size for entry in memory._entries.values())
    monkeypatch.setattr(memory_budget, "KEEP_CHUNK_BYTES", 3 * one)
    monkeypatch.setattr(memory_budget, "KEEP_MEMO_BYTES", 0)
    kept = memory_budget.keep_within(time.monotonic() + 5, budget=50 * MIB,
                                     resident=reader([90 * MIB, 89 * MIB, 80 * MIB]))
    assert held == ["pages", "files", "memo", "heap"]
    assert 0 < memory.held_bytes <= 3 * one
    assert list(memory._entries)[-len(memory):] == newest[-len(memory):]
    assert len(memo) == 0  # no file it counted for is held but these, and it keeps none
    assert kept.left == 80 * MIB and kept.found == 90 * MIB
    assert kept.steps[0].endswith("KiB of mapped files")
    assert "chunk memory" in kept.steps[1] and kept.steps[2] == "the C heap's free pages"


def test_once_over_its_budget_a_query_s_new_files_push_the_old_ones_out_as_it_reads(
        held: list[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    memory, memo = chunk_memory.CHUNK_MEMORY, chunk_memory.SLICED_MEMO
    one = max(entry.size for entry in memory._entries.values())
    monkeypatch.setattr(memory_budget, "KEEP_CHUNK_BYTES", 3 * one)
    counted = chunk_memory.memo_bytes("retry", dict.fromkeys(range(100), 1))
    monkeypatch.setattr(memory_budget, "KEEP_MEMO_BYTES", 2 * counted + 100)
    memory_budget.keep_within(time.monotonic() + 5, budget=50 * MIB,
                              resident=reader([52 * MIB, 51 * MIB, 49 * MIB]))
    before = list(memory._entries)
    most = 0
    for i in range(8):  # the next query reads eight files the memory does not hold
        (tmp_path / f"n{i}.py").write_text(f"def g{i}(x):\n    return x * {i}\n" * 200)
        sliced, _ = slice_candidate(tmp_path, f"n{i}.py", 1 << 20, None, memory)
        assert sliced is not None
        memo.get(sliced, "retry", lambda: dict.fromkeys(range(100), 1))
        most = max(most, memory.held_bytes)
    assert most <= 3 * one  # never the old files and the new ones together
    assert not set(before) & set(memory._entries)  # the old ones went first
    assert len(memory) == 3 and 0 < memo.held_bytes <= 2 * counted + 100


def test_a_cap_lowered_holds_at_once_however_little_it_was_over(
        held: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    # a byte over after the pages: the chunk memory and the memo go down to their floors
    # now, so `warm status` never says a memory holds more than its cap (a worker a little
    # over its budget held 15 MiB under a cap of 6)
    memory, memo = chunk_memory.CHUNK_MEMORY, chunk_memory.SLICED_MEMO
    one = max(entry.size for entry in memory._entries.values())
    monkeypatch.setattr(memory_budget, "KEEP_CHUNK_BYTES", 3 * one)
    monkeypatch.setattr(memory_budget, "KEEP_MEMO_BYTES", 0)
    kept = memory_budget.keep_within(time.monotonic() + 5, budget=50 * MIB,
                                     resident=reader([52 * MIB, 50 * MIB + 1, 49 * MIB]))
    assert memory.max_bytes == 3 * one and 0 < memory.held_bytes <= memory.max_bytes
    assert memo.max_bytes == 0 and len(memo) == 0
    assert "chunk memory" in kept.steps[1]


def test_within_its_budget_its_memory_keeps_what_it_may(held: list[str]) -> None:
    memory_budget.keep_within(time.monotonic() + 5, budget=50 * MIB,
                              resident=reader([52 * MIB, 49 * MIB]))  # the pages sufficed
    assert chunk_memory.CHUNK_MEMORY.max_bytes == chunk_memory.MAX_BYTES
    assert chunk_memory.SLICED_MEMO.max_bytes == chunk_memory.MAX_MEMO_BYTES


def test_a_releaser_that_fails_lets_go_of_nothing_and_the_rest_goes_on(
        held: list[str]) -> None:
    def broken() -> int:
        raise OSError("madvise refused")

    memory_budget.on_over_budget(broken)
    kept = memory_budget.keep_within(time.monotonic() + 5, budget=50 * MIB,
                                     resident=reader([52 * MIB, 49 * MIB]))
    assert held == ["pages"] and kept.left == 49 * MIB
    assert kept.steps == ["the pages of 4 KiB of mapped files"]


def test_over_its_budget_the_worker_lets_go_of_the_pages_the_ripgrep_index_maps(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from array import array

    from slm_rerank_ripgrep import mapped

    monkeypatch.setattr(mapped, "FOLDER", tmp_path)
    views = mapped.map_out([array("I", range(1 << 20))])  # 4 MiB
    assert isinstance(views, list)
    assert sum(views[0][::1024]) == sum(range(0, 1 << 20, 1024))  # every page read
    before = mapped_resident_kib(tmp_path)
    if before is None:
        pytest.skip("no /proc/self/smaps here")
    assert before >= 3 << 10
    kept = memory_budget.keep_within(time.monotonic() + 5, budget=1 << 40,
                                     resident=lambda: 1 << 41)  # over even once let go
    assert kept.steps[0].endswith("KiB of mapped files")
    assert mapped_resident_kib(tmp_path) == 0
    assert views[0][12_345] == 12_345


def test_past_its_time_it_lets_go_of_nothing(held: list[str]) -> None:
    files = len(chunk_memory.CHUNK_MEMORY)
    kept = memory_budget.keep_within(time.monotonic() - 1, budget=50 * MIB,
                                     resident=reader([90 * MIB]))
    assert held == [] and kept.steps == [] and len(chunk_memory.CHUNK_MEMORY) == files
    assert kept.left == 90 * MIB


def test_its_resident_size_is_read_where_the_system_says_it() -> None:
    if not Path("/proc/self/statm").exists():
        assert memory_budget.resident_bytes() == 0
        return
    before = memory_budget.resident_bytes()
    block = bytearray(64 * MIB)
    block[::4096] = b"x" * len(block[::4096])  # every page touched
    assert memory_budget.resident_bytes() >= before + 60 * MIB
    del block


_HEAP = """
import sys
from slm_rerank import memory_budget
from slm_rerank.memory_budget import resident_bytes
if sys.argv[1] == "fixed":
    assert memory_budget.fix_heap_thresholds()
first = bytearray(8 << 20)  # freed: glibc's own threshold rises past 3 MiB blocks
del first
before = resident_bytes()
blocks, kept = [], []
for _ in range(24):  # each block with a small one kept after it, as a build's arrays are
    blocks.append(bytearray(1 << 20))
    blocks[-1][::4096] = b"x" * len(blocks[-1][::4096])
    kept.append(bytearray(64 << 10))
del blocks
print((resident_bytes() - before) >> 20)
"""


def test_with_fixed_heap_thresholds_a_large_block_freed_leaves_the_process() -> None:
    if not Path("/proc/self/statm").exists() or not sys.platform.startswith("linux"):
        pytest.skip("glibc and /proc only")
    left = {}
    for how in ("fixed", "glibc's"):
        run = subprocess.run([sys.executable, "-c", _HEAP, how], capture_output=True,
                             text=True, timeout=60, check=False)
        if how == "fixed" and run.returncode != 0 and "AssertionError" in run.stderr:
            pytest.skip("not glibc: no mallopt")
        assert run.returncode == 0, run.stderr
        left[how] = int(run.stdout)
    assert left["fixed"] <= 2 and left["glibc's"] >= 20, left
