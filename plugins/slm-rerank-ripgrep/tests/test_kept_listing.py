"""A query of an indexed tree reuses rg's last listing only while nothing that shapes it
changed: an edited, added, removed or newly ignored file is seen by the next query."""

from __future__ import annotations

import os
import stat
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import slm_rerank_ripgrep
from slm_rerank_ripgrep import listing, word_index

from slm_rerank.registrations import SourceHits, SourceQuery


@pytest.fixture(autouse=True)
def fresh_index() -> Iterator[None]:
    word_index.forget()
    yield
    word_index.forget()


@pytest.fixture
def listings(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The root of each ``rg --files`` run."""
    runs: list[str] = []
    real = slm_rerank_ripgrep._start

    def counted(argv: list[str], root: Path):  # type: ignore[no-untyped-def]
        if "--files" in argv:
            runs.append(str(root))
        return real(argv, root)

    monkeypatch.setattr(slm_rerank_ripgrep, "_start", counted)
    return runs


def later(monkeypatch: pytest.MonkeyPatch) -> None:
    """The index's clock an hour on: every file and folder looks old enough to trust."""
    monkeypatch.setattr(word_index, "now_ns", lambda: time.time_ns() + 3600 * 10**9)


def tree(root: Path) -> Path:
    (root / ".git" / "info").mkdir(parents=True)
    (root / "src" / "deep").mkdir(parents=True)
    (root / "docs").mkdir()
    (root / "build").mkdir()
    (root / ".gitignore").write_text("build/\n")
    (root / "src" / "a.py").write_text("def solve(): return roots\n")
    (root / "src" / "deep" / "b.py").write_text("polynomial = solve\n")
    (root / "docs" / "c.txt").write_text("nothing here\n")
    (root / "build" / "out.py").write_text("solve solve\n")
    return root


def search(root: Path, terms: list[str]) -> SourceHits:
    return slm_rerank_ripgrep.search(SourceQuery(root=root, terms=terms, max_filesize=10_000))


def by_rg(root: Path, terms: list[str]) -> SourceHits:
    with word_index.set_aside():
        return search(root, terms)


def indexed(root: Path) -> None:
    files = search(root, ["x"]).files
    word_index.build(root, files, time.monotonic() + 60)
    assert word_index.indexed(root)
    search(root, ["solve"])  # the listing this query runs is kept


def answers_as_rg(root: Path, terms: list[str], listings: list[str]) -> SourceHits:
    listings.clear()
    hits = search(root, terms)
    ran = len(listings)
    expected = by_rg(root, terms)
    assert hits.body_counts == expected.body_counts
    assert sorted(hits.files) == sorted(expected.files)
    assert hits.skipped == expected.skipped
    del listings[ran:]  # by_rg's own
    return hits


def test_an_unchanged_tree_is_not_listed_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                               listings: list[str]) -> None:
    root = tree(tmp_path)
    later(monkeypatch)
    indexed(root)
    hits = answers_as_rg(root, ["solve", "roots"], listings)
    assert listings == []
    assert hits.body_counts["src/a.py"] == {"solve": 1, "roots": 1}
    assert "build/out.py" not in hits.files


def _edit(root: Path) -> None:
    (root / "src" / "a.py").write_text("def solve(): return solve(roots)\n")


def _add(root: Path) -> None:
    (root / "docs" / "new.md").write_text("solve the polynomial\n")


def _add_folder(root: Path) -> None:
    (root / "src" / "deep" / "deeper").mkdir()
    (root / "src" / "deep" / "deeper" / "d.py").write_text("roots\n")


def _remove(root: Path) -> None:
    (root / "src" / "deep" / "b.py").unlink()


def _ignore_more(root: Path) -> None:
    with (root / ".gitignore").open("a") as f:
        f.write("src/deep/\n")


def _ignore_less(root: Path) -> None:
    (root / ".gitignore").write_text("# nothing ignored\n")


def _exclude(root: Path) -> None:
    (root / ".git" / "info" / "exclude").write_text("docs/\nsrc/a.py\n")


def _nested_ignore(root: Path) -> None:
    (root / "src" / ".ignore").write_text("a.py\n")


def _inside_ignored_folder(root: Path) -> None:
    (root / ".gitignore").write_text("build/out.py\n")  # the folder is searched again
    (root / "build" / "more.py").write_text("solve\n")


def _linked_ignore_file(root: Path) -> None:
    # set up before the listing is kept (see the test): here only its target is edited
    (root / "rules.txt").write_text("docs/\n")


CHANGES: dict[str, Callable[[Path], None]] = {
    "an edited file": _edit, "an added file": _add, "an added folder": _add_folder,
    "a removed file": _remove, "a file newly ignored": _ignore_more,
    "a file no longer ignored": _ignore_less, "git's exclude file": _exclude,
    "an ignore file in a folder": _nested_ignore,
    "an ignored folder's files": _inside_ignored_folder,
    "the file an ignore file links to": _linked_ignore_file,
}


@pytest.mark.parametrize("change", sorted(CHANGES))
def test_a_change_after_the_listing_is_seen_by_the_next_query(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, listings: list[str],
        change: str) -> None:
    root = tree(tmp_path)
    (root / "rules.txt").write_text("# nothing\n")
    (root / ".ignore").symlink_to(root / "rules.txt")  # rg reads it through the link
    (root / "docs" / "c.txt").write_text("the roots of a polynomial\n")
    later(monkeypatch)
    indexed(root)
    before = search(root, ["solve", "roots", "polynomial"])
    CHANGES[change](root)
    after = answers_as_rg(root, ["solve", "roots", "polynomial"], listings)
    assert (after.body_counts, sorted(after.files)) != (before.body_counts, sorted(before.files))
    # and once listed again, the tree is not listed while it stays as it is
    answers_as_rg(root, ["solve", "roots", "polynomial"], listings)
    assert len(listings) <= 1
    answers_as_rg(root, ["solve", "roots", "polynomial"], listings)
    assert listings == []


def test_a_tree_changed_within_the_racy_window_is_listed_every_query(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, listings: list[str]) -> None:
    root = tree(tmp_path)  # its folders changed just now: their stamps are not trusted yet
    walks: list[str] = []
    real = listing.shape

    def counted(at: str):  # type: ignore[no-untyped-def]
        walks.append(at)
        return real(at)

    monkeypatch.setattr(listing, "shape", counted)
    indexed(root)
    assert len(walks) == 1  # the first listing's: the next ones would find the same stamps
    for _ in range(2):
        answers_as_rg(root, ["solve"], listings)
        assert listings == [str(root)]
    assert len(walks) == 1
    later(monkeypatch)  # the minute passed: walked once more, and kept
    answers_as_rg(root, ["solve"], listings)
    answers_as_rg(root, ["solve"], listings)
    assert len(walks) == 2
    assert listings == []


def test_other_globs_are_listed_by_rg(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                      listings: list[str]) -> None:
    root = tree(tmp_path)
    later(monkeypatch)
    indexed(root)
    listings.clear()
    hits = slm_rerank_ripgrep.search(SourceQuery(root=root, terms=["solve"], globs=["*.py"],
                                                 max_filesize=10_000))
    assert listings == [str(root)]
    assert "docs/c.txt" not in hits.files


def test_a_tree_of_too_many_folders_is_listed_every_query(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, listings: list[str]) -> None:
    root = tree(tmp_path)
    later(monkeypatch)
    monkeypatch.setattr(listing, "MAX_FOLDERS", 3)
    indexed(root)
    for _ in range(2):
        answers_as_rg(root, ["solve"], listings)
        assert listings == [str(root)]


def test_a_hidden_path_rg_was_let_into_keeps_no_listing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, listings: list[str]) -> None:
    root = tree(tmp_path)
    (root / ".ignore").write_text("!.config/\n")
    (root / ".config").mkdir()
    (root / ".config" / "x.py").write_text("solve\n")
    later(monkeypatch)
    indexed(root)
    hits = answers_as_rg(root, ["solve"], listings)
    assert ".config/x.py" in hits.files
    assert listings == [str(root)]
    (root / ".config" / "y.py").write_text("solve\n")  # no folder the walk stamps changed
    hits = answers_as_rg(root, ["solve"], listings)
    assert ".config/y.py" in hits.files


def test_a_kept_listing_holds_the_index_s_own_paths(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    root = tree(tmp_path)
    later(monkeypatch)
    indexed(root)
    kept_tree = word_index.tree_of(root)
    assert kept_tree is not None and kept_tree.listing is not None
    own = {id(rel) for rel in kept_tree.files}
    assert sorted(kept_tree.listing.files) == sorted(kept_tree.files)
    assert all(id(rel) in own for rel in kept_tree.listing.files)  # not a copy of each


def test_a_query_the_index_leaves_to_rg_is_matched_over_the_kept_listing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, listings: list[str]) -> None:
    # rg's output is not kept: what rg printed is made again from the kept paths, byte for
    # byte, a file name that is not UTF-8 and one with a space and a newline too
    root = tree(tmp_path)
    odd = [os.fsdecode(b"src/caf\xe9.py"), "src/two words\n.py"]
    for name in odd:
        (root / name).write_text("solve the roots\n")
    later(monkeypatch)
    indexed(root)
    kept = word_index.tree_of(root).listing
    assert kept is not None
    rg = slm_rerank_ripgrep.find_rg()
    assert rg is not None
    printed = subprocess.run([rg, "--files", "--null"], cwd=root, capture_output=True,
                             check=True).stdout
    assert sorted(kept.output().split(b"\0")) == sorted(printed.split(b"\0"))
    monkeypatch.setattr(word_index, "REREAD_FILES", 0)  # a changed file: the index declines
    (root / "src" / "a.py").write_text("def solve(): return roots + roots\n")
    hits = answers_as_rg(root, ["solve", "roots"], listings)
    assert listings == []  # the kept listing, not a new rg --files
    assert all(hits.body_counts[name] == {"solve": 1, "roots": 1} for name in odd)
    assert hits.body_counts["src/a.py"] == {"solve": 1, "roots": 2}


def test_a_stamp_too_large_to_pack_never_passes_for_unchanged(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, listings: list[str]) -> None:
    root = tree(tmp_path)
    later(monkeypatch)
    real = listing._stamp

    def past_64_bits(path: str) -> listing.Stamp:  # a device number, for every folder
        was = real(path)
        return (1 << 64, *was[1:]) if stat.S_ISDIR(was[2]) else was

    monkeypatch.setattr(listing, "_stamp", past_64_bits)
    indexed(root)
    assert word_index.tree_of(root).listing is not None
    for _ in range(2):  # each query lists the tree again, as a changed stamp makes it
        answers_as_rg(root, ["solve"], listings)
        assert listings == [str(root)]
