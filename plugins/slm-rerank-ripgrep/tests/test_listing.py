"""The listing names files the matching pass never searches: why the source runs two rg
processes, not one (issue 30; docs/benchmarks.md, "--fast against tree size")."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
import slm_rerank_ripgrep

from slm_rerank.registrations import SourceQuery


@pytest.fixture(autouse=True)
def real_rg(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SLM_RERANK_RG", raising=False)


def test_every_file_is_listed_and_only_searched_ones_are_counted(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    (root / "widget").mkdir(parents=True)
    (root / "widget" / "plain.py").write_bytes(b"nothing here\n")  # the term in its path only
    (root / "bin.dat").write_bytes(b"widget\0binary\n")  # a NUL byte: binary
    (root / "huge.txt").write_bytes(b"x\n" * 2000 + b"widget\n")  # over the size limit
    (root / "a.py").write_bytes(b"widget widget\n")
    latin = os.fsdecode(b"caf\xe9.py")  # a name that is not UTF-8
    (root / latin).write_bytes(b"Widget\n")
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    hits = slm_rerank_ripgrep.search(SourceQuery(
        root=root.resolve(), terms=["widget"], paths=[], globs=[], max_filesize=1000,
        explain=False))
    assert sorted(hits.files) == sorted(
        ["widget/plain.py", "bin.dat", "huge.txt", "a.py", latin])
    assert hits.body_counts == {"a.py": {"widget": 2}, latin: {"widget": 1}}
