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
        held, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak > 2_000_000  # rg printed ~1.9 MB: the search did read it
    assert held < 200_000, f"{held} bytes still held after the search"
    assert live_tools() == []
