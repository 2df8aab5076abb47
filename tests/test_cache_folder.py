"""The cache folder: a query goes on, with one warning, when the folder cannot be written."""

from __future__ import annotations

import json
import os
import resource
import subprocess
from pathlib import Path

import pytest
from search_fixtures import CLI, cli, run_at_once

from slm_rerank.cache_folder import CacheFolder, usable_folder
from slm_rerank.lexical.chunk_cache import ChunkCache
from slm_rerank.lexical.chunking import Chunk


def warnings(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("slm-rerank: ")]


def full_disk() -> None:
    """In the child: every write to a regular file fails (EFBIG), as on a full disk."""
    resource.setrlimit(resource.RLIMIT_FSIZE, (0, resource.RLIM_INFINITY))


def run_on_a_full_disk(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    # stdout and stderr are pipes, which the limit does not touch
    return subprocess.run([str(CLI), *args], cwd=cwd, capture_output=True, text=True,
                          stdin=subprocess.DEVNULL, preexec_fn=full_disk, timeout=60)


def test_fast_works_when_the_cache_folder_cannot_be_created(repo: Path, tmp_path: Path) -> None:
    # a folder under a regular file cannot be made, also by root (whom chmod does not stop)
    (tmp_path / "a-file").write_text("")
    folder = tmp_path / "a-file" / "cache"

    run = cli("-q", "retry", "--fast", "-k", "1", "--format", "json", cwd=repo,
              env={"SLM_RERANK_CACHE_DIR": str(folder)})

    assert run.returncode == 0, run.stderr
    doc = json.loads(run.stdout)
    assert doc["results"]
    [line] = warnings(run.stderr)
    assert f"cache folder {folder} is not writable" in line
    assert "runs without the slice and score caches and the usage log" in line
    assert doc["warnings"] == [line.removeprefix("slm-rerank: ")]


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into a 0o555 folder anyway; "
                    "the uncreatable folder above covers the path")
def test_fast_works_with_a_read_only_cache_folder(repo: Path, tmp_path: Path) -> None:
    folder = tmp_path / "ro"
    folder.mkdir()
    folder.chmod(0o555)
    try:
        run = cli("-q", "retry", "--fast", "-k", "1", cwd=repo,
                  env={"SLM_RERANK_CACHE_DIR": str(folder)})
    finally:
        folder.chmod(0o755)

    assert run.returncode == 0, run.stderr
    assert run.stdout.strip()
    assert len(warnings(run.stderr)) == 1


def test_a_writable_folder_has_no_warning(tmp_path: Path) -> None:
    assert usable_folder(tmp_path / "new") == CacheFolder(tmp_path / "new", None)
    assert (tmp_path / "new").is_dir()


def test_fast_on_a_full_disk_answers_and_leaves_no_half_written_cache_files(
        repo: Path, isolated_home: Path) -> None:
    run = run_on_a_full_disk("-q", "retry", "--fast", "-k", "1", cwd=repo)

    assert run.returncode == 0, run.stderr
    assert run.stdout.strip()
    # the usage log says it could not be written; the chunk cache only costs speed
    [line] = warnings(run.stderr)
    assert "usage.jsonl" in line
    assert list((isolated_home / "chunks").rglob("*.tmp")) == []


def test_a_slice_cache_write_that_fails_leaves_no_temporary_file(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def no_space(*args: object, **kwargs: object) -> None:
        raise OSError(28, "No space left on device")

    cache = ChunkCache(tmp_path)
    # the temporary file is written, then the disk refuses the rest of the write
    monkeypatch.setattr(os, "replace", no_space)

    cache.put("ab" + "0" * 62, [Chunk(1, 2, None, ())])

    assert list(tmp_path.rglob("*")) == [tmp_path / "ab"]


def test_threads_proving_one_cache_folder_writable_do_not_trip_over_each_other(
        tmp_path: Path) -> None:
    from slm_rerank.cache_folder import ensure_writable

    def prove() -> None:
        for _ in range(200):
            ensure_writable(tmp_path / "cache")

    assert run_at_once(prove) == []
