"""The word index against rg on hostile trees: whatever the files hold and however they
change after the index was built, a search answered from the index finds what rg's own
matching pass finds at that moment, or the index declines and rg runs.

Each check searches twice: once with the index (and notes whether rg's matching pass ran),
once as if no index existed (rg answers). Unless a test says otherwise, the index's clock
is moved far ahead, so every file counts as old enough to be taken on its stamp.
"""

from __future__ import annotations

import os
import pwd
import random
import shutil
import stat
import subprocess
import tempfile
import time
import traceback
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest
import slm_rerank_ripgrep
from slm_rerank_ripgrep import word_index

from slm_rerank.registrations import SourceHits, SourceQuery
from slm_rerank.testing import as_warm_worker

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
        assert word_index.indexed(self.root), word_index.summary()

    def same(self, terms: list[str] = TERMS, answered: bool = True) -> SourceHits:
        """The index's answer equals rg's; ``answered``: the index gave it (rg's matching
        pass did not run), else it declined."""
        expected = self.by_rg(terms)
        found = self.search(terms)
        assert (found.body_counts, found.skipped) == (expected.body_counts, expected.skipped)
        assert sorted(found.files) == sorted(expected.files)
        assert (not self.matching) == answered, (self.matching, word_index.summary())
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



NUL_TREE = b"set imageset\n" * 8000

#: name -> the files of a tree; the index answers each (none holds what it declines)
TREES: dict[str, dict[str, bytes]] = {
    "mixed case and overlaps": {
        "a.py": b"SeT ImageSet imagesets IMAG s_1 set_set __ 11 1 _s_ sss imageimageset\n",
        "b.py": b"Setting upset IMAGESETS; st ST sT st1_1 k K\n"},
    "long s and the Kelvin sign next to ASCII": {
        "a.txt": "ſet ſ imageſet IMAGEſET ſſ ſt Kelvin K k Kk ſK\n".encode()},
    "other letters that fold to no ASCII letter": {
        "a.txt": "éset İset ıset σet Ｓet ｓet ﬆ ﬅ ẞ ß setß İ ı Å Å iİı\n".encode()},
    "invalid UTF-8 inside words": {
        "a.txt": b"se\xfft s\xc5t \xc5\xbf\xbfet \xe2\x84set \xe2\x84\xaaset \xc5\xc5\xbfet\n"},
    "a UTF-8 byte-order mark": {
        "a.txt": b"\xef\xbb\xbfset\nset", "b.txt": b"\xef\xbb\xbfset\xff\xfeset \xc5\xbfet"},
    "CRLF and lone CR": {"a.txt": b"set\r\nset\r\n\rset\rimageset\r"},
    "empty files": {"a.txt": b"", "b.txt": b"\n", "c.txt": b"set"},
    "NUL bytes early": {
        "first.bin": b"\0set", "early.bin": b"set\0set", "text.txt": b"set\n",
        "under.bin": NUL_TREE[:word_index.BINARY_PROBE - 1] + b"\0",
        "short_line.bin": b"s\n" + NUL_TREE[:word_index.BINARY_PROBE - 3] + b"\0"},
    "ignored and hidden files": {
        ".gitignore": b"ignored.py\n", "ignored.py": b"set", ".hidden.py": b"set",
        "a.py": b"set"},
    "names with newlines, NUL-free odd bytes": {
        "a\nb.py": b"set", "a": b"x", "b.py": b"set set", "x\n\nset.py": b"imageset",
        "set.py": b"imag"},
}


@pytest.mark.parametrize("name", sorted(TREES))
def test_the_index_answers_as_rg_does(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                      later: None, name: str) -> None:
    root = write(tmp_path / "t", TREES[name])
    (root / ".git").mkdir()  # rg reads .gitignore in a git repository
    checks = searches(root, monkeypatch)
    checks.same()
    checks.same(["setting", "k", "s"])
    checks.same(["1", "_"])


def test_odd_file_names_are_answered_for(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                         later: None) -> None:
    root = tmp_path / "t"
    root.mkdir()
    for name in (b"\xff\xfe.py", b"caf\xe9.py", b"new\nline.py"):
        (root / os.fsdecode(name)).write_bytes(b"set imageset")
    searches(root, monkeypatch).same()


@pytest.mark.parametrize("files", [
    {"a.txt": NUL_TREE[:word_index.BINARY_PROBE] + b"\0"},  # past the probe
    {"a.txt": b"s\n" + NUL_TREE[:word_index.BINARY_PROBE] + b"\0"},
    {"a.txt": NUL_TREE[:65536] + b"\0" + NUL_TREE},  # past rg's first buffer
    {"a.txt": "set".encode("utf-16")},  # a UTF-16 byte-order mark: rg transcodes
], ids=["nul-probe", "short-line-nul-probe", "nul-64k", "utf16"])
def test_what_the_index_does_not_model_is_left_to_rg(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, later: None,
        files: dict[str, bytes]) -> None:
    root = write(tmp_path / "t", {**files, "b.txt": b"set"})
    searches(root, monkeypatch).same(answered=False)


@pytest.mark.parametrize("size", [100, 101])
def test_a_file_at_max_filesize_is_searched_and_one_byte_over_is_not(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, later: None, size: int) -> None:
    root = write(tmp_path / "t", {"a.txt": (b"set " * 26)[:size], "b.txt": b"set"})
    found = searches(root, monkeypatch, max_filesize=100).same()
    assert ("a.txt" in found.body_counts) == (size == 100)


def test_a_file_over_the_index_limit_within_max_filesize_is_left_to_rg(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, later: None) -> None:
    monkeypatch.setattr(word_index, "MAX_FILE_BYTES", 1000)
    root = write(tmp_path / "t", {"big.txt": b"set\n" * 300, "b.txt": b"set"})
    searches(root, monkeypatch, max_filesize=100).same()  # not searched: answered
    searches(root, monkeypatch, max_filesize=10_000).same(answered=False)


def test_links_fifos_and_devices_are_not_read_and_nothing_hangs(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, later: None) -> None:
    root = write(tmp_path / "t", {"a.py": b"set imageset", "sub/b.py": b"set"})
    os.symlink("a.py", root / "link.py")
    os.symlink("sub", root / "dirlink")
    os.symlink("nowhere", root / "dangling.py")
    os.mkfifo(root / "fifo.py")
    checks = searches(root, monkeypatch)
    checks.same()
    # listed files replaced after the build (rg lists none of these)
    (root / "a.py").unlink()
    os.mkfifo(root / "a.py")
    (root / "sub" / "b.py").unlink()
    os.symlink("/dev/zero", root / "sub" / "b.py")
    checks.same()
    (root / "a.py").unlink()
    if os.geteuid() == 0:
        os.mknod(root / "a.py", 0o666 | stat.S_IFCHR, os.makedev(1, 5))  # /dev/zero
    checks.same()


# --- after the build ----------------------------------------------------------------------

def rewrite(path: Path, data: bytes) -> None:
    """New bytes of the same size, the modification time put back as it was."""
    before = path.stat()
    assert len(data) == before.st_size
    path.write_bytes(data)
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))


@pytest.mark.parametrize("clock", ["far ahead", "real"])
def test_changes_after_the_build_are_seen(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                          clock: str) -> None:
    if clock == "far ahead":
        monkeypatch.setattr(word_index, "now_ns", lambda: time.time_ns() + FAR_FUTURE)
    root = write(tmp_path / "t", {f"f{i}.py": b"set imageset %d\n" % i for i in range(6)})
    (root / ".git").mkdir()
    checks = searches(root, monkeypatch)
    checks.same()
    rewrite(root / "f0.py", b"kkk imag kkk 0\n")
    assert checks.same().body_counts["f0.py"] == {"imag": 1, "i": 1, "k": 6}
    (root / "new.py").write_bytes(b"imag imag")
    (root / "f1.py").unlink()
    checks.same()
    (root / "f2.py").unlink()
    os.symlink("f3.py", root / "f2.py")
    checks.same()
    (root / "f3.py").write_bytes(b"s\nset\0")
    checks.same()
    (root / "f3.py").write_bytes(b"\0set")
    checks.same()
    (root / "f4.py").unlink()
    (root / "f4.py").mkdir()
    (root / "f4.py" / "x.py").write_bytes(b"set")
    checks.same()
    (root / ".gitignore").write_bytes(b"f5.py\n")
    checks.same()
    os.rename(root / "new.py", root / "renamed.py")
    checks.same()


def test_a_file_read_while_it_could_still_change_unseen_is_read_again(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # with the real clock every file here changed within RACY_SECONDS: a change that keeps
    # its size, modification and even change time (one clock tick) is still seen
    root = write(tmp_path / "t", {"a.py": b"set imageset 0\n", "b.py": b"set"})
    checks = searches(root, monkeypatch)
    for _ in range(5):
        rewrite(root / "a.py", b"kkk kkk kkkk0 \n")
        checks.same()
        rewrite(root / "a.py", b"set imageset 0\n")
        checks.same()
    now = [time.time_ns()]
    monkeypatch.setattr(word_index, "now_ns", lambda: now[0])
    # changed long ago by the clock, but its stamp moved: read again
    now[0] += FAR_FUTURE
    checks.same()
    rewrite(root / "a.py", b"kkk kkk kkkk0 \n")
    checks.same()


def test_too_many_changed_files_are_left_to_rg_and_the_index_catches_up(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, later: None) -> None:
    monkeypatch.setattr(word_index, "REREAD_FILES", 2)
    root = write(tmp_path / "t", {f"f{i}.py": b"set %d\n" % i for i in range(5)})
    checks = searches(root, monkeypatch)
    for i in range(3):
        rewrite(root / f"f{i}.py", b"kkk %d\n" % i)
    checks.same(answered=False)
    checks.build()
    checks.same()
    for i in range(3):
        (root / f"n{i}.py").write_bytes(b"set")
    checks.same(answered=False)
    checks.build()
    checks.same()


def test_bounds_drop_the_tree_and_rg_answers(tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    root = write(tmp_path / "t", {f"f{i}.py": b"set %d\n" % i for i in range(5)})
    checks = Searches(root, monkeypatch)
    monkeypatch.setattr(word_index, "MAX_FILES", 4)
    word_index.build(root, checks.by_rg().files, time.monotonic() + 60)
    assert not word_index.indexed(root) and not word_index.wanted(root)
    checks.same(answered=False)
    word_index.forget()
    monkeypatch.setattr(word_index, "MAX_FILES", 100)
    monkeypatch.setattr(word_index, "MAX_INDEX_BYTES", 1000)  # five files alone are more
    word_index.build(root, checks.by_rg().files, time.monotonic() + 60)
    assert not word_index.indexed(root)
    checks.same(answered=False)


def test_a_third_tree_pushes_out_the_least_recently_used(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, later: None) -> None:
    trees = [write(tmp_path / f"t{i}", {"a.py": b"set %d" % i}) for i in range(3)]
    checks = [searches(trees[0], monkeypatch), searches(trees[1], monkeypatch)]
    checks[0].same()  # the first is now the most recently used
    checks.append(searches(trees[2], monkeypatch))
    assert [word_index.indexed(t) for t in trees] == [True, False, True]
    checks[1].same(answered=False)
    checks[0].same()
    checks[2].same()


def test_a_build_cut_short_is_continued(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                        later: None) -> None:
    root = write(tmp_path / "t", {f"f{i:03}.py": b"set %d\n" % i for i in range(200)})
    checks = Searches(root, monkeypatch)
    files = checks.by_rg().files
    word_index.build(root, files, time.monotonic() - 1)  # its deadline already passed
    assert word_index.indexed(root)
    checks.same(answered=False)  # 200 files to read: more than a query may
    word_index.build(root, files, time.monotonic() + 60)
    checks.same()


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


def test_a_build_that_fails_part_way_leaves_an_index_that_answers_right(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, later: None) -> None:
    root = write(tmp_path / "t", {f"f{i}.py": b"set %d\n" % i for i in range(10)})
    checks = Searches(root, monkeypatch)
    reads = [0]
    real_read = word_index._read_all

    def failing(fd: int, size: int) -> bytes:
        reads[0] += 1
        if reads[0] == 4:
            raise RuntimeError("a build that fails")
        return real_read(fd, size)

    monkeypatch.setattr(word_index, "_read_all", failing)
    with as_warm_worker() as run_idle_work:
        checks.search()  # rg answers, and asks for the build once idle
        assert run_idle_work(time.monotonic() + 60) == 0  # it raised
    assert reads[0] == 4 and word_index.indexed(root)
    checks.same()  # the files it did not read are read by the query


def test_a_pack_that_fails_in_a_build_drops_the_tree_and_rg_answers(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, later: None) -> None:
    # a pack takes the postings a build holds back out before it puts them in their
    # blocks: one that fails (a MemoryError) between the two must not leave the tree in use
    # without them (its files are recorded as read, so no query would read them again)
    monkeypatch.setattr(word_index, "PENDING_FROM", 4)
    root = write(tmp_path / "t", {f"f{n}.py": b"set imag%d real\n" % (n % 3) + b" many" * 30
                                  for n in range(20)})
    checks = Searches(root, monkeypatch)
    real = word_index._Tree._pending_by_word
    calls = [0]

    def failing(tree: word_index._Tree):  # type: ignore[no-untyped-def]
        placed = real(tree)  # pending is taken out
        calls[0] += 1
        if calls[0] == 2:
            raise MemoryError("a pack that fails")
        return placed

    monkeypatch.setattr(word_index._Tree, "_pending_by_word", failing)
    with as_warm_worker() as run_idle_work:
        checks.search()  # rg answers, and asks for the build once idle
        assert run_idle_work(time.monotonic() + 60) == 0  # it raised
    assert calls[0] == 2
    assert not word_index.indexed(root) and "MemoryError" in word_index.summary()
    for terms in (["set", "many"], ["imag1"], ["real"]):
        checks.same(terms, answered=False)


def test_rebuilding_one_tree_keeps_the_other(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                             later: None) -> None:
    # a tree whose replaced words outweigh its live ones is built afresh: that is not a
    # third tree, and must not push out the other one
    trees = [write(tmp_path / f"t{i}", {"a.py": b"set %d\n" % i, "b.py": b""})
             for i in range(2)]
    checks = [searches(tree, monkeypatch) for tree in trees]
    rewrite(trees[0] / "a.py", b"imag__")
    checks[0].same()  # read again: its old words are dead now
    checks[0].build()
    assert word_index.indexed(trees[1]), word_index.summary()
    checks[1].same()


def test_too_many_changed_bytes_are_left_to_rg(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                               later: None) -> None:
    monkeypatch.setattr(word_index, "REREAD_BYTES", 150)
    root = write(tmp_path / "t", {"big.py": b"set " * 25, "small.py": b"set"})
    checks = searches(root, monkeypatch)
    rewrite(root / "big.py", b"kkk " * 25)
    checks.same()  # 100 bytes read again
    (root / "new.py").write_bytes(b"imag " * 20)
    rewrite(root / "big.py", b"set " * 25)
    checks.same(answered=False)  # 200


def unreadable_scenario(folder: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = write(folder / "t", {"a.py": b"set", "b.py": b"set imageset", "sub/c.py": b"set"})
    os.chmod(root / "b.py", 0)
    checks = searches(root, monkeypatch)
    assert checks.same().skipped == {"b.py": "unreadable (Permission denied)"}
    os.chmod(root / "b.py", 0o644)
    os.chmod(root / "a.py", 0)
    checks.same()
    os.chmod(root / "sub", 0o644)  # its names can be listed, its files not opened
    assert "sub/c.py" in checks.same().skipped
    os.chmod(root / "sub", 0)
    assert "sub" in checks.same().skipped
    os.chmod(root / "sub", 0o755)
    checks.same()


def test_unreadable_files_and_folders_are_reported_as_rg_reports_them(
        monkeypatch: pytest.MonkeyPatch, later: None) -> None:
    # root reads any file whatever its mode: run as root, the check runs in a child process
    # that gave root up for the user nobody, in a folder that user may write
    nobody = pwd.getpwnam("nobody")
    folder = Path(tempfile.mkdtemp(prefix="word-index-", dir="/tmp"))
    os.chmod(folder, 0o777)
    try:
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                if os.geteuid() == 0:
                    os.setgroups([])
                    os.setgid(nobody.pw_gid)
                    os.setuid(nobody.pw_uid)
                code = 0
                if not os.access(slm_rerank_ripgrep.find_rg() or "", os.X_OK):
                    code = 77
                else:
                    unreadable_scenario(folder, monkeypatch)
            except BaseException:  # noqa: BLE001 - told to the parent by the exit code
                traceback.print_exc()
                code = 1
            finally:
                os._exit(code)
        _, status = os.waitpid(pid, 0)
        code = os.waitstatus_to_exitcode(status)
        if code == 77:
            pytest.skip("rg is not executable by the user nobody")
        assert code == 0
    finally:
        subprocess.run(["chmod", "-R", "u+rwx", str(folder)], check=False)
        shutil.rmtree(folder, ignore_errors=True)


# --- case variants (one word), odd letters, changes between queries ----------------------

#: a word's pieces: case variants of one spelling, the long s and the Kelvin sign in any
#: case around them, letters that fold to no ASCII letter (Turkish i, sharp s, final
#: sigma, full-width, a combining mark), digits and underscores
VARIANT_PIECES = ["s", "S", "\u017f", "k", "K", "\u212a", "i", "I", "\u0130", "\u0131",
                  "t", "T", "e", "E", "\u00df", "\u1e9e", "\u03c2", "\u03a3", "\uff33",
                  "\uff53", "\u0301", "_", "1", "a", "A", "\u00e9"]
VARIANT_TERMS = [["s"], ["k"], ["st", "s"], ["set", "st", "s", "e"], ["ki", "k", "i"],
                 ["_1", "1", "_"], ["sa", "as", "a"], ["ss", "s"], ["kk", "sk", "ks"],
                 ["tei", "ite", "ti"], ["ssss", "sss", "ss"]]


def variant_text(rng: random.Random, words: int) -> bytes:
    out = []
    for _ in range(words):
        out.append("".join(rng.choice(VARIANT_PIECES) for _ in range(rng.randint(1, 6))))
        out.append(rng.choice([" ", "\n", "\r\n", ".", "-"]))
    return "".join(out).encode()


@pytest.mark.parametrize(("seed", "tail", "pieces_from"), [
    (1, 4096, 4096), (2, 1, 4096), (3, 4096, 0), (4, 2, 0), (5, 7, 0)])
def test_case_variants_and_odd_letters_count_as_rg_counts_them_as_files_change(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, later: None, seed: int, tail: int,
        pieces_from: int) -> None:
    monkeypatch.setattr(word_index, "_TAIL_LINES", tail)
    monkeypatch.setattr(word_index, "PIECES_FROM", pieces_from)
    rng = random.Random(seed)
    root = write(tmp_path / "t", {f"f{n}.txt": variant_text(rng, rng.randint(0, 300))
                                  for n in range(12)})
    checks = searches(root, monkeypatch)
    for round_ in range(8):
        for terms in rng.sample(VARIANT_TERMS, 4):
            checks.same(terms)
        for n in rng.sample(range(12), 3):  # a word's variants appear and go
            (root / f"f{n}.txt").write_bytes(variant_text(rng, rng.randint(0, 300)))
        (root / f"new{round_}.txt").write_bytes(variant_text(rng, 50))
        if round_ % 3 == 2:  # a build after many dead postings starts a new tree
            checks.build()
