"""What a search leaves behind: rg's output is parsed into SourceHits, then let go."""

from __future__ import annotations

import gc
import subprocess
import tracemalloc
from pathlib import Path

import pytest
import slm_rerank_ripgrep

from slm_rerank.lexical.matches import live_tools
from slm_rerank.registrations import SourceQuery


@pytest.fixture(autouse=True)
def real_rg(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SLM_RERANK_RG", raising=False)


def test_rgs_output_is_not_held_once_the_search_returns(tmp_path: Path) -> None:
    """Popen.communicate keeps every piece read from the pipe on the process object, and
    the record of live tools kept that object until the next tool started: a 64k-file
    tree's rg output (8 MB) was held through the whole ranking (issue 30)."""
    root = tmp_path / "repo"
    line = b"widget gadget widget\n" * 200  # 4 kB of matches a file, -o prints 3 a line
    for i in range(400):
        (root / f"d{i % 20}").mkdir(parents=True, exist_ok=True)
        (root / f"d{i % 20}" / f"f{i}.py").write_bytes(line)
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    query = SourceQuery(root=root.resolve(), terms=["widget", "gadget"], paths=[], globs=[],
                        max_filesize=1 << 20, explain=False)
    slm_rerank_ripgrep.search(query)  # imports and caches out of the way
    gc.collect()
    tracemalloc.start()
    try:
        hits = slm_rerank_ripgrep.search(query)
        assert len(hits.files) == 400
        assert hits.body_counts["d0/f0.py"] == {"widget": 400, "gadget": 200}
        del hits
        gc.collect()
        held = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    assert held < 200_000, f"{held} bytes still held after the search"
    assert live_tools() == []


def test_rgs_matches_are_counted_as_they_arrive_not_held_whole(tmp_path: Path) -> None:
    """A query's matches on a large tree run to megabytes (3.9 MB for three common words in
    ten copies of sympy): read whole, and joined from the pipe's pieces, they took twice
    that at once, on top of a half-built word index (issue 30)."""
    root = tmp_path / "repo"
    root.mkdir()
    for i in range(100):  # 7,000 matches a file: 4.2 MB of `retry` lines from rg -o
        (root / f"f{i}.txt").write_bytes(b"retry " * 7000 + b"\n")
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    query = SourceQuery(root=root.resolve(), terms=["retry"], paths=[], globs=[],
                        max_filesize=1 << 20, explain=False)
    slm_rerank_ripgrep.search(query)  # imports and caches out of the way
    gc.collect()
    tracemalloc.start()
    try:
        hits = slm_rerank_ripgrep.search(query)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert len(hits.body_counts) == 100
    assert all(counts == {"retry": 7000} for counts in hits.body_counts.values())
    assert peak < 1 << 20, f"{peak >> 10} KiB to count 4.2 MB of matches"
    assert live_tools() == []
