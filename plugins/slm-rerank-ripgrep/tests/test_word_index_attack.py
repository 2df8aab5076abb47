"""The word index against rg on hostile trees: whatever the files hold and however they
change after the index was built, a search answered from the index finds what rg's own
matching pass finds at that moment, or the index declines and rg runs.

Each check searches twice: once with the index (and notes whether rg's matching pass ran),
once as if no index existed (rg answers). Unless a test says otherwise, the index's clock
is moved far ahead, so every file counts as old enough to be taken on its stamp.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest
import slm_rerank_ripgrep
from slm_rerank_ripgrep import word_index

from slm_rerank.registrations import SourceHits, SourceQuery

#: overlapping terms: rg is given them longest first (order_for_search)
TERMS = ["imageset", "set", "imag", "st", "s", "k", "i", "_", "1"]
FAR_FUTURE = 10**9 * 10**9  # about the year 2001 + 30: ns since the epoch, far ahead


@pytest.fixture(autouse=True)
def clean() -> Iterator[None]:
    word_index.forget()
    yield
    word_index.forget()


@pytest.fixture
def later(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every file is read long after it last changed (outside the racy window)."""
    monkeypatch.setattr(word_index, "now_ns", lambda: time.time_ns() + FAR_FUTURE)


def write(root: Path, files: dict[str, bytes]) -> Path:
    root.mkdir(exist_ok=True)
    for rel, data in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    return root


class Searches:
    """Searches of one tree, through the index and through rg alone."""

    def __init__(self, root: Path, monkeypatch: pytest.MonkeyPatch, **query: object) -> None:
        self.root = root
        self.monkeypatch = monkeypatch
        self.query = query
        #: rg's matching passes run by the last search
        self.matching: list[list[str]] = []
        real = slm_rerank_ripgrep._start_matching

        def counted(*args, **kwargs):  # type: ignore[no-untyped-def]
            self.matching.append(list(args[2]))
            return real(*args, **kwargs)

        monkeypatch.setattr(slm_rerank_ripgrep, "_start_matching", counted)

    def search(self, terms: list[str] = TERMS) -> SourceHits:
        self.matching.clear()
        return slm_rerank_ripgrep.search(SourceQuery(self.root, terms, **self.query))  # type: ignore[arg-type]

    def by_rg(self, terms: list[str] = TERMS) -> SourceHits:
        with self.monkeypatch.context() as patch:
            patch.setattr(word_index, "indexed", lambda root: False)
            return self.search(terms)

    def build(self) -> None:
        files = self.by_rg().files
        word_index.build(self.root, files, time.monotonic() + 60)
        assert word_index.indexed(self.root), word_index.status()

    def same(self, terms: list[str] = TERMS, answered: bool = True) -> SourceHits:
        """The index's answer equals rg's; ``answered``: the index gave it (rg's matching
        pass did not run), else it declined."""
        expected = self.by_rg(terms)
        found = self.search(terms)
        assert (found.body_counts, found.skipped) == (expected.body_counts, expected.skipped)
        assert sorted(found.files) == sorted(expected.files)
        assert (not self.matching) == answered, (self.matching, word_index.status())
        return found


def searches(root: Path, monkeypatch: pytest.MonkeyPatch, **query: object) -> Searches:
    found = Searches(root, monkeypatch, **query)
    found.build()
    return found


# --- what a file holds -------------------------------------------------------------------

def test_matches_rg_finds_before_a_nul_byte_after_a_short_first_line(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, later: None) -> None:
    # rg reads the first three bytes alone (looking for a byte-order mark): a line that
    # ends there is searched before the next read meets the NUL byte and stops it.
    root = write(tmp_path / "t", {
        "short.txt": b"s\nset\0set\n",
        "two.txt": b"st\nset\0",
        "crlf.txt": b"s\r\nset\0",
        "empty_line.txt": b"\n\nset\0",
        "later_line.txt": b"a\nb\nset\0",
        "long_line.txt": b"abc\nset\0",
        "nul_third.txt": b"s\n\0set",
        "bom.txt": b"\xef\xbb\xbfs\nset\0",
        "plain.txt": b"set s\n",
    })
    found = searches(root, monkeypatch).same()
    assert found.body_counts["short.txt"] == {"s": 1}
    assert found.body_counts["two.txt"] == {"st": 1, "s": 1}


# --- what rg is told besides its arguments ----------------------------------------------

@pytest.mark.parametrize("flag", ["--text", "--max-count=1", "--word-regexp",
                                  "--replace=x", "--invert-match"])
def test_a_ripgrep_config_file_is_left_to_rg(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                             later: None, flag: str) -> None:
    # rg reads flags from the file $RIPGREP_CONFIG_PATH names, ahead of its arguments: any
    # of them may change what the matching pass finds, which the index does not model
    root = write(tmp_path / "t", {"a.txt": b"set imageset\nset\n", "b.txt": b"s\0set set\n"})
    config = tmp_path / "ripgreprc"
    config.write_text(flag + "\n")
    checks = searches(root, monkeypatch)
    monkeypatch.setenv("RIPGREP_CONFIG_PATH", str(config))
    checks.same(answered=False)


# --- bounds -------------------------------------------------------------------------------

def test_a_build_reads_no_file_once_its_deadline_passed(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, later: None) -> None:
    # a file may be up to MAX_FILE_BYTES (reading and splitting 4 MB takes about 0.3 s):
    # the worker's idle build must stop at its deadline, which is a margin before the
    # server kills the worker, not some dozens of files later
    root = write(tmp_path / "t", {f"f{i}.txt": b"set\n" * 100 for i in range(10)})
    files = Searches(root, monkeypatch).by_rg().files
    clock = [1000.0]
    started: list[float] = []
    real_read = word_index._read_all

    def slow_read(fd: int, size: int) -> bytes:
        started.append(clock[0])
        clock[0] += 1.0  # each file takes a second
        return real_read(fd, size)

    monkeypatch.setattr(word_index, "_read_all", slow_read)
    monkeypatch.setattr(word_index, "time", SimpleNamespace(
        monotonic=lambda: clock[0], time_ns=time.time_ns))
    by = clock[0] + 2.5
    word_index.build(root, files, by)
    assert started and max(started) <= by, started
    word_index.build(root, files, clock[0] + 100)  # the next idle moment finishes it
    assert len(started) == len(files)
