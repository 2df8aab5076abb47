"""A warm query takes the last check of every file while the kernel reports no change
(``watch.py``), and sees every change it reports, as rg does."""

from __future__ import annotations

import ctypes
import errno
import os
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import slm_rerank_ripgrep
from slm_rerank_ripgrep import watch, word_index

from slm_rerank.registrations import SourceHits, SourceQuery

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"),
                                reason="inotify is Linux's; elsewhere every query checks "
                                       "every file (the other tests)")

TERMS = ["set", "real", "imageset"]


@pytest.fixture(autouse=True)
def fresh_index(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    word_index.forget()
    # the index's clock an hour ahead: every file looks old enough to take on its stamp
    monkeypatch.setattr(word_index, "now_ns", lambda: time.time_ns() + 3600 * 10**9)
    yield
    word_index.forget()


@pytest.fixture
def file_checks(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The indexed files a query looked at on disk (``lstat`` under the tree's folder)."""
    looked: list[str] = []
    real = os.lstat

    def counted(path: str | bytes | os.PathLike[str], *, dir_fd: int | None = None,
                ) -> os.stat_result:
        if dir_fd is not None:
            looked.append(os.fsdecode(path))
        return real(path, dir_fd=dir_fd)

    monkeypatch.setattr(os, "lstat", counted)
    return looked


def make_tree(root: Path) -> Path:
    (root / "src" / "deep").mkdir(parents=True)
    (root / "docs").mkdir()
    for n in range(12):
        folder = root / ["", "src", "src/deep", "docs"][n % 4]
        (folder / f"f{n}.py").write_text(f"set = {n}\nreal_{n} = ImageSet(set)\n" * (n + 1))
    return root


def search(root: Path, terms: list[str] = TERMS, max_filesize: int = 1 << 20) -> SourceHits:
    return slm_rerank_ripgrep.search(SourceQuery(root=root, terms=terms,
                                                 max_filesize=max_filesize))


def by_rg(root: Path, terms: list[str] = TERMS) -> SourceHits:
    with word_index.set_aside():
        return search(root, terms)


def built(root: Path) -> word_index._Tree:
    word_index.build(root, search(root, ["x"]).files, time.monotonic() + 60)
    tree = word_index.tree_of(root)
    assert tree is not None and tree.watch is not None
    search(root)  # the first query checks every file, and keeps what it found
    assert tree.clean is not None
    return tree


def same(a: SourceHits, b: SourceHits) -> None:
    assert a.body_counts == b.body_counts
    assert a.skipped == b.skipped
    assert sorted(a.files) == sorted(b.files)


def test_while_nothing_changes_a_query_looks_at_no_indexed_file(
        tmp_path: Path, file_checks: list[str]) -> None:
    root = make_tree(tmp_path / "t")
    built(root)
    file_checks.clear()
    hits = search(root)
    assert not [p for p in file_checks if p.endswith(".py")]
    same(hits, by_rg(root))
    assert hits.body_counts["src/deep/f10.py"] == {"set": 33, "real": 11, "imageset": 11}


def test_while_nothing_changes_a_query_takes_the_last_check_as_it_is(
        tmp_path: Path) -> None:
    # what the check found of each file is read where it is kept, not copied for each
    # query (ten copies of sympy: a dict of 19,570 files and a list of their ids, each
    # query; issue 30), and a query then answers as rg does
    root = make_tree(tmp_path / "t")
    tree = built(root)
    assert tree.clean is not None
    kept = tree.clean.seen
    prepared = word_index.prepare(root, TERMS, 1 << 20)
    assert prepared is not None
    assert prepared.settled is kept and prepared.seen == {}
    answer = prepared.finish(by_rg(root).files)
    assert answer is not None and answer.body_counts == by_rg(root).body_counts
    assert tree.clean is not None and tree.clean.seen is kept  # and it is kept as it was
    assert len(kept) == 12


def _rewrite_same_size_and_time(path: Path) -> None:
    """Other words in the same bytes and the same modification time: only the change time
    (or the kernel's event) tells."""
    st = path.stat()
    path.write_bytes(path.read_bytes().replace(b"set", b"xyz"))
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))


def _atomic_save(path: Path) -> None:
    temporary = path.with_name(path.name + ".tmp")
    temporary.write_text("set set set\n")
    os.replace(temporary, path)


def _new_file_in_a_new_folder(root: Path) -> None:
    (root / "new" / "deeper").mkdir(parents=True)
    (root / "new" / "deeper" / "added.py").write_text("imageset real\n")


def _append(path: Path) -> None:
    with path.open("a") as f:
        f.write("set real\n")


CHANGES: dict[str, Callable[[Path], None]] = {
    "edited in place, same size and time": lambda root: _rewrite_same_size_and_time(
        root / "src" / "f1.py"),
    "appended to": lambda root: _append(root / "src" / "deep" / "f2.py"),
    "replaced by a rename (an editor's save)": lambda root: _atomic_save(root / "docs" / "f3.py"),
    "removed": lambda root: (root / "f0.py").unlink(),
    "a new file in a new folder": _new_file_in_a_new_folder,
    "truncated": lambda root: os.truncate(root / "src" / "f5.py", 0),
}


@pytest.mark.parametrize("change", list(CHANGES))
def test_each_change_is_seen_by_the_next_query(tmp_path: Path, change: str) -> None:
    root = make_tree(tmp_path / "t")
    built(root)
    CHANGES[change](root)
    same(search(root), by_rg(root))
    # and by the one after, which takes what that check found only if nothing changed
    same(search(root), by_rg(root))


def test_a_change_in_a_folder_made_after_the_check_is_seen(tmp_path: Path) -> None:
    root = make_tree(tmp_path / "t")
    built(root)
    _new_file_in_a_new_folder(root)
    search(root)
    search(root)  # the new folder is watched from the check that found its file
    (root / "new" / "deeper" / "added.py").write_text("nothing\n")
    same(search(root), by_rg(root))


def test_a_file_written_through_another_link_is_checked_every_time(
        tmp_path: Path, file_checks: list[str]) -> None:
    root = make_tree(tmp_path / "t")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    os.link(root / "src" / "f1.py", elsewhere / "same.py")  # no watch sees a write there
    built(root)
    search(root)
    file_checks.clear()
    with (elsewhere / "same.py").open("a") as f:
        f.write("imageset " * 50)
    hits = search(root)
    assert file_checks == ["src/f1.py"]  # the one file with two links, and only it
    same(hits, by_rg(root))
    assert hits.body_counts["src/f1.py"]["imageset"] == 52


def test_another_folder_put_at_the_roots_path_is_checked(tmp_path: Path) -> None:
    root = make_tree(tmp_path / "a" / "t")
    other = make_tree(tmp_path / "b" / "t")
    (other / "f0.py").write_text("imageset " * 7)  # rg's answer differs for this file
    tree = built(root)
    # the root's parent renamed, another put in its place: no watched folder (the root's
    # own, those under it) saw a thing, but the path now leads to another folder
    os.rename(tmp_path / "a", tmp_path / "a-before")
    os.rename(tmp_path / "b", tmp_path / "a")
    same(search(root), by_rg(root))
    assert search(root).body_counts["f0.py"] == {"imageset": 7, "set": 7}
    assert tree.clean is not None  # the folder now there is the one watched


def test_another_max_filesize_checks_again(tmp_path: Path) -> None:
    root = make_tree(tmp_path / "t")
    built(root)
    small = search(root, max_filesize=100)
    assert small.body_counts and all(
        (root / p).stat().st_size <= 100 for p in small.body_counts)
    assert search(root).body_counts.keys() > small.body_counts.keys()


def test_a_tree_on_a_file_system_the_kernel_may_not_hear_is_checked_file_by_file(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, file_checks: list[str]) -> None:
    monkeypatch.setattr(watch, "file_system", lambda fd: 0x6969)  # NFS
    root = make_tree(tmp_path / "t")
    word_index.build(root, search(root, ["x"]).files, time.monotonic() + 60)
    tree = word_index.tree_of(root)
    assert tree is not None and tree.watch is None
    search(root)
    file_checks.clear()
    same(search(root), by_rg(root))
    assert len([p for p in file_checks if p.endswith(".py")]) == 12


def _open_descriptors() -> set[str]:
    return set(os.listdir("/proc/self/fd"))


def test_the_watch_is_opened_by_the_build_never_by_a_query_and_closed_with_its_tree(
        tmp_path: Path) -> None:
    root = make_tree(tmp_path / "t")
    before = _open_descriptors()
    tree = built(root)
    assert watch is not None and str(tree.watch.fd) in _open_descriptors() - before  # type: ignore[union-attr]
    fd = tree.watch.fd  # type: ignore[union-attr]
    del tree
    around = _open_descriptors()
    _append(root / "f4.py")
    search(root)  # a full check: the watch armed again, no descriptor opened
    search(root)
    assert _open_descriptors() == around
    word_index.forget()
    assert str(fd) not in _open_descriptors()


def test_a_fork_reads_nothing_of_its_parents_watch(tmp_path: Path) -> None:
    """A fork's query does not take the events its parent's next query must see (the two
    share one inotify queue)."""
    root = make_tree(tmp_path / "t")
    built(root)
    ready, go = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the fork
        code = 1
        try:
            os.read(ready, 1)
            search(root)
            code = 0
        finally:
            os._exit(code)
    os.close(ready)
    _append(root / "f4.py")
    os.write(go, b"x")
    os.close(go)
    assert os.waitpid(pid, 0)[1] == 0
    same(search(root), by_rg(root))


def test_a_folder_above_the_files_replaced_is_seen(tmp_path: Path) -> None:
    """``d/p`` holds no file of its own, only ``a/x.py``: replaced by another folder, no
    watch on ``d/p/a`` hears of it (the folder it watches was moved away, whole)."""
    root = make_tree(tmp_path / "t")
    for folder, text in ((root / "d" / "p" / "a", "set real\n"),
                         (tmp_path / "other" / "a", "imageset imageset\n")):
        folder.mkdir(parents=True)
        (folder / "x.py").write_text(text)
    built(root)
    os.rename(root / "d" / "p", tmp_path / "away")
    os.rename(tmp_path / "other", root / "d" / "p")
    hits = search(root)
    same(hits, by_rg(root))
    assert hits.body_counts["d/p/a/x.py"] == {"imageset": 2, "set": 2}


def test_a_root_that_cannot_be_watched_is_checked_file_by_file(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No watch to be had on the root (its path under /proc/self/fd not there: a sandbox
    without /proc): nothing is trusted, not every watch taken for a folder gone."""
    root = make_tree(tmp_path / "t")
    word_index.build(root, search(root, ["x"]).files, time.monotonic() + 60)
    real = watch._lib()
    assert real is not None

    class NoProc:
        def inotify_add_watch(self, fd: int, path: bytes, mask: int) -> int:
            ctypes.set_errno(errno.ENOENT)
            return -1

    monkeypatch.setattr(watch, "_lib", NoProc)
    search(root)
    tree = word_index.tree_of(root)
    assert tree is not None and tree.clean is None
    _append(root / "f4.py")
    same(search(root), by_rg(root))


def test_a_tree_needing_over_a_quarter_of_the_users_watches_lets_its_watch_go(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, file_checks: list[str]) -> None:
    limit = tmp_path / "max_user_watches"
    limit.write_text("12\n")  # a quarter: 3 folders, and the tree has 4
    monkeypatch.setattr(watch, "WATCH_LIMIT_FILE", str(limit))
    root = make_tree(tmp_path / "t")
    word_index.build(root, search(root, ["x"]).files, time.monotonic() + 60)
    tree = word_index.tree_of(root)
    assert tree is not None and tree.watch is not None
    fd = tree.watch.fd
    search(root)
    assert tree.watch is None and str(fd) not in _open_descriptors()
    file_checks.clear()
    _append(root / "src" / "f5.py")
    same(search(root), by_rg(root))
    assert len([p for p in file_checks if p.endswith(".py")]) == 12  # each, every time
