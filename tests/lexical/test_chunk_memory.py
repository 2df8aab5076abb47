"""A long-lived process keeps the files it sliced (``lexical/chunk_memory.py``): a warm
query reads none it has sliced, and a changed file never gives the chunks of before."""

from __future__ import annotations

import gc
import os
import stat
import threading
import time
import tracemalloc
from array import array
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from search_fixtures import make_repo, search

from slm_rerank.lexical import chunk_memory, rank
from slm_rerank.lexical.chunk_cache import ChunkCache
from slm_rerank.lexical.chunk_memory import (
    MAX_BYTES,
    MAX_ENTRIES,
    MAX_ENTRY_BYTES,
    MAX_MEMO_BYTES,
    MAX_MEMO_ENTRIES,
    RACY_SECONDS,
    SLICED_MEMO,
    ChunkMemory,
    SlicedFile,
    SlicedMemo,
    entry_bytes,
    memo_bytes,
    slice_data,
)
from slm_rerank.lexical.rank import slice_candidate

LIMIT = 1_000_000
SECOND = 1_000_000_000


def settle(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make memory's clock run two racy windows ahead: every file looks long unchanged."""
    monkeypatch.setattr(chunk_memory, "now_ns",
                        lambda: time.time_ns() + 2 * RACY_SECONDS * SECOND)


def count_calls(monkeypatch: pytest.MonkeyPatch, module: Any, name: str) -> list[Any]:
    """Record each call of ``module.name`` (its first argument after the root or name)."""
    calls: list[Any] = []
    real: Callable[..., Any] = getattr(module, name)

    def counting(*args: Any, **kwargs: Any) -> Any:
        calls.append(args)
        return real(*args, **kwargs)

    monkeypatch.setattr(module, name, counting)
    return calls


def sliced(memory: ChunkMemory, root: Path, rel: str, cache: ChunkCache | None = None
           ) -> tuple[SlicedFile | None, str | None]:
    return slice_candidate(root, rel, LIMIT, cache, memory)


def sliced_and_held(text: str) -> tuple[SlicedFile, int]:
    """``text`` sliced as a file, and the memory (tracemalloc) what is kept of it holds."""
    data = text.encode()
    slice_data("warm.py", data, None)  # the per-name caches warm, as in a long-lived process
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        kept = slice_data("warm.py", data, None)
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    return kept, held


def rewrite_keeping_size_and_times(path: Path, content: str) -> None:
    """Write ``content`` (the same length as before) and set the times back as they were."""
    before = path.stat()
    assert len(content.encode()) == before.st_size
    path.write_text(content)
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))


def test_a_warm_query_neither_reads_nor_hashes_a_file_it_has_sliced(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "retry.py").write_text("def retry():\n    return 1\n")
    memory = ChunkMemory()
    settle(monkeypatch)
    first, _ = sliced(memory, tmp_path, "retry.py", ChunkCache(tmp_path / "cache"))
    reads = count_calls(monkeypatch, rank, "read_candidate")
    hashes = count_calls(monkeypatch, chunk_memory, "content_key")

    again, reason = sliced(memory, tmp_path, "retry.py", ChunkCache(tmp_path / "cache"))

    assert reason is None and again is first
    assert reads == [] and hashes == []


def test_a_file_rewritten_with_its_size_and_times_unchanged_gives_its_new_content(
        tmp_path: Path) -> None:
    # Written and rewritten within the clock's tick: nothing fstat gives may differ. The
    # file changed within the racy window, so its content is checked.
    path = tmp_path / "flags.py"
    path.write_text("alpha = 1\n")
    memory = ChunkMemory()
    sliced(memory, tmp_path, "flags.py")

    rewrite_keeping_size_and_times(path, "omega = 2\n")
    again, _ = sliced(memory, tmp_path, "flags.py")

    assert again is not None
    assert again.text == "omega = 2\n"
    assert again.chunks[0].defines == ("omega",)


def test_a_recently_changed_file_is_read_again_and_its_chunks_kept_when_unchanged(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "retry.py").write_text("def retry():\n    return 1\n")
    memory = ChunkMemory()
    first, _ = sliced(memory, tmp_path, "retry.py")
    reads = count_calls(monkeypatch, rank, "read_candidate")
    slicings = count_calls(monkeypatch, chunk_memory, "chunk_text")

    again, _ = sliced(memory, tmp_path, "retry.py")

    assert len(reads) == 1  # changed a moment ago: its stamp alone proves nothing
    assert slicings == []  # the same content: the same chunks, not sliced again
    assert again is first


def test_a_settled_file_changed_in_place_is_caught_by_its_change_time(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "flags.py"
    path.write_text("alpha = 1\n")
    memory = ChunkMemory()
    settle(monkeypatch)
    sliced(memory, tmp_path, "flags.py")
    ctime = path.stat().st_ctime_ns
    time.sleep(0.05)  # past the file system clock's tick

    rewrite_keeping_size_and_times(path, "omega = 2\n")
    if path.stat().st_ctime_ns == ctime:
        pytest.skip("this file system did not move the change time")
    again, _ = sliced(memory, tmp_path, "flags.py")

    assert again is not None and again.text == "omega = 2\n"


@pytest.mark.parametrize(("age_s", "settled"), [
    (RACY_SECONDS + 1, True),
    (RACY_SECONDS - 1, False),
    (0, False),
    (-10, False),  # a time in the future (set by hand, or a clock that stepped back)
])
def test_only_times_older_than_the_racy_window_are_trusted(age_s: int, settled: bool) -> None:
    checked = time.time_ns()
    old = checked - RACY_SECONDS * 2 * SECOND
    at = checked - age_s * SECOND

    assert chunk_memory._settled((1, 2, 0o100644, 10, at, old), checked) is settled
    assert chunk_memory._settled((1, 2, 0o100644, 10, old, at), checked) is settled


def test_a_deleted_file_is_skipped_and_forgotten(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "gone.py").write_text("def gone():\n    pass\n")
    memory = ChunkMemory()
    settle(monkeypatch)
    sliced(memory, tmp_path, "gone.py")

    (tmp_path / "gone.py").unlink()
    again, reason = sliced(memory, tmp_path, "gone.py")

    assert again is None
    assert reason is not None and reason.startswith("unreadable (No such file")
    assert len(memory) == 0 and memory.held_bytes == 0


def test_a_file_replaced_by_a_symlink_gives_the_linked_files_content(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "a.py").write_text("def first():\n    pass\n")
    (tmp_path / "b.py").write_text("def other_name():\n    return 2\n")
    memory = ChunkMemory()
    settle(monkeypatch)
    sliced(memory, tmp_path, "a.py")
    sliced(memory, tmp_path, "b.py")

    (tmp_path / "a.py").unlink()
    (tmp_path / "a.py").symlink_to("b.py")
    again, _ = sliced(memory, tmp_path, "a.py")

    assert again is not None and again.chunks[0].defines == ("other_name",)


def test_a_file_replaced_by_a_fifo_is_skipped_at_once_and_forgotten(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "pipe.py"
    path.write_text("def piped():\n    pass\n")
    memory = ChunkMemory()
    settle(monkeypatch)
    sliced(memory, tmp_path, "pipe.py")
    path.unlink()
    os.mkfifo(path)
    outcome: list[tuple[SlicedFile | None, str | None]] = []

    reader = threading.Thread(target=lambda: outcome.append(sliced(memory, tmp_path,
                                                                   "pipe.py")), daemon=True)
    reader.start()
    reader.join(timeout=10)
    if reader.is_alive():  # the bug: release the reader stuck in open()
        os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))
    assert outcome == [(None, "not a regular file (a pipe, socket or device)")]
    assert len(memory) == 0


def test_a_file_made_unreadable_is_not_served_from_memory(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "secret.py"
    path.write_text("token = 1\n")
    memory = ChunkMemory()
    settle(monkeypatch)
    sliced(memory, tmp_path, "secret.py")
    reads = count_calls(monkeypatch, rank, "read_candidate")

    path.chmod(0)
    try:
        again, reason = sliced(memory, tmp_path, "secret.py")
    finally:
        path.chmod(stat.S_IRUSR | stat.S_IWUSR)

    assert len(reads) == 1  # its permissions are part of the stamp: asked of the file
    if os.geteuid() != 0:  # root reads it whatever its permissions
        assert again is None and reason == "unreadable (Permission denied)"


def test_the_memory_keeps_at_most_its_entries_and_bytes_oldest_out_first(
        tmp_path: Path) -> None:
    for i in range(6):
        (tmp_path / f"m{i}.py").write_text(f"def f{i}():\n    return {i}\n")
    memory = ChunkMemory(max_entries=3)

    for i in range(6):
        sliced(memory, tmp_path, f"m{i}.py")

    assert len(memory) == 3
    assert sorted(k.rsplit(b"/", 1)[1] for k in memory._entries) == [b"m3.py", b"m4.py",
                                                                      b"m5.py"]
    small = ChunkMemory(max_bytes=3 * 4096)
    for i in range(6):
        sliced(small, tmp_path, f"m{i}.py")
    assert 0 < small.held_bytes <= 3 * 4096
    assert small.held_bytes == sum(e.size for e in small._entries.values())


def test_a_cap_drops_the_files_used_longest_ago_down_to_it(
        tmp_path: Path) -> None:
    for i in range(6):
        (tmp_path / f"m{i}.py").write_text(f"def f{i}():\n    return {i}\n" * (i + 1))
    memory = ChunkMemory()
    for i in range(6):
        sliced(memory, tmp_path, f"m{i}.py")
    sliced(memory, tmp_path, "m0.py")  # used again: the last to go
    sizes = {k.rsplit(b"/", 1)[1]: e.size for k, e in memory._entries.items()}
    held = memory.held_bytes

    assert memory.cap(held - sizes[b"m1.py"]) == sizes[b"m1.py"]
    assert b"m1.py" not in {k.rsplit(b"/", 1)[1] for k in memory._entries}
    # a lower cap: it stops where what is left reaches it
    keep = sizes[b"m0.py"] + sizes[b"m5.py"]
    let_go = memory.cap(keep)
    assert [k.rsplit(b"/", 1)[1] for k in memory._entries] == [b"m5.py", b"m0.py"]
    assert memory.held_bytes == keep == held - sizes[b"m1.py"] - let_go
    assert memory.cap(keep) == 0
    assert memory.cap(10 * held) == 0 and memory.max_bytes == keep  # never raised
    found, _ = sliced(memory, tmp_path, "m0.py")
    assert found is not None and found.text.startswith("def f0")


def test_a_cap_on_the_memo_drops_the_entries_of_files_gone_first(tmp_path: Path) -> None:
    counts = SlicedMemo()
    gone = slice_data("gone.py", b"x = 'retry'\n", None)
    held = slice_data("held.py", b"x = 'retry'\n", None)
    counts.get(held, "old", lambda: {0: 1})  # used longest ago, but of a file still held
    counts.get(gone, "retry", lambda: {0: 1})
    counts.get(held, "new", lambda: {0: 2})
    size = {k[1]: e[2] for k, e in counts._entries.items()}
    del gone
    gc.collect()

    assert counts.cap(counts.held_bytes - 1) == size["retry"]
    assert [k[1] for k in counts._entries] == ["old", "new"]
    assert counts.cap(counts.held_bytes - 1) == size["old"]  # then the one used longest ago
    assert [k[1] for k in counts._entries] == ["new"]
    assert counts.cap(size["new"]) == 0
    assert counts.get(held, "new", lambda: {}) == {0: 2}


def test_a_file_too_big_for_memory_is_sliced_each_time_and_not_kept(tmp_path: Path) -> None:
    (tmp_path / "big.py").write_text("x = 1\n" * 5000)
    memory = ChunkMemory(max_entry_bytes=16 * 1024)

    found, _ = sliced(memory, tmp_path, "big.py")

    assert found is not None and found.text.startswith("x = 1")
    assert len(memory) == 0


def test_no_caller_lifts_the_caps() -> None:
    memory = ChunkMemory(max_entries=10**9, max_bytes=10**15, max_entry_bytes=10**15)

    assert (memory.max_entries, memory.max_bytes) == (MAX_ENTRIES, MAX_BYTES)
    assert memory.max_entry_bytes == MAX_ENTRY_BYTES
    assert MAX_ENTRY_BYTES <= MAX_BYTES <= 64 * 1024 * 1024


@pytest.mark.parametrize("text", [
    "".join(f"def function_{i}(a, b):\n    '''Doc {i}.'''\n    return a + b * {i}\n\n"
            for i in range(400)),
    "class Große:\n" + "".join(f"    def método_{i}(self):\n        return 'ü{i}'\n"
                               for i in range(300)),
    "\n".join(f"line {i} of a plain text file" for i in range(3000)),
])
def test_the_estimate_of_an_entry_is_above_the_memory_it_holds(tmp_path: Path,
                                                               text: str) -> None:
    kept, held = sliced_and_held(text)

    assert held > 0
    assert entry_bytes(kept) >= held


def test_answers_are_the_same_with_memory_cold_warm_and_without(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = make_repo(tmp_path / "repo", {
        "pkg/retry.py": "class Retry:\n    def backoff(self):\n        return 2\n",
        "pkg/client.py": "from pkg.retry import Retry\n\ndef call():\n    Retry().backoff()\n",
        "docs/retry.md": "# Retry\n\nHow backoff works.\n",
    })

    def answer() -> list[tuple[Any, ...]]:
        report = search(root, "retry backoff", cache=tmp_path / "cache", chunks=True)
        return [(c.path, c.start_line, c.end_line, c.symbol, c.score, c.matched_terms)
                for c in report.results]

    defaults = rank.rank_chunks.__kwdefaults__  # the search's memory: the process's
    monkeypatch.setitem(defaults, "memory", None)
    without = answer()
    monkeypatch.setitem(defaults, "memory", ChunkMemory())
    cold = answer()
    settle(monkeypatch)
    warm = answer()

    assert without == cold == warm
    assert len(without) >= 3


# --- each literal's counts in a kept file's chunks -----------------------------------------


def chunk_mentions(root: Path, memory: ChunkMemory, query: str) -> dict[int, float]:
    """Each chunk's own mentions of the query's words in ``m.py`` (by start line), as a
    warm process's ranking scores them."""
    from slm_rerank.lexical.file_scores import FileEvidence
    from slm_rerank.lexical.scores import TermStats, score_chunks
    from slm_rerank.lexical.terms import extract

    terms = extract(query)
    found, _ = sliced(memory, root, "m.py")
    assert found is not None
    stats = TermStats({t.literal: 1.0 for t in terms.terms})
    ev = FileEvidence("m.py", body_score=1.0, matched={t.root: 1.0 for t in terms.terms})
    scored = score_chunks(terms, stats, ev, found.chunks, found.text, found.lowered,
                          found.keys, partial(SLICED_MEMO.get, found))
    return {s.chunk.start_line: s.mentions for s in scored}


def test_counts_kept_for_a_file_are_not_given_for_its_new_content(tmp_path: Path) -> None:
    path = tmp_path / "m.py"
    path.write_text("def a():\n    return 'backoff backoff'\n\n\ndef b():\n    return 'xx'\n")
    memory = ChunkMemory()
    before = chunk_mentions(tmp_path, memory, "backoff")
    assert before == chunk_mentions(tmp_path, memory, "backoff")  # kept, unchanged
    assert before[1] > 0 and before[5] == 0

    # the same size and times: only the content hash tells the files apart
    rewrite_keeping_size_and_times(
        path, "def a():\n    return 'xxxxxxxxxx'\n\n\ndef b():\n    return 'backoff'\n")
    after = chunk_mentions(tmp_path, memory, "backoff")

    assert after[1] == 0 and after[5] > 0


def test_kept_counts_are_those_counted_afresh_and_reused(tmp_path: Path) -> None:
    text = "".join(f"def f{i}():\n    return 'retry' * {i % 3}  # retry retry\n\n"
                   for i in range(50))
    found = slice_data("m.py", text.encode(), None)
    counts = SlicedMemo()
    computed: list[str] = []

    def count(literal: str) -> dict[int, int]:
        computed.append(literal)
        return {i: text.count(literal) for i in range(2)}

    first = counts.get(found, "retry", lambda: count("retry"))
    again = counts.get(found, "retry", lambda: count("retry"))
    other = counts.get(slice_data("m.py", text.encode(), None), "retry",
                       lambda: count("retry"))

    assert again is first and other == first
    assert computed == ["retry", "retry"]  # another slicing of the file is counted again


def test_counts_of_a_file_no_longer_held_are_dropped_not_given(tmp_path: Path) -> None:
    counts = SlicedMemo()
    found = slice_data("m.py", b"x = 'retry'\n", None)
    counts.get(found, "retry", lambda: {0: 1})
    key = id(found)
    del found
    gc.collect()
    # whatever object takes its place in memory now, it is not the one counted
    fresh = slice_data("m.py", b"x = 'other'\n", None)
    given = counts.get(fresh, "retry", lambda: {})

    assert given == {}
    assert key == id(fresh) or len(counts) == 2


def test_literal_counts_keep_at_most_their_entries_and_bytes() -> None:
    found = slice_data("m.py", b"x = 1\n", None)
    counts = SlicedMemo(max_entries=3)
    for i in range(6):
        counts.get(found, f"word{i}", lambda: {0: 1})
    assert len(counts) == 3
    assert [k[1] for k in counts._entries] == ["word3", "word4", "word5"]

    small = SlicedMemo(max_bytes=2000)
    for i in range(20):
        counts_now = small.get(found, f"word{i}", lambda: dict.fromkeys(range(10), 1))
        assert counts_now == dict.fromkeys(range(10), 1)
    assert 0 < small.held_bytes <= 2000
    assert small.held_bytes == sum(e[2] for e in small._entries.values())

    unbounded = SlicedMemo(max_entries=10**9, max_bytes=10**15)
    assert (unbounded.max_entries, unbounded.max_bytes) == (MAX_MEMO_ENTRIES, MAX_MEMO_BYTES)
    assert MAX_MEMO_BYTES <= 16 * 1024 * 1024


@pytest.mark.parametrize(("item", "value"), [
    ("determinant", lambda: {}),
    ("determinant", lambda: {i: 1000 + i for i in range(3)}),
    ("determinant", lambda: {i: 1000 + i for i in range(200)}),
    ("determinant", lambda: dict.fromkeys(range(200), 1)),
    (("comment", 1200, 1320), lambda: 1 / 4),
    (("lines",), lambda: int("123456")),
    (("bounds",), lambda: (array("q", range(0, 90000, 300)), array("q", range(300, 90300, 300)))),
])
def test_the_estimate_of_a_kept_item_is_above_the_memory_it_holds(
        item: str | tuple[str | int, ...], value: Callable[[], Any]) -> None:
    found = slice_data("m.py", b"x = 1\n", None)
    memo = SlicedMemo()
    memo.get(found, "warm", lambda: {})  # the memo's own dict allocated
    item = item if isinstance(item, str) else tuple(item)  # made now, as a caller does
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        memo.get(found, item, value)  # the value made inside, as counting makes it
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()

    assert held > 0
    assert memo.held_bytes - memo_bytes("warm", {}) >= held


def test_a_kept_file_holds_its_text_once_not_a_lower_cased_copy_beside_it() -> None:
    # a hundred functions of twenty lines: the text, where its lines start, its chunks
    text = "".join(f"def Handler_{i}(request):\n"
                   + "".join(f"    Value_{j} = Request.Lookup('Key_{i}_{j}')  # Note\n"
                             for j in range(19)) for i in range(100))
    kept, held = sliced_and_held(text)

    assert len(kept.chunks) == 100
    assert held < 1.5 * len(text.encode())  # a second copy of the text alone would make it 2x


def test_scores_are_right_where_lower_casing_makes_a_letter_two(tmp_path: Path) -> None:
    # "İ" lower-cases to two characters: the lower-cased text's lines start later than
    # the text's, so the kept line starts cannot place its chunks
    path = tmp_path / "m.py"
    path.write_text("X = 'İİİİİİİİ'\n" * 40 + "\n\ndef a():\n    return 'backoff'\n"
                    "\n\ndef b():\n    return 'backoff backoff xx'\n")
    from slm_rerank.lexical.file_scores import FileEvidence
    from slm_rerank.lexical.scores import (
        LoweredText,
        TermStats,
        score_chunks,
    )
    from slm_rerank.lexical.terms import extract

    memory = ChunkMemory()
    kept = chunk_mentions(tmp_path, memory, "backoff")
    found, _ = sliced(memory, tmp_path, "m.py")
    assert found is not None and len(found.text.lower()) > len(found.text)
    terms = extract("backoff")
    fresh = score_chunks(terms, TermStats({t.literal: 1.0 for t in terms.terms}),
                         FileEvidence("m.py", body_score=1.0,
                                      matched={t.root: 1.0 for t in terms.terms}),
                         found.chunks, found.text, LoweredText.of(found.text))
    assert kept == {s.chunk.start_line: s.mentions for s in fresh}
    starts = {c.start_line for c in found.chunks if c.symbol in ("a", "b")}
    assert len(starts) == 2 and all(kept[line] > 0 for line in starts)
    assert kept[max(starts)] > kept[min(starts)]  # b says it twice


@pytest.mark.parametrize("seed", range(6))
def test_kept_scores_are_fresh_scores_whatever_lower_casing_does_to_a_line(
        tmp_path: Path, seed: int) -> None:
    # "İ" lower-cases to two characters, "K" (the Kelvin sign) and "ẞ" to one: a file of
    # such lines and plain ones, CRLF or not, changing between queries from one to the
    # other, scores as a file sliced afresh does, its counts memo and all
    import random

    from slm_rerank.lexical.file_scores import FileEvidence
    from slm_rerank.lexical.scores import LoweredText, TermStats, score_chunks
    from slm_rerank.lexical.terms import extract

    rng = random.Random(seed)
    words = ["backoff", "Backoff", "BACKOFF", "İ", "İİ", "\u212a", "ẞ", "retry", "x"]
    path = tmp_path / "m.py"
    memory = ChunkMemory()
    for _ in range(6):
        end = rng.choice(["\n", "\r\n"])
        path.write_text("".join(
            f"def f{i}():{end}    return '{' '.join(rng.choices(words, k=rng.randint(0, 6)))}'"
            f"{end}{end}" for i in range(rng.randint(1, 30))), newline="")
        for query in ("backoff", "retry backoff", "x"):
            kept = chunk_mentions(tmp_path, memory, query)
            found, _ = sliced(memory, tmp_path, "m.py")
            assert found is not None
            terms = extract(query)
            fresh = score_chunks(terms, TermStats({t.literal: 1.0 for t in terms.terms}),
                                 FileEvidence("m.py", body_score=1.0,
                                              matched={t.root: 1.0 for t in terms.terms}),
                                 found.chunks, found.text,
                                 LoweredText(found.text.lower(), array(
                                     "q", chunk_memory.line_starts(found.text.lower()))))
            assert kept == {s.chunk.start_line: s.mentions for s in fresh}
