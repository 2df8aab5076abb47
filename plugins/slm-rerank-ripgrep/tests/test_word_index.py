"""The word index answers exactly as rg's matching pass does, or leaves the query to rg."""

from __future__ import annotations

import base64
import errno
import gc
import os
import random
import sys
import threading
import time
import tracemalloc
from array import array
from collections.abc import Callable, Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest
import slm_rerank_ripgrep
from slm_rerank_ripgrep import mapped, pieces, word_index
from slm_rerank_ripgrep.pieces import PieceBuild

from slm_rerank.plugin_kit import Unfinished
from slm_rerank.registrations import SourceHits, SourceQuery
from slm_rerank.testing import as_warm_worker, mapped_resident_kib, with_idle_thread

#: what a word may be made of in the generated files: cases, the long s and the Kelvin sign
#: (which rg -i matches as s and k), digits, underscores, other letters
PIECES = ["set", "Set", "SET", "imag", "IMAGE", "imageset", "ImageSet", "real", "Reals",
          "ſet", "ſ", "\u212aind", "kind", "x_1", "y2", "__init__", "é", "ß", "Straße",
          "over", "subset", "resetting", "ab", "k", "s"]
SEPARATORS = [" ", "\n", ".", "(", "\t", "-", "/", "\r\n", ", "]
TERM_SETS = [["set", "imageset", "imag", "real"], ["k", "s"], ["kind", "x_1", "2"],
             ["init", "_"], ["resetting", "set", "reset"], ["nothing_here"]]


@pytest.fixture(autouse=True)
def fresh_index() -> Iterator[None]:
    word_index.forget()
    yield
    word_index.forget()


@pytest.fixture
def matching_runs(monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """The terms of each time rg's matching pass ran."""
    runs: list[list[str]] = []
    real = slm_rerank_ripgrep._start_matching

    def counted(rg: str, scope: list[str], terms: list[str], query: SourceQuery):  # type: ignore[no-untyped-def]
        runs.append(list(terms))
        return real(rg, scope, terms, query)

    monkeypatch.setattr(slm_rerank_ripgrep, "_start_matching", counted)
    return runs


def later(monkeypatch: pytest.MonkeyPatch, seconds: float) -> None:
    """The index's clock, ``seconds`` from now (files then look old enough to trust)."""
    monkeypatch.setattr(word_index, "now_ns", lambda: time.time_ns() + int(seconds * 1e9))


def text(rng: random.Random, words: int) -> str:
    return "".join(rng.choice(PIECES) + rng.choice(SEPARATORS) for _ in range(words))


def generated_tree(root: Path, seed: int) -> Path:
    rng = random.Random(seed)
    for n in range(40):
        folder = root / rng.choice(["", "src", "src/deep", "docs", "tests"])
        folder.mkdir(parents=True, exist_ok=True)
        body = text(rng, rng.randint(0, 400)).encode("utf-8")
        if n % 9 == 0:
            body = b"\xef\xbb\xbf" + body  # a UTF-8 byte-order mark
        if n % 7 == 0:
            body += b"\xffset\xfe Real\xc3"  # bytes that are not UTF-8, inside and between words
        (folder / f"f{n}.txt").write_bytes(body)
    (root / "image.png").write_bytes(b"\x89PNG\r\n\x1a\n\0\0\0set real" * 20)  # NUL early
    (root / "big.txt").write_bytes(b"set " * 400)  # over the max_filesize the tests use
    (root / "ignored.txt").write_text("set real imageset")
    (root / ".gitignore").write_text("ignored.txt\n")
    (root / ".git").mkdir()
    (root / os.fsdecode(b"caf\xe9 set.txt")).write_text("real sets")  # a Latin-1 name
    return root


def search(root: Path, terms: list[str], max_filesize: int = 1000) -> SourceHits:
    return slm_rerank_ripgrep.search(SourceQuery(root=root, terms=terms,
                                                 max_filesize=max_filesize))


def by_rg(root: Path, terms: list[str], max_filesize: int = 1000) -> SourceHits:
    with word_index.set_aside():
        return search(root, terms, max_filesize)


def answered_by_the_index_as_rg(root: Path, term_sets: list[list[str]],
                                matching_runs: list[list[str]],
                                max_filesize: int = 1000) -> None:
    """Each set of terms answered from the index (no matching pass of rg), as rg answers it."""
    matching_runs.clear()
    for terms in term_sets:
        from_index = search(root, terms, max_filesize)
        assert matching_runs == [], "rg's matching pass ran although the index could answer"
        same(from_index, by_rg(root, terms, max_filesize))
        matching_runs.clear()


def build(root: Path) -> None:
    files = search(root, ["x"]).files
    word_index.build(root, files, time.monotonic() + 60)
    assert word_index.indexed(root)


def same(a: SourceHits, b: SourceHits) -> None:
    assert a.body_counts == b.body_counts
    assert a.skipped == b.skipped
    assert sorted(a.files) == sorted(b.files)


@pytest.mark.parametrize(("seed", "tail", "pieces_from"), [
    (1, 4096, 4096), (2, 4096, 4096), (3, 4096, 4096), (1, 2, 4096), (2, 5, 4096),
    (1, 4096, 0), (2, 4096, 0), (3, 3, 0)])
def test_the_index_counts_every_term_in_every_file_as_rg_does(
        tmp_path: Path, seed: int, tail: int, pieces_from: int,
        monkeypatch: pytest.MonkeyPatch, matching_runs: list[list[str]]) -> None:
    # a short tail: the spellings are joined into the index's text many times over, and
    # a query finds words in both the text and the tail; pieces_from 0: a term's words are
    # found by its rarest three letters (``pieces.py``) in a tree of a few words too
    monkeypatch.setattr(word_index, "_TAIL_LINES", tail)
    monkeypatch.setattr(word_index, "PIECES_FROM", pieces_from)
    root = generated_tree(tmp_path, seed)
    later(monkeypatch, 3600)
    build(root)
    matching_runs.clear()
    for terms in TERM_SETS:
        from_index = search(root, terms)
        assert matching_runs == [], "rg's matching pass ran although the index could answer"
        from_rg = by_rg(root, terms)
        same(from_index, from_rg)
        matching_runs.clear()
    # the files matched, with their sizes as they are (the ranking needs no stat of its own)
    found = search(root, ["set"])
    assert found.body_counts and set(found.sizes) == set(found.body_counts)
    assert all(found.sizes[p] == (root / p).stat().st_size for p in found.sizes)


def test_case_variants_are_one_word_and_count_as_rg_counts_them(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, matching_runs: list[list[str]]) -> None:
    # rg -i matches Path, PATH and path alike: the index keeps them as one word, its
    # occurrences summed per file; a word with the long s or the Kelvin sign stays its own
    (tmp_path / ".git").mkdir()
    (tmp_path / "a.py").write_text("Path PATH path pAth MyPath_2 mypath_2\nſtate STATE\n")
    (tmp_path / "b.py").write_text("PATH\nSTATE State \u212aind kind\n")
    (tmp_path / "c.py").write_text("nothing here\n")
    later(monkeypatch, 3600)
    build(tmp_path)
    tree = word_index._TREES[word_index._key(tmp_path)]
    # path, mypath_2, ſtate, state, \u212aind, kind, nothing, here
    assert tree.words == 8
    matching_runs.clear()
    for terms in (["path"], ["pat", "ath"], ["state"], ["kind"], ["at", "mypath_2"]):
        from_index = search(tmp_path, terms)
        assert matching_runs == [], "rg's matching pass ran although the index could answer"
        same(from_index, by_rg(tmp_path, terms))
        matching_runs.clear()
    assert search(tmp_path, ["path"]).body_counts["a.py"] == {"path": 6}


@pytest.mark.parametrize("piece", [1, 2, 3, 7, 64])
def test_a_text_counted_a_slice_at_a_time_counts_every_word_as_counted_whole(
        monkeypatch: pytest.MonkeyPatch, piece: int) -> None:
    # a slice ends before an ASCII byte no word holds: never inside a word, nor inside the
    # long s, the Kelvin sign or another letter's UTF-8 bytes, whatever the slice's size
    rng = random.Random(piece)
    texts = [text(rng, rng.randint(0, 300)).encode("utf-8") for _ in range(30)]
    texts += [b"\xffset\xfe Real\xc3" * 9, b"x" * 500, b"a_b" * 40 + b"\n" + b"C" * 99,
              "\u017fet\u017f\u017f \u212a\u212aind".encode() * 5, b"", b"!?-" * 10]
    whole = [word_index.words_of(t) for t in texts]
    monkeypatch.setattr(word_index, "WORDS_SLICE", piece)
    assert [word_index.words_of(t) for t in texts] == whole
    assert whole[-4] == {b"a_b" * 40: 1, b"c" * 99: 1}  # lower-cased, joined across slices


def test_a_file_of_many_new_words_is_posted_holding_each_word_once(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        matching_runs: list[list[str]]) -> None:
    # encoded data (a 2 MB picture in an SVG: 82,233 words) was sympy's build peak: each
    # word's spelling was made again beside its key, and the text made anew at each join
    monkeypatch.setattr(word_index, "_TAIL_LINES", 1 << 30)  # joined below, not by post
    (tmp_path / ".git").mkdir()
    (tmp_path / "a.txt").write_text(" ".join(f"W{i}abc" for i in range(5000)) + " w1abc")
    later(monkeypatch, 3600)
    tree = built(tmp_path)
    tree.join()
    text = tree.text
    fd = os.open(tmp_path, os.O_RDONLY)
    try:
        counted: list[dict[bytes, int]] = []
        (tmp_path / "b.txt").write_text("w1abc w2abc new1 New2 NEW3")
        tree.files["b.txt"] = tree.read("b.txt", fd, None, counted)
    finally:
        os.close(fd)
    keys = list(counted[0])
    assert tree.tail == [b"new1", b"new2", b"new3"]
    assert all(kept is key for kept, key in zip(tree.tail, keys[2:], strict=True))
    tree.join()
    assert tree.text is text  # grown where it is, not made anew
    assert bytes(text).split(b"\n")[-4:] == [b"new1", b"new2", b"new3", b""]
    answered_by_the_index_as_rg(tmp_path, [["new2", "w1abc"], ["abc"]], matching_runs)


@pytest.mark.parametrize("between", [" ", "(", "\u00a0", "\u3001"])  # a no-break space, CJK
def test_a_large_file_is_counted_without_an_object_for_each_of_its_words(between: str) -> None:
    # 2 MiB of short words: split whole they were 22 MiB of objects at once (issue 30),
    # whatever separates them
    data = f"Alpha{between}beta{between}gamma{between}".encode() * (2 << 20 >> 4)
    tracemalloc.start()
    try:
        counts = word_index.words_of(data)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert counts == {b"alpha": 1 << 17, b"beta": 1 << 17, b"gamma": 1 << 17}
    assert peak < 3 << 20, f"{peak >> 20} MiB to count the words of a 2 MiB file"


def encoded(size: int, seed: int) -> bytes:
    """Encoded data, as an SVG's picture or a lock file's hashes hold it: most of its words
    are different."""
    return base64.b64encode(random.Random(seed).randbytes(size))


def traced_peak(run: Callable[[], object]) -> int:
    tracemalloc.start()
    try:
        run()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_a_text_of_many_different_words_is_counted_in_parts_of_a_bounded_size() -> None:
    data = encoded(1_500_000, 1) + b" " + b"Common " * 300
    whole = word_index.words_of(data)
    parts = list(word_index.word_parts(data, most=4096))
    assert len(whole) > 50_000 and len(parts) > 10
    assert all(len(part) >= 4096 for part in parts[:-1])
    summed: dict[bytes, int] = {}
    for part in parts:
        for word, n in part.items():
            summed[word] = summed.get(word, 0) + n
    assert summed == whole
    del parts, summed

    def counted_part_by_part() -> None:
        for part in word_index.word_parts(data, most=4096):
            del part

    # one dict of every word took 6.5 MiB here (8 MiB for sympy's SVG of 82,233 words)
    in_parts = traced_peak(counted_part_by_part)
    at_once = traced_peak(lambda: word_index.words_of(data))
    assert in_parts < 1 << 20 < 4 << 20 < at_once, (in_parts, at_once)


@pytest.mark.parametrize("part_words", [1, 50, 1 << 30])
def test_a_file_posted_in_parts_counts_as_rg_counts_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, matching_runs: list[list[str]],
        part_words: int) -> None:
    # a word in more than one part of a file has a posting in each: a query adds them up,
    # whether built, packed, or read by the query itself
    monkeypatch.setattr(word_index, "PART_WORDS", part_words)
    monkeypatch.setattr(word_index, "WORDS_SLICE", 128)
    monkeypatch.setattr(word_index, "PACK_WORDS", 7)
    (tmp_path / ".git").mkdir()
    rng = random.Random(part_words)
    many = " ".join(f"w{i}" for i in range(1500))
    (tmp_path / "a.txt").write_text(text(rng, 2000) + many + " Set" * 300 + text(rng, 50))
    (tmp_path / "b.txt").write_text(text(rng, 300))
    later(monkeypatch, 3600)
    tree = built(tmp_path)
    distinct = len(word_index.words_of((tmp_path / "a.txt").read_bytes()))
    posted = tree.files["a.txt"].posted
    assert (posted > distinct if part_words < distinct else posted == distinct), (
        posted, distinct, tree.files["a.txt"])
    term_sets = [["set"], ["w1", "w149"], ["imag", "real"], ["k", "s"], ["_"]]
    answered_by_the_index_as_rg(tmp_path, term_sets, matching_runs, 1 << 20)
    (tmp_path / "c.txt").write_text(many + " SET" * 260)  # read by the query
    answered_by_the_index_as_rg(tmp_path, term_sets, matching_runs, 1 << 20)
    assert "c.txt" in search(tmp_path, ["set"], 1 << 20).body_counts


def test_spellings_are_joined_a_few_thousand_at_a_time(tmp_path: Path) -> None:
    # bytes.join takes 80 bytes a line while it runs: 82,233 new words (an SVG's picture)
    # took 6.5 MiB at once
    tree = word_index._Tree(str(tmp_path))
    tree.tail = [f"w{i}x".encode() for i in range(50_000)]
    peak = traced_peak(tree.join)
    assert bytes(tree.text).split(b"\n") == [f"w{i}x".encode() for i in range(50_000)] + [b""]
    assert [tree.spelled(i) for i in (0, 4095, 4096, 49_999)] == [
        b"w0x", b"w4095x", b"w4096x", b"w49999x"]
    assert peak < 2 << 20, f"{peak >> 10} KiB to join 50,000 spellings"


@pytest.mark.parametrize("times", [1, 254, 255, 256, 70_000])
def test_a_word_said_many_times_in_many_files_counts_as_rg_counts_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, matching_runs: list[list[str]],
        times: int) -> None:
    # a posting keeps a count under 255 in its own number, and a larger one in the next
    (tmp_path / ".git").mkdir()
    for n in range(6):
        (tmp_path / f"f{n}.py").write_text("value " * (times + n - 3 if times > 3 else times)
                                           + "other\n")
    later(monkeypatch, 3600)
    files = search(tmp_path, ["x"]).files
    word_index.build(tmp_path, files, time.monotonic() + 60)
    answered_by_the_index_as_rg(tmp_path, [["value"], ["val", "other"], ["lu"]],
                                matching_runs)


def test_a_query_counts_its_terms_without_a_dict_of_files_for_each(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, matching_runs: list[list[str]]) -> None:
    # eight words, each in 3,000 files (and two in one word): what a query's count takes
    # beyond the counts it gives is about one array of a count per file, not a dict of the
    # files for each term (a MiB for a word in 10,000 files: most of a query's peak)
    (tmp_path / ".git").mkdir()
    words = [f"word{letter}" for letter in "abcdefgh"]
    for n in range(3000):
        (tmp_path / f"f{n}.py").write_text(" ".join(words) + f" worda_wordb{n % 3}\n")
    later(monkeypatch, 3600)
    build(tmp_path)
    monkeypatch.setattr(mapped, "MAP_FROM", 1 << 60)  # no pages mapped: objects only
    word_index.prepare(tmp_path, words, 1000)  # its clean check, kept from then on
    gc.collect()
    tracemalloc.start()
    try:
        prepared = word_index.prepare(tmp_path, words, 1000)
        held, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert prepared is not None and len(prepared.by_fid) == 3000
    assert prepared.by_fid[0] == {word: 1 for word in words} | {"worda": 2, "wordb": 2}
    assert peak - held < 400 << 10, f"{(peak - held) >> 10} KiB beyond the counts"
    answered_by_the_index_as_rg(tmp_path, [words, ["worda", "wordb"]], matching_runs)


def test_a_check_of_hard_linked_files_holds_no_list_of_their_records(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, matching_runs: list[list[str]]) -> None:
    # each file also linked from outside the tree: every query checks each of them (the
    # kernel's watch cannot see a write through the other link), and that check held a
    # list of (path, record) pairs and one of the exposed paths on top of what it keeps
    root, outside = tmp_path / "tree", tmp_path / "outside"
    (root / ".git").mkdir(parents=True)
    outside.mkdir()
    for n in range(6000):
        (root / f"f{n}.py").write_text(f"alpha beta{n}\n")
        os.link(root / f"f{n}.py", outside / f"f{n}.py")
    later(monkeypatch, 3600)
    build(root)
    word_index.prepare(root, ["alpha"], 1000)  # the check kept, the exposed files in it
    tree = word_index._TREES[word_index._key(root)]
    assert tree.clean is not None and len(tree.clean.exposed) == 6000
    gc.collect()
    peak = traced_peak(lambda: word_index.prepare(root, ["nowhere"], 1000))
    assert peak < 550 << 10, f"{peak >> 10} KiB to check 6,000 exposed files"
    answered_by_the_index_as_rg(root, [["alpha"], ["beta1", "alpha"]], matching_runs)


def test_a_tree_out_of_file_ids_leaves_the_search_to_rg_and_is_built_again(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / ".git").mkdir()
    for n in range(4):
        (tmp_path / f"f{n}.py").write_text(f"alpha beta{n}\n")
    monkeypatch.setattr(word_index, "MAX_FILE_IDS", 6)
    later(monkeypatch, 3600)
    build(tmp_path)
    tree = word_index._TREES[word_index._key(tmp_path)]
    for n in range(4):  # each version of a file takes an id: two are left
        (tmp_path / "f0.py").write_text(f"alpha gamma{n}\n")
        later(monkeypatch, 7200 + n)
        same(search(tmp_path, ["alpha", "gamma"]), by_rg(tmp_path, ["alpha", "gamma"]))
    # the version with no id left is not modelled: the tree is set aside for a while, as
    # for any file it does not model, and then built afresh
    assert len(tree.live) == 6 and not word_index.indexed(tmp_path)
    monkeypatch.setattr(word_index, "REFUSED_SECONDS", 0)
    build(tmp_path)
    fresh = word_index._TREES[word_index._key(tmp_path)]
    assert fresh is not tree and len(fresh.live) == 4
    same(search(tmp_path, ["alpha", "gamma"]), by_rg(tmp_path, ["alpha", "gamma"]))


@pytest.mark.parametrize(("tail", "pieces_from"), [(4096, 4096), (1, 4096), (4096, 0)])
def test_what_changed_since_the_build_is_read_again(
        tmp_path: Path, tail: int, pieces_from: int, monkeypatch: pytest.MonkeyPatch,
        matching_runs: list[list[str]]) -> None:
    monkeypatch.setattr(word_index, "_TAIL_LINES", tail)
    monkeypatch.setattr(word_index, "PIECES_FROM", pieces_from)
    root = generated_tree(tmp_path, 4)
    build(root)  # built now: every file is too recent to trust on its stamp
    (root / "src" / "new.py").parent.mkdir(exist_ok=True)
    (root / "src" / "new.py").write_text("imageset = Reals\n")
    victim = next(p for p in sorted(root.rglob("f*.txt")))
    stamp = victim.stat()
    body = victim.read_bytes()
    # the same size and modification time, other words: only the change time tells
    victim.write_bytes(b"Q" * len(body) if b"set" in body else b"set" + body[3:])
    os.utime(victim, ns=(stamp.st_atime_ns, stamp.st_mtime_ns))
    gone = sorted(root.rglob("f*.txt"))[-1]
    gone.unlink()
    matching_runs.clear()
    for terms in TERM_SETS[:3]:
        same(search(root, terms), by_rg(root, terms))
    assert len(matching_runs) == 3  # the by_rg ones: the index answered every other
    later(monkeypatch, 3600)
    (root / "src" / "new.py").write_text("nothing to see\n")
    same(search(root, ["imageset"]), by_rg(root, ["imageset"]))


@pytest.mark.parametrize("block", [1, 7, 4096])
def test_postings_packed_at_a_builds_end_count_as_rg_counts_them_before_and_after_changes(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, matching_runs: list[list[str]],
        block: int) -> None:
    monkeypatch.setattr(word_index, "PACK_FROM", 0)
    monkeypatch.setattr(word_index, "PACK_WORDS", block)
    root = generated_tree(tmp_path, 6)
    later(monkeypatch, 3600)
    build(root)
    tree = word_index._TREES[word_index._key(root)]
    assert tree.more == {} and tree.packs  # every posting but a word's first is packed
    matching_runs.clear()
    for terms in TERM_SETS:
        same(search(root, terms), by_rg(root, terms))
    assert len(matching_runs) == len(TERM_SETS)  # the by_rg ones
    # changed files post into ``more`` beside the blocks; new words get ids past them
    rng = random.Random(7)
    for n, path in enumerate(sorted(root.rglob("f*.txt"))[:12]):
        path.write_text(text(rng, 40) + f" brandnew{n} set real")
    later(monkeypatch, 7200)
    for terms in TERM_SETS + [["brandnew"]]:
        same(search(root, terms), by_rg(root, terms))
    assert tree.more
    build(root)  # packed again: the blocks those words are in
    assert word_index._TREES[word_index._key(root)] is tree and tree.more == {}
    for terms in TERM_SETS + [["brandnew"]]:
        same(search(root, terms), by_rg(root, terms))


def test_a_build_of_files_sharing_their_words_packs_a_few_times_not_once_a_file(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        matching_runs: list[list[str]]) -> None:
    # each file posts again to every word there is: ``more`` is past half the words after
    # every file, and a pack copies every posting so far (quadratic in the files)
    (tmp_path / ".git").mkdir()
    shared = " ".join(f"word{i}" for i in range(600))
    for n in range(300):
        (tmp_path / f"f{n}.txt").write_text(f"{shared} own{n}\n")
    packs: list[int] = []
    real = word_index._Tree.pack

    def counted(tree: word_index._Tree) -> None:
        packs.append(tree.postings_count)
        real(tree)

    monkeypatch.setattr(word_index._Tree, "pack", counted)
    later(monkeypatch, 3600)
    build(tmp_path)
    assert 1 <= len(packs) <= 12, len(packs)
    matching_runs.clear()
    for terms in (["word1"], ["own2", "word59"], ["ord"]):
        same(search(tmp_path, terms), by_rg(tmp_path, terms))


@pytest.mark.parametrize(("block", "pending_from"), [(1, 0), (2, 0), (5, 0), (4096, 0),
                                                    (2, 40), (3, 1 << 16)])
def test_postings_packed_in_a_build_of_many_windows_count_as_rg_counts_them(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, matching_runs: list[list[str]],
        block: int, pending_from: int) -> None:
    # packed on the build's way, between its windows, with counts of 255 and more (two
    # numbers) beside those under it, and again after files changed and new words came
    monkeypatch.setattr(word_index, "PACK_FROM", 0)
    monkeypatch.setattr(word_index, "PACK_WORDS", block)
    monkeypatch.setattr(word_index, "PENDING_FROM", pending_from)
    packs: list[int] = []
    real = word_index._Tree.pack

    def counted(tree: word_index._Tree) -> None:
        packs.append(len(tree.pending))
        real(tree)
        assert not tree.pending and tree.more == {}

    monkeypatch.setattr(word_index._Tree, "pack", counted)
    rng = random.Random(block)
    (tmp_path / ".git").mkdir()

    def write(n: int) -> None:
        said = rng.choice([1, 254, 255, 256, 300])
        (tmp_path / f"f{n}.txt").write_text(
            text(rng, rng.randint(0, 60)) + f" value{n % 3} " * said + " w_" * (said - 1))

    for n in range(30):
        write(n)
    terms_sets = [["value"], ["value1", "w_"], ["set", "real", "lu"], ["k", "s", "2"]]
    for version in range(3):
        later(monkeypatch, 3600 * (version + 1))
        files = search(tmp_path, ["x"]).files
        clock = Clock()
        monkeypatch.setattr(word_index, "time", clock)
        task = word_index.Build(tmp_path, files)
        windows = 1
        while isinstance(task(clock.now + 3), Unfinished):
            windows += 1
        monkeypatch.setattr(word_index, "time", time)
        assert windows > 3 or version > 0  # later: the files that changed
        tree = word_index._TREES[word_index._key(tmp_path)]
        assert tree.more == {} and tree.packs and not tree.pending
        assert tree.packed == sum(map(len, tree.packs))
        if version == 0:  # packed on the way as well as at the end, or only at the end
            assert (len(packs) > 2) == (pending_from < 1 << 16), packs
        packs.clear()
        matching_runs.clear()
        for terms in terms_sets:
            same(search(tmp_path, terms), by_rg(tmp_path, terms))
        assert len(matching_runs) == len(terms_sets)  # the by_rg ones
        for n in rng.sample(range(36), 8):
            write(n)


@pytest.mark.parametrize("file_fails", [False, True])
def test_a_query_on_a_build_about_done_reads_what_the_build_posted_since_its_last_pack(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        matching_runs: list[list[str]], file_fails: bool) -> None:
    # a query may use a tree whose build has a few files left (it reads them itself): the
    # postings the build holds back for its next pack are packed first, to a file mapped
    # as the build's packs are (in memory, every block they touched was made again there)
    monkeypatch.setattr(word_index, "PENDING_FROM", 1 << 20)
    monkeypatch.setattr(mapped, "FOLDER", tmp_path / "_mapped")
    monkeypatch.setattr(mapped, "MAP_FROM", 0)
    root = generated_tree(tmp_path, 4)
    later(monkeypatch, 3600)
    files = search(root, ["x"]).files
    clock = Clock()
    monkeypatch.setattr(word_index, "time", clock)
    task = word_index.Build(root, files)
    tree = None
    while isinstance(task(clock.now + 3), Unfinished):
        tree = word_index._TREES[word_index._key(root)]
        if len(files) - len(tree.files) <= word_index.REREAD_FILES and tree.pending:
            break
    monkeypatch.setattr(word_index, "time", time)
    assert tree is not None and tree.pending and len(tree.files) < len(files)
    if file_fails:  # no file for the query's pack: its blocks are made in memory, and said
        def full(where: Path) -> int:
            raise OSError(errno.ENOSPC, "No space left on device")

        monkeypatch.setattr(mapped, "_nameless", full)
    answered_by_the_index_as_rg(root, TERM_SETS, matching_runs)
    assert not tree.pending and tree.packs
    if file_fails:
        assert "No space left on device" in tree.unmapped
        assert any(isinstance(block, array) and len(block) for block in tree.packs)
    else:
        assert all(isinstance(block, memoryview) for block in tree.packs if len(block))
        assert not tree.unmapped


def test_a_file_it_does_not_model_leaves_the_tree_to_rg(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        matching_runs: list[list[str]]) -> None:
    root = generated_tree(tmp_path, 5)
    later(monkeypatch, 3600)
    monkeypatch.setattr(word_index, "BINARY_PROBE", 64)  # the tests' files are small
    build(root)
    # a NUL byte past the probe: what rg prints then depends on its buffers
    (root / "late.bin").write_bytes(b"set\n" * 40 + b"\0 set")
    matching_runs.clear()
    hits = search(root, ["set"])
    assert matching_runs == [["set"]]
    same(hits, by_rg(root, ["set"]))
    assert not word_index.indexed(root)
    assert "late.bin" in word_index.summary()
    # and it is not built again at once: rg answers, no idle work is asked for
    assert not word_index.wanted(root)


def test_a_utf16_file_leaves_the_tree_to_rg(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                            matching_runs: list[list[str]]) -> None:
    root = generated_tree(tmp_path, 6)
    later(monkeypatch, 3600)
    (root / "wide.txt").write_bytes(b"\xff\xfe" + "set real".encode("utf-16-le"))
    build(root)
    matching_runs.clear()
    hits = search(root, ["set"])
    assert matching_runs == [["set"]]
    assert hits.body_counts["wide.txt"] == {"set": 1}  # rg transcodes it


@pytest.mark.parametrize("terms", [["café"], ["foo.bar"], ["set", "a-b"]])
def test_terms_it_cannot_answer_for_go_to_rg(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                             matching_runs: list[list[str]],
                                             terms: list[str]) -> None:
    root = generated_tree(tmp_path, 7)
    later(monkeypatch, 3600)
    build(root)
    matching_runs.clear()
    hits = search(root, terms)
    assert len(matching_runs) == 1
    same(hits, by_rg(root, terms))


def test_too_many_changed_files_go_to_rg_and_the_index_catches_up_when_idle(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        matching_runs: list[list[str]]) -> None:
    root = generated_tree(tmp_path, 8)
    later(monkeypatch, 3600)
    build(root)
    for n in range(word_index.REREAD_FILES + 1):
        (root / f"added{n}.txt").write_text(f"set {n}\n")
    matching_runs.clear()
    with as_warm_worker() as run_idle_work:
        hits = search(root, ["set"])
        assert matching_runs == [["set"]]
        assert hits.body_counts["added0.txt"] == {"set": 1}
        assert run_idle_work(time.monotonic() + 30) == 1  # the build it asked for
    matching_runs.clear()
    same(search(root, ["set"]), by_rg(root, ["set"]))
    assert len(matching_runs) == 1  # by_rg's own


def test_outside_the_warm_process_no_index_is_built(tmp_path: Path,
                                                    matching_runs: list[list[str]]) -> None:
    root = generated_tree(tmp_path, 9)
    search(root, ["set"])
    search(root, ["set"])
    assert matching_runs == [["set"], ["set"]]
    assert not word_index.indexed(root)
    with as_warm_worker() as run_idle_work:
        assert run_idle_work(time.monotonic() + 30) == 0  # nothing was asked for


def test_the_first_search_in_the_worker_asks_for_the_build_and_the_next_uses_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        matching_runs: list[list[str]]) -> None:
    root = generated_tree(tmp_path, 13)
    later(monkeypatch, 3600)
    with as_warm_worker() as run_idle_work:
        first = search(root, ["imageset", "set"])
        assert run_idle_work(time.monotonic() + 30) == 1
        second = search(root, ["imageset", "set"])
    assert matching_runs == [["imageset", "set"]]  # the first search only
    same(first, second)
    assert word_index.summary().startswith(f"{os.path.realpath(root)} (")


def test_named_paths_and_explaining_searches_are_left_to_rg(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        matching_runs: list[list[str]]) -> None:
    root = generated_tree(tmp_path, 10)
    later(monkeypatch, 3600)
    build(root)
    matching_runs.clear()
    slm_rerank_ripgrep.search(SourceQuery(root=root, terms=["set"], paths=[root / "src"]))
    slm_rerank_ripgrep.search(SourceQuery(root=root, terms=["set"], explain=True))
    assert len(matching_runs) == 2


def test_a_tree_over_the_file_bound_is_refused(tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    root = generated_tree(tmp_path, 11)
    monkeypatch.setattr(word_index, "MAX_FILES", 10)
    files = search(root, ["x"]).files
    word_index.build(root, files, time.monotonic() + 60)
    assert not word_index.indexed(root)
    assert not word_index.wanted(root)
    assert "over 10" in word_index.summary()


def test_a_build_stops_at_its_deadline_and_the_next_one_goes_on(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = generated_tree(tmp_path, 12)
    later(monkeypatch, 3600)
    files = search(root, ["x"]).files
    word_index.build(root, files, time.monotonic() - 1)  # no time at all
    assert len(word_index._TREES[word_index._key(root)].files) < len(files)
    word_index.build(root, files, time.monotonic() + 60)
    assert len(word_index._TREES[word_index._key(root)].files) == len(files)


def test_an_index_that_fails_leaves_the_search_to_rg_and_says_why(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        matching_runs: list[list[str]]) -> None:
    root = generated_tree(tmp_path, 14)
    later(monkeypatch, 3600)
    build(root)

    def broken(*args: object) -> dict[int, dict[str, int]]:
        raise ValueError("a bug in the counting")

    monkeypatch.setattr(word_index, "_count", broken)
    matching_runs.clear()
    hits = search(root, ["set"])
    assert matching_runs == [["set"]]
    monkeypatch.undo()
    same(hits, by_rg(root, ["set"]))
    assert not word_index.indexed(root) and not word_index.wanted(root)
    assert "its index failed (ValueError: a bug in the counting)" in word_index.summary()


def test_the_memory_bound_holds_for_all_trees_together(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    first = generated_tree(tmp_path / "first", 15)
    second = generated_tree(tmp_path / "second", 16)
    later(monkeypatch, 3600)
    build(first)
    one_tree = word_index._TREES[word_index._key(first)].size()
    monkeypatch.setattr(word_index, "MAX_INDEX_BYTES", one_tree * 3 // 2)  # room for one
    build(second)
    assert word_index.indexed(second)
    assert not word_index.indexed(first)  # searched longest ago: it made room
    assert word_index.wanted(first)  # not refused: built again after its next search


def test_the_index_takes_about_the_memory_it_counts_and_little_per_word(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # the bounds are on the estimate, so it may not be low; and a word costs what a
    # worker within 64 MB can hold for a tree of 1-2k files (issue 30)
    rng = random.Random(7)
    vocabulary = ["".join(rng.choice("abcdefghijklmnopqrstuvwxyz_ABC0123") for _ in
                          range(rng.randint(3, 14))) for _ in range(30_000)]
    common = vocabulary[:300]
    for n in range(300):
        words = rng.sample(common, 60) + rng.sample(vocabulary, 150)
        (tmp_path / f"m{n}.py").write_text(" ".join(words) + "\n")
    files = search(tmp_path, ["x"]).files
    later(monkeypatch, 3600)
    monkeypatch.setattr(mapped, "MAP_FROM", 1 << 60)  # all in memory, as the estimate says
    gc.collect()
    tracemalloc.start()
    try:
        word_index.build(tmp_path, files, time.monotonic() + 60)
        gc.collect()
        taken = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    tree = word_index._TREES[word_index._key(tmp_path)]
    words = tree.words
    assert words > 20_000
    assert taken <= tree.size() * 1.1, (taken, tree.size())
    assert tree.size() <= taken * 1.6, (taken, tree.size())
    assert taken / words < 200, f"{taken / words:.0f} bytes a word"  # 276 with a dict
    same(search(tmp_path, ["abc", "q_", "zz"]), by_rg(tmp_path, ["abc", "q_", "zz"]))


def long_words(root: Path, rng: random.Random) -> None:
    for n in range(60):  # hashes, encoded data: a word as long as a line
        (root / f"h{n}.txt").write_text("\n".join(f"{rng.getrandbits(1024):x}" for _ in range(100)))


def long_paths(root: Path, rng: random.Random) -> None:
    folder = root / ("deeply_nested_" * 6) / ("package_" * 8)
    folder.mkdir(parents=True)
    for n in range(3000):
        (folder / f"{'test_a_module_with_a_long_name_' * 3}{n}.py").write_text("import x\n")


def long_s_words(root: Path, rng: random.Random) -> None:
    for n in range(60):  # words with the long s, kept apart (``_Tree.odd``)
        (root / f"s{n}.txt").write_text(" ".join(f"\u017f{rng.getrandbits(40):x}"
                                                  for _ in range(500)))


def long_odd_words(root: Path, rng: random.Random) -> None:
    for n in range(60):  # hashes holding the long s or the Kelvin sign: kept by their bytes too
        (root / f"o{n}.txt").write_text("\n".join(
            rng.choice(("\u017f", "\u212a")) + f"{rng.getrandbits(1024):x}" for _ in range(100)))


def case_variants(root: Path, rng: random.Random) -> None:
    for n in range(60):  # a word in many cases is one word, however many files spell it
        (root / f"v{n}.txt").write_text(" ".join(
            "".join(c.upper() if rng.random() < 0.5 else c for c in f"w{k:x}_{k % 97}")
            for k in rng.sample(range(20_000), 500)))


def copies(root: Path, rng: random.Random) -> None:
    words = " ".join(f"{n:x}" for n in range(22_000))
    for n in range(3):  # one file copied (vendored twice): each word has an array of postings
        (root / f"c{n}.txt").write_text(words)


def said_often(root: Path, rng: random.Random) -> None:
    # every posting past a word's first takes two numbers: 255 occurrences or more
    words = [f"{a}{b}" for a in "abcdefghijklmnopqrstuvwxyz" for b in "abcdefghijklmnopqrstuvwxyz"]
    for n in range(40):
        (root / f"o{n}.txt").write_text((" ".join(words) + "\n") * 255)


@pytest.mark.parametrize("shape", [long_words, long_paths, long_s_words, long_odd_words,
                                   case_variants, copies, said_often])
def test_the_memory_estimate_is_not_low_whatever_the_words_and_paths(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        shape: Callable[[Path, random.Random], None]) -> None:
    # the bounds are on the estimate: a tree whose words or paths are long, or whose words
    # hold the long s, takes no more than it says, once searched as a worker keeps it
    # (its listing, its last check)
    shape(tmp_path, random.Random(3))
    later(monkeypatch, 3600)
    monkeypatch.setattr(mapped, "MAP_FROM", 1 << 60)  # all in memory, as the estimate says
    gc.collect()
    tracemalloc.start()
    try:
        files = search(tmp_path, ["x"]).files
        word_index.build(tmp_path, files, time.monotonic() + 60)
        del files
        for terms in (["x"], ["ab", "c"]):
            search(tmp_path, terms)
        gc.collect()
        taken = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    tree = word_index._TREES[word_index._key(tmp_path)]
    assert tree.listing is not None and tree.clean is not None  # kept as a worker keeps it
    assert taken <= tree.size() * 1.1, (taken, tree.size())
    assert tree.size() <= taken * 1.6, (taken, tree.size())


def test_the_memory_estimate_counts_the_room_the_words_text_grows_into(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # the text grows in place, with room for more: a join of one word after 8 MB of long
    # ones left 1 MB more than the words' letters, which the estimate did not count
    rng = random.Random(3)
    (tmp_path / ".git").mkdir()
    for n in range(39):  # 3,900 words of 2,048 letters: too few lines for pieces
        (tmp_path / f"h{n}.txt").write_text(
            "\n".join(f"{rng.getrandbits(8192):x}" for _ in range(100)))
    later(monkeypatch, 3600)
    monkeypatch.setattr(mapped, "MAP_FROM", 1 << 60)
    gc.collect()
    tracemalloc.start()
    try:
        files = search(tmp_path, ["x"]).files
        word_index.build(tmp_path, files, time.monotonic() + 60)
        (tmp_path / "new.txt").write_text("brandnewword")
        files = search(tmp_path, ["x"]).files  # the query reads it: one word in the tail
        word_index.build(tmp_path, files, time.monotonic() + 60)  # which ends in a join
        del files
        search(tmp_path, ["ab", "c"])
        gc.collect()
        taken = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    tree = word_index._TREES[word_index._key(tmp_path)]
    assert tree.text.__alloc__() > len(tree.text) + (500 << 10)  # the room is there...
    assert taken <= tree.size() * 1.1, (taken, tree.size())  # ...and counted


class Clock:
    """The index's monotonic clock, a second further at each reading: a build given
    ``by = clock.now + N`` stops after a few steps, whatever the machine's speed."""

    def __init__(self) -> None:
        self.now = 0.0

    def monotonic(self) -> float:
        self.now += 1.0
        return self.now

    time_ns = staticmethod(time.time_ns)


def test_a_build_cut_into_many_windows_reads_each_file_once_and_then_answers_as_rg(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        matching_runs: list[list[str]]) -> None:
    root = generated_tree(tmp_path, 17)
    files = search(root, ["x"]).files
    read: list[str] = []
    real_read = word_index._Tree.read

    def reading(tree: word_index._Tree, rel: str, *args: object) -> word_index._File:
        read.append(rel)
        return real_read(tree, rel, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(word_index._Tree, "read", reading)
    clock = Clock()
    monkeypatch.setattr(word_index, "time", clock)
    task = word_index.Build(root, files)
    windows = 1
    while isinstance(task(clock.now + 4), Unfinished):
        windows += 1
        assert windows < 4 * len(files), "the build never finished"
    # many windows, each going on where the last stopped: every file read once, although
    # every one of them changed too recently to be taken on its stamp by a later window
    assert windows > 5
    assert sorted(read) == sorted(files)
    monkeypatch.undo()
    later(monkeypatch, 3600)
    answered_by_the_index_as_rg(root, TERM_SETS, matching_runs)


def test_the_pieces_are_built_over_many_windows_and_every_query_meanwhile_answers_as_rg(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from slm_rerank_ripgrep import pieces

    monkeypatch.setattr(word_index, "PIECES_FROM", 0)
    monkeypatch.setattr(pieces, "_CHUNK_LINES", 2)
    root = generated_tree(tmp_path, 21)
    files = search(root, ["x"]).files
    later(monkeypatch, 3600)
    clock = Clock()
    task = word_index.Build(root, files)
    states = []
    for _ in range(200):
        with monkeypatch.context() as m:
            m.setattr(word_index, "time", clock)
            said = task(clock.now + 2)
        tree = word_index._TREES[word_index._key(root)]
        states.append((tree.pieces is not None, tree.piece_build is not None))
        if tree.listed == len(tree.files):  # the files are in: queries meet the pieces
            for terms in TERM_SETS:      # half built, then built
                same(search(root, terms), by_rg(root, terms))
        if not isinstance(said, Unfinished):
            break
    assert (False, True) in states and states[-1] == (True, False), states
    built = word_index._TREES[word_index._key(root)].pieces
    assert built is not None and built.lines > 10
    # a word met later is found beyond the pieces
    (root / "late.txt").write_text("imagesetter Resetting")
    for terms in (["imageset", "resetting"], ["setter"]):
        same(search(root, terms), by_rg(root, terms))


def test_pieces_that_would_take_a_tree_past_the_bound_are_not_made_and_it_does_without(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, matching_runs: list[list[str]]) -> None:
    # long words (hashes) take four bytes a letter in the pieces, twice what the tree
    # takes for them: a tree within the bound may be over it with them. Once their lines
    # are counted they are not made, before their arrays take what the bound was meant to
    # keep the worker from taking, and the tree is kept without them
    long_words(tmp_path, random.Random(5))
    files = search(tmp_path, ["x"]).files
    later(monkeypatch, 3600)
    monkeypatch.setattr(word_index, "PIECES_FROM", 1 << 30)
    word_index.build(tmp_path, files, time.monotonic() + 60)
    tree = word_index._TREES[word_index._key(tmp_path)]
    size, pieces_take = tree.size(), 4 * tree.letters
    room = pieces_take * 3 // 4
    monkeypatch.setattr(word_index, "MAX_INDEX_BYTES", size + room)
    monkeypatch.setattr(word_index, "PIECES_FROM", 0)
    monkeypatch.setattr(mapped, "MAP_FROM", 1 << 60)  # all in memory, as the estimate says
    gc.collect()
    tracemalloc.start()
    try:
        word_index.build(tmp_path, files, time.monotonic() + 60)  # the pieces, as idle work
        taken = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert taken < room, (taken, room)
    assert word_index.indexed(tmp_path)
    tree = word_index._TREES[word_index._key(tmp_path)]
    assert tree.pieceless and tree.pieces is None and tree.piece_build is None
    assert tree.size() <= word_index.MAX_INDEX_BYTES
    word_index.build(tmp_path, files, time.monotonic() + 60)  # not tried again
    assert tree.piece_build is None and tree.pieces is None
    matching_runs.clear()
    for terms in (["ab", "c"], ["abc", "f00"]):
        hits = search(tmp_path, terms)
        assert matching_runs == []  # the index answered, reading its text through
        same(hits, by_rg(tmp_path, terms))
        matching_runs.clear()


def test_a_query_meeting_a_tree_half_built_leaves_it_to_rg_without_reading_a_file(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        matching_runs: list[list[str]]) -> None:
    root = larger_tree(tmp_path, 23, 300)
    later(monkeypatch, 3600)
    files = search(root, ["x"]).files
    clock = Clock()
    monkeypatch.setattr(word_index, "time", clock)
    task = word_index.Build(root, files)
    assert isinstance(task(clock.now + 40), Unfinished)  # a few files of 300
    monkeypatch.setattr(word_index, "time", time)
    indexed = len(word_index._TREES[word_index._key(root)].files)
    assert 0 < indexed < len(files) - word_index.REREAD_FILES
    read: list[str] = []
    real_read = word_index._Tree.read

    def reading(tree: word_index._Tree, rel: str, *args: object) -> word_index._File:
        read.append(rel)
        return real_read(tree, rel, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(word_index._Tree, "read", reading)
    matching_runs.clear()
    hits = search(root, ["set", "real"])
    assert len(matching_runs) == 1 and read == []  # rg answered; no file read in vain
    same(hits, by_rg(root, ["set", "real"]))


def test_a_query_finding_the_index_in_use_leaves_it_to_rg_and_a_build_waits_its_turn(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        matching_runs: list[list[str]]) -> None:
    root = generated_tree(tmp_path, 18)
    later(monkeypatch, 3600)
    (root / "added.txt").write_text("set real\n")
    files = search(root, ["x"]).files  # no index yet: rg lists them all
    word_index.build(root, [f for f in files if f != "added.txt"], time.monotonic() + 60)
    matching_runs.clear()
    with word_index.LOCK:  # another thread reads the index (or builds it)
        held = search(root, ["set", "real"])
        assert len(matching_runs) == 1  # rg matched
        said = word_index.Build(root, files)(time.monotonic() + 30)
        assert isinstance(said, Unfinished)
        assert "added.txt" not in word_index._TREES[word_index._key(root)].files
    matching_runs.clear()
    same(search(root, ["set", "real"]), held)
    assert matching_runs == []


def larger_tree(root: Path, seed: int, files: int) -> Path:
    """``files`` generated files of a few hundred words: a build of many short windows."""
    rng = random.Random(seed)
    for n in range(files):
        folder = root / f"d{n % 7}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"f{n}.txt").write_text(text(rng, rng.randint(50, 400)))
    return root


def test_queries_from_several_threads_while_the_idle_thread_builds_answer_as_rg(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        matching_runs: list[list[str]]) -> None:
    roots = [larger_tree(tmp_path / f"tree{n}", 19 + n, 600) for n in range(2)]
    later(monkeypatch, 3600)
    expected = {(n, tuple(terms)): search(root, terms)
                for n, root in enumerate(roots) for terms in TERM_SETS}
    assert not any(word_index.indexed(root) for root in roots)
    monkeypatch.setattr(sys, "getswitchinterval", sys.getswitchinterval)  # restored after
    sys.setswitchinterval(1e-4)  # threads take turns often: a race shows, if there is one
    wrong: list[str] = []
    ends = time.monotonic() + 20

    def query(n: int, idle: Callable[[], bool]) -> None:
        # the queries ask for the builds (answered by rg), then meet them half done
        while not (idle() and all(word_index.indexed(root) for root in roots)) \
                and time.monotonic() < ends:
            for terms in TERM_SETS:
                hits = search(roots[n % 2], terms)
                want = expected[(n % 2, tuple(terms))]
                if (hits.body_counts, hits.skipped) != (want.body_counts, want.skipped):
                    wrong.append(f"thread {n}, {terms}")
                time.sleep(0.002)  # the queries hold the index most of the time: the
                # build's windows find it free now and then

    try:
        # many short windows between the queries, which go round the gate a call of the
        # MCP server or the API passes: only the index's lock keeps them apart
        with with_idle_thread(window_seconds=0.002) as idle:
            threads = [threading.Thread(target=query, args=(n, idle)) for n in range(4)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join(120)
            built = idle() and all(word_index.indexed(root) for root in roots)
    finally:
        sys.setswitchinterval(0.005)
    assert not wrong
    # built, and never dropped for an error meanwhile (the summary would say so)
    assert built, word_index.summary()
    matching_runs.clear()
    for n, root in enumerate(roots):
        for terms in TERM_SETS:
            same(search(root, terms), expected[(n, tuple(terms))])
    assert matching_runs == []


# The packed postings and pieces in a file the process maps (``mapped.py``)

@pytest.fixture
def mapped_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Every packed block and the pieces mapped, however small, into this folder."""
    folder = tmp_path / "_mapped"
    monkeypatch.setattr(mapped, "FOLDER", folder)
    monkeypatch.setattr(mapped, "MAP_FROM", 0)
    monkeypatch.setattr(word_index, "PACK_FROM", 0)
    monkeypatch.setattr(word_index, "PACK_WORDS", 16)
    monkeypatch.setattr(word_index, "PIECES_FROM", 0)
    return folder


def built(root: Path) -> word_index._Tree:
    files = search(root, ["x"]).files
    word_index.build(root, files, time.monotonic() + 60)
    tree = word_index.tree_of(root)
    assert tree is not None
    return tree


def every_term_as_rg(root: Path, extra: list[list[str]] = []) -> None:  # noqa: B006
    for terms in TERM_SETS + extra + [["sets", "real"], ["ima", "ges"]]:
        same(search(root, terms), by_rg(root, terms))


def test_map_out_gives_each_array_back_as_a_view_of_one_file(mapped_folder: Path) -> None:
    parts = [array("I", range(n, 3 * n)) for n in (0, 1, 5, 70_000)]
    views = mapped.map_out(parts)
    assert isinstance(views, list)
    assert [list(view) for view in views] == [list(part) for part in parts]
    assert all(view.readonly for view in views)
    assert list(mapped_folder.iterdir()) == []  # the file has no name
    with pytest.raises(ValueError, match="type code I"):
        mapped.map_out([array("i", [1])])


def test_a_built_index_reads_its_packed_postings_and_pieces_from_a_mapped_file_as_rg_counts(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mapped_folder: Path) -> None:
    root = generated_tree(tmp_path / "tree", 6)
    later(monkeypatch, 3600)
    tree = built(root)
    assert tree.packs and all(isinstance(block, memoryview) for block in tree.packs)
    assert all(isinstance(at, memoryview) for at in tree.pack_at)
    assert tree.pieces is not None and isinstance(tree.pieces.ids, memoryview)
    assert tree.unmapped == "" and "not mapped" not in word_index.summary()
    every_term_as_rg(root)
    # changed files post into ``more``; the next build packs the blocks they touch from
    # the mapped ones into new arrays, and maps those
    rng = random.Random(3)
    for n, path in enumerate(sorted(root.rglob("f*.txt"))[:12]):
        path.write_text(text(rng, 40) + f" brandnew{n} set real")
    later(monkeypatch, 7200)
    every_term_as_rg(root, [["brandnew"]])
    assert tree.more
    assert built(root) is tree and tree.more == {}
    assert all(isinstance(block, memoryview) for block in tree.packs)
    every_term_as_rg(root, [["brandnew"]])
    assert list(mapped_folder.iterdir()) == []


def test_without_o_tmpfile_the_mapped_file_is_named_only_until_it_is_open(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mapped_folder: Path) -> None:
    monkeypatch.delattr(os, "O_TMPFILE", raising=False)
    root = generated_tree(tmp_path / "tree", 7)
    later(monkeypatch, 3600)
    tree = built(root)
    assert isinstance(tree.packs[0], memoryview)
    assert list(mapped_folder.iterdir()) == []
    every_term_as_rg(root)


@pytest.mark.parametrize("fault", ["no folder", "disk full"])
def test_an_index_that_cannot_be_mapped_stays_in_memory_and_says_why(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mapped_folder: Path,
        fault: str) -> None:
    if fault == "no folder":
        (tmp_path / "a file").write_text("")
        monkeypatch.setattr(mapped, "FOLDER", tmp_path / "a file" / "mapped")
        said = "no file for it in"
    else:
        def full(fd: int, data: bytes) -> int:
            raise OSError(errno.ENOSPC, "No space left on device")

        monkeypatch.setattr(mapped.os, "write", full)
        said = "No space left on device"
    root = generated_tree(tmp_path / "tree", 8)
    later(monkeypatch, 3600)
    tree = built(root)
    assert all(isinstance(block, array) for block in tree.packs)
    assert tree.pieces is not None and isinstance(tree.pieces.ids, array)
    assert said in tree.unmapped
    assert f"kept in memory, not mapped: {tree.unmapped}" in word_index.summary()
    every_term_as_rg(root)
    if fault == "disk full":
        assert list(mapped_folder.iterdir()) == []  # nothing left behind


def test_mapped_pieces_and_postings_leave_the_process_memory(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # a tree of 20,000 words: its pieces and packed postings are most of its index
    rng = random.Random(11)
    vocabulary = ["".join(rng.choice("abcdefghijklmnopqrstuvwxyz_") for _ in
                          range(rng.randint(6, 14))) for _ in range(20_000)]
    for n in range(200):
        (tmp_path / f"m{n}.py").write_text(" ".join(rng.sample(vocabulary, 300)) + "\n")
    files = search(tmp_path, ["x"]).files
    later(monkeypatch, 3600)
    monkeypatch.setattr(mapped, "FOLDER", tmp_path / "_mapped")
    taken: dict[bool, int] = {}
    for in_file in (False, True):
        monkeypatch.setattr(mapped, "MAP_FROM", 0 if in_file else 1 << 60)
        word_index.forget()
        gc.collect()
        tracemalloc.start()
        try:
            word_index.build(tmp_path, files, time.monotonic() + 60)
            gc.collect()
            taken[in_file] = tracemalloc.get_traced_memory()[0]
        finally:
            tracemalloc.stop()
        tree = word_index.tree_of(tmp_path)
        assert tree is not None and tree.pieces is not None
        assert isinstance(tree.pieces.ids, memoryview) is in_file
        moved = 4 * (len(tree.pieces.ids) + sum(map(len, tree.packs)))
        assert moved > 512 << 10
        same(search(tmp_path, ["abc", "q_", "zz"]), by_rg(tmp_path, ["abc", "q_", "zz"]))
    assert taken[True] <= taken[False] - 0.9 * moved, (taken, moved)


def mapped_count(folder: Path, monkeypatch: pytest.MonkeyPatch, count: int) -> memoryview:
    """The numbers 0 to ``count`` mapped from a file in ``folder``, none of them read yet
    (skipped where the process's mapped memory cannot be read)."""
    monkeypatch.setattr(mapped, "FOLDER", folder)
    views = mapped.map_out([array("I", range(count))])
    assert isinstance(views, list)
    if mapped_resident_kib(folder) is None:
        pytest.skip("no /proc/self/smaps here")
    assert mapped_resident_kib(folder) == 0
    return views[0]


def test_a_read_of_a_mapped_array_brings_little_of_it_into_the_process_memory(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    view = mapped_count(tmp_path, monkeypatch, 4 << 20)  # 16 MiB
    assert view[3 << 20] == 3 << 20 and view[5] == 5
    taken = mapped_resident_kib(tmp_path)
    assert taken is not None and 0 < taken <= 512  # 64 KiB around each read, not 2 MiB


def test_pages_of_mapped_files_let_go_leave_the_process_and_read_back_the_same(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    view = mapped_count(tmp_path, monkeypatch, 1 << 20)  # 4 MiB
    assert sum(view[::1024]) == sum(range(0, 1 << 20, 1024))  # a number a page: all read
    assert (mapped_resident_kib(tmp_path) or 0) >= 3 << 10
    assert mapped.let_go_of_pages() >= 4 << 20
    assert mapped_resident_kib(tmp_path) == 0
    assert view[123_457] == 123_457 and view[-1] == (1 << 20) - 1
    del view
    gc.collect()
    assert mapped.let_go_of_pages() == 0  # a mapping no longer used is not kept for it


def test_a_query_lets_go_of_the_mapped_pages_it_read_once_it_has_counted(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mapped_folder: Path,
        matching_runs: list[list[str]]) -> None:
    # the ranking that follows holds its own memory: the postings and pieces the count
    # read are not held with it (on ten copies of sympy, 5-13 MiB of pages a query)
    root = generated_tree(tmp_path / "tree", 16)
    later(monkeypatch, 3600)
    tree = built(root)
    assert any(isinstance(block, memoryview) for block in tree.packs)
    if mapped_resident_kib(mapped_folder) is None:
        pytest.skip("no /proc/self/smaps here")
    touched: list[int] = []
    real = word_index._count

    def count(*args):  # type: ignore[no-untyped-def]
        found = real(*args)
        touched.append(mapped_resident_kib(mapped_folder) or 0)
        return found

    monkeypatch.setattr(word_index, "_count", count)
    answered_by_the_index_as_rg(root, TERM_SETS, matching_runs)
    assert max(touched) > 0  # the count read mapped pages...
    assert mapped_resident_kib(mapped_folder) == 0  # ...and the query let go of them


def test_a_long_read_of_mapped_arrays_lets_go_of_their_pages_as_it_goes(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    view = mapped_count(tmp_path, monkeypatch, 4 << 20)  # 16 MiB
    held: dict[bool, int] = {}
    for watched in (False, True):
        pages = mapped.PagesRead(1 << 20, every=4)
        most = 0
        for at in range(0, 4 << 20, 1 << 14):  # a number every 64 KiB, as a count reads
            assert view[at] == at
            if watched:
                pages.step()
            if at % (1 << 18) == 0:
                most = max(most, mapped_resident_kib(tmp_path) or 0)
        held[watched] = most
        mapped.let_go_of_pages()
    assert held[False] >= 12 << 10, held  # all of it, unwatched
    assert held[True] <= 2 << 10, held  # the limit and one look's worth of pages


def test_a_file_dated_past_2262_or_with_a_file_id_past_64_bits_is_stamped_and_indexed(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = generated_tree(tmp_path / "tree", 15)
    victim = sorted(root.rglob("f*.txt"))[0]
    far = 10_413_792_000 * 1_000_000_000  # 2300-01-01: past a signed 64-bit count of ns
    os.utime(victim, ns=(far, far))
    later(monkeypatch, 3600)
    tree = built(root)
    assert len(tree.files) == len(search(root, ["x"]).files)
    assert tree.files[str(victim.relative_to(root))].state == "text"
    every_term_as_rg(root)
    victim.write_text("brandnew set real\n")
    os.utime(victim, ns=(far + 1, far + 1))
    later(monkeypatch, 7200)
    every_term_as_rg(root, [["brandnew"]])

    st = victim.stat()
    wide = SimpleNamespace(st_dev=st.st_dev, st_ino=1 << 100, st_mode=st.st_mode,
                           st_size=321, st_mtime_ns=far, st_ctime_ns=far)
    stamp = word_index._stamp(wide)  # type: ignore[arg-type]
    assert len(stamp) > word_index._STAMP.size and word_index._size_of(stamp) == 321
    assert stamp == word_index._stamp(wide)  # type: ignore[arg-type]
    assert stamp != word_index._stamp(st)
    assert word_index._size_of(word_index._stamp(st)) == st.st_size


def test_a_files_record_is_one_bytes_that_gives_back_what_it_was_made_of(
        tmp_path: Path) -> None:
    # a dataclass of the same fields took 330 bytes a file: 6.2 MiB for ten copies of sympy
    # (a file id over 256 is an int of its own: 32 bytes of it)
    st = tmp_path.stat()
    wide = SimpleNamespace(st_dev=st.st_dev, st_ino=1 << 100, st_mode=st.st_mode,
                           st_size=321, st_mtime_ns=st.st_mtime_ns, st_ctime_ns=st.st_ctime_ns)
    stamps = [word_index._stamp(st), word_index._stamp(wide)]  # type: ignore[arg-type]
    now = time.time_ns()
    for stamp in stamps:
        made = word_index._File(stamp, now, "unreadable", 7, 9, b"d" * 16, "Permission é")
        assert (made.stamp, made.checked, made.state, made.fid, made.posted, made.digest,
                made.why) == (stamp, now, "unreadable", 7, 9, b"d" * 16, "Permission é")
        bare = word_index._File(stamp, -5, "text")
        assert (bare.stamp, bare.checked, bare.state, bare.fid, bare.posted, bare.digest,
                bare.why) == (stamp, -5, "text", -1, 0, b"", "")
        changed = max(st.st_mtime_ns, st.st_ctime_ns)
        assert word_index._changed_of(stamp) == changed
        settled = word_index._File(stamp, changed + word_index._RACY_NS + 1, "text")
        racy = word_index._File(stamp, changed + word_index._RACY_NS, "text")
        assert settled.unchanged(stamp)
        assert not racy.unchanged(stamp)  # changed too close to its read: read again
        assert not settled.unchanged(stamp[:-1])
        assert not settled.unchanged(stamp + b"x")
    far = changed + 2 * word_index._RACY_NS
    assert not word_index._File(stamps[1], far, "text").unchanged(stamps[0])
    assert not word_index._File(stamps[0], far, "text").unchanged(stamps[1])

    tracemalloc.start()
    try:
        records = [word_index._File(word_index._stamp(st), now + n, "text", n + 300, n + 300,
                                    n.to_bytes(16, "little")) for n in range(20_000)]
        held = tracemalloc.get_traced_memory()[0] / len(records)
    finally:
        tracemalloc.stop()
    assert held < 230, f"{held:.0f} bytes a file's record"


def test_a_builds_packs_on_its_way_put_their_blocks_in_a_mapped_file_not_in_memory(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mapped_folder: Path) -> None:
    monkeypatch.setattr(word_index, "PENDING_FROM", 0)
    monkeypatch.setattr(word_index, "PENDING_MAX", 64)
    root = generated_tree(tmp_path / "tree", 13)
    seen: list[bool] = []
    real = word_index._Tree._pack

    def watched(tree: word_index._Tree) -> None:
        real(tree)
        seen.append(all(isinstance(block, memoryview) for block in tree.packs))

    monkeypatch.setattr(word_index._Tree, "_pack", watched)
    later(monkeypatch, 3600)
    tree = built(root)
    assert len(seen) > 3 and all(seen), seen  # every pack of the build, not only its end
    assert tree.unmapped == ""
    every_term_as_rg(root)
    assert list(mapped_folder.iterdir()) == []


def many_words(root: Path, files: int) -> Path:
    """``files`` files of 2,000 words each, every word in a third of them: megabytes of
    postings, packed many times over with a small ``PENDING_MAX``."""
    root.mkdir()
    (root / ".git").mkdir()
    for n in range(files):
        (root / f"f{n}.txt").write_text(" ".join(f"w{i}x{n % 3}" for i in range(2000)))
    return root


def test_a_pack_lets_go_of_the_pages_of_the_blocks_it_reads_as_it_goes(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mapped_folder: Path,
        matching_runs: list[list[str]]) -> None:
    # a pack reads every mapped block it makes again: their pages stay in the process
    # only up to READ_PAGES_MAX, not all at once (the ten copies' build peaked so)
    monkeypatch.setattr(word_index, "PENDING_FROM", 0)
    monkeypatch.setattr(word_index, "PENDING_MAX", 1 << 16)
    monkeypatch.setattr(word_index, "READ_PAGES_MAX", 128 << 10)
    root = many_words(tmp_path / "tree", 300)
    if mapped_resident_kib(mapped_folder) is None:
        pytest.skip("no /proc/self/smaps here")
    resident: list[int] = []
    read: list[int] = []
    real_append, real_pack = mapped.Appender.append, word_index._Tree._pack

    def append(out: mapped.Appender, numbers: array[int]) -> None:
        if len(resident) % 4 == 0 or len(resident) < 4:
            resident.append(mapped_resident_kib(mapped_folder) or 0)
        else:
            resident.append(0)
        real_append(out, numbers)

    def pack(tree: word_index._Tree) -> None:
        read.append(sum(len(b) for b in tree.packs if isinstance(b, memoryview)) * 4)
        real_pack(tree)

    monkeypatch.setattr(mapped.Appender, "append", append)
    monkeypatch.setattr(word_index._Tree, "_pack", pack)
    later(monkeypatch, 3600)
    built(root)
    assert max(read) > 1 << 20, read  # packs that read more than a MiB of mapped blocks
    assert max(resident) <= 512, f"{max(resident)} KiB of mapped pages held during a pack"
    answered_by_the_index_as_rg(root, [["w17x1"], ["w1999", "x2"]], matching_runs)

    # a query whose words' postings are all over the file: "w1" is in 3,333 words
    mapped.let_go_of_pages()
    counted: list[int] = []
    real_step = mapped.PagesRead.step

    def step(pages: mapped.PagesRead) -> None:
        if pages.steps % 64 == 0:
            counted.append(mapped_resident_kib(mapped_folder) or 0)
        real_step(pages)

    monkeypatch.setattr(mapped.PagesRead, "step", step)
    answered_by_the_index_as_rg(root, [["w1"]], matching_runs)
    assert len(counted) > 40 and max(counted) <= 768, counted


def test_a_pack_writes_a_block_to_its_file_as_it_makes_it_not_whole(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mapped_folder: Path,
        matching_runs: list[list[str]]) -> None:
    # the first block holds the commonest words: 7.4 MiB of ten copies of sympy's 24, made
    # whole in memory (and its old pages read) while a pack wrote it
    monkeypatch.setattr(word_index, "PACK_WORDS", 4096)
    monkeypatch.setattr(word_index, "PENDING_FROM", 0)
    monkeypatch.setattr(word_index, "PENDING_MAX", 1 << 12)
    monkeypatch.setattr(word_index, "WRITE_NUMBERS", 1 << 12)
    root = many_words(tmp_path / "tree", 120)
    made: list[tuple[int, int]] = []  # the largest block after a pack, the pack's peak
    real = word_index._Tree._pack

    def measured(tree: word_index._Tree) -> None:
        peak = traced_peak(lambda: real(tree))
        made.append((4 * max(map(len, tree.packs)), peak))

    monkeypatch.setattr(word_index._Tree, "_pack", measured)
    later(monkeypatch, 3600)
    tree = built(root)
    assert all(isinstance(block, memoryview) for block in tree.packs)
    block, peak = made[-1]
    assert block > 512 << 10, made
    assert max(peak for _, peak in made) < block // 4, made
    answered_by_the_index_as_rg(root, [["w17x1"], ["w1999", "x2"], ["w1"]], matching_runs,
                                1 << 20)


@pytest.mark.parametrize("fails_at", [1, 3, 12])
def test_a_pack_whose_file_fails_while_it_writes_a_block_keeps_every_posting(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mapped_folder: Path,
        matching_runs: list[list[str]], fails_at: int) -> None:
    # the block being written when the file fails is made again in memory, whole
    monkeypatch.setattr(word_index, "PACK_WORDS", 4096)
    monkeypatch.setattr(word_index, "PENDING_FROM", 1 << 30)  # one pack, at the build's end
    monkeypatch.setattr(word_index, "WRITE_NUMBERS", 1 << 10)
    root = many_words(tmp_path / "tree", 12)
    real = mapped.Appender.append
    appends = [0]

    def append(out: mapped.Appender, numbers: array[int]) -> None:
        appends[0] += 1
        if appends[0] == fails_at:
            raise OSError(errno.ENOSPC, "No space left on device")
        real(out, numbers)

    said: list[str] = []
    real_pack = word_index._Tree._pack

    def pack(tree: word_index._Tree) -> None:
        real_pack(tree)
        said.append(tree.unmapped)

    monkeypatch.setattr(mapped.Appender, "append", append)
    monkeypatch.setattr(word_index._Tree, "_pack", pack)
    later(monkeypatch, 3600)
    built(root)
    assert appends[0] > fails_at and len(said) == 1
    assert "No space left on device" in said[0]
    answered_by_the_index_as_rg(root, [["w17x1"], ["w1999", "x2"], ["w1"]], matching_runs,
                                1 << 20)


def test_a_pack_puts_the_pending_postings_in_order_holding_them_once(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        matching_runs: list[list[str]]) -> None:
    # the counting sort reads the pending pairs where they are: a copy of their word ids
    # and one of their numbers took as much again as pending while it ran (issue 30)
    monkeypatch.setattr(word_index, "PENDING_FROM", 1 << 30)
    root = many_words(tmp_path / "tree", 100)
    sizes: list[tuple[int, int]] = []
    real = word_index._Tree._pending_by_word

    def measured(tree: word_index._Tree) -> tuple[array[int], array[int]] | None:
        held = len(tree.pending) * tree.pending.itemsize
        tracemalloc.start()
        try:
            result = real(tree)
            sizes.append((held, tracemalloc.get_traced_memory()[1]))
        finally:
            tracemalloc.stop()
        return result

    monkeypatch.setattr(word_index._Tree, "_pending_by_word", measured)
    later(monkeypatch, 3600)
    built(root)
    held, peak = max(sizes)
    assert held > 1 << 20, sizes
    assert peak < 0.6 * held, f"{peak} bytes to put {held} bytes of postings in order"
    answered_by_the_index_as_rg(root, [["w17x1"], ["w1999", "x2"]], matching_runs)


@pytest.mark.parametrize("fault", ["write", "map", "read back"])
def test_a_pack_whose_file_fails_keeps_every_posting_in_memory_and_says_why(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mapped_folder: Path,
        fault: str) -> None:
    monkeypatch.setattr(word_index, "PACK_WORDS", 2)
    root = generated_tree(tmp_path / "tree", 14)
    real_append, real_pack = mapped.Appender.append, word_index._Tree._pack
    appends = [0]

    def append(out: mapped.Appender, numbers: array[int]) -> None:
        appends[0] += 1  # a pack appends each block, then its word starts
        if fault != "map" and appends[0] == 5:  # part way through the first pack's blocks
            raise OSError(errno.ENOSPC, "No space left on device")
        real_append(out, numbers)

    def refused(*args: object, **kwargs: object) -> object:
        raise OSError(errno.ENODEV, "No such device")

    packs: list[tuple[int, str]] = []  # after each pack: blocks in memory, and why

    def watched(tree: word_index._Tree) -> None:
        real_pack(tree)
        packs.append((sum(isinstance(block, array) for block in tree.packs), tree.unmapped))

    monkeypatch.setattr(mapped.Appender, "append", append)
    monkeypatch.setattr(word_index._Tree, "_pack", watched)
    if fault == "map":
        monkeypatch.setattr(mapped.mmap, "mmap", refused)
    if fault == "read back":
        monkeypatch.setattr(mapped.os, "pread", lambda *a: b"")
    later(monkeypatch, 3600)
    files = search(root, ["x"]).files
    if fault == "read back":  # what was written is lost: the tree is let go, rg answers
        with pytest.raises(OSError, match="shorter than what was written"):
            word_index.build(root, files, time.monotonic() + 60)
        assert word_index.tree_of(root) is None
        assert "its index failed (OSError" in word_index.summary()
        every_term_as_rg(root)
        return
    word_index.build(root, files, time.monotonic() + 60)
    tree = word_index.tree_of(root)
    assert tree is not None and appends[0] >= 5 and len(tree.packs) > 3
    in_memory, why = packs[0]  # the blocks written before the fault were read back
    assert in_memory == len(tree.packs), packs
    said = "No space left on device" if fault == "write" else "No such device"
    assert said in why and "could not write and map it" in why
    if fault == "map":  # and so it stays
        assert all(isinstance(block, array) for block in tree.packs)
        assert said in tree.unmapped
        assert f"kept in memory, not mapped: {tree.unmapped}" in word_index.summary()
    every_term_as_rg(root)
    assert list(mapped_folder.iterdir()) == []


def built_unmapped(root: Path, monkeypatch: pytest.MonkeyPatch) -> word_index._Tree:
    """``root`` indexed with nothing mapped; from then on, all of it mapped a write (of 64
    bytes) at a time."""
    monkeypatch.setattr(mapped, "MAP_FROM", 1 << 60)
    later(monkeypatch, 3600)
    tree = built(root)
    assert tree.pieces is not None and isinstance(tree.pieces.ids, array)
    monkeypatch.setattr(mapped, "MAP_FROM", 0)
    monkeypatch.setattr(mapped, "_WRITE_BYTES", 64)
    return tree


def test_the_mapped_file_is_written_a_window_at_a_time_and_a_block_packed_meanwhile_stays(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mapped_folder: Path) -> None:
    root = generated_tree(tmp_path / "tree", 9)
    tree = built_unmapped(root, monkeypatch)
    windows = 0
    replaced = None
    while not tree.map_out(0.0, lambda: 1.0):  # every window over after its first write
        windows += 1
        assert tree.map_job is not None
        every_term_as_rg(root)  # read from the arrays meanwhile
        if replaced is None:
            k = tree.map_job.blocks[0][0]
            replaced = tree.packs[k] = array("I", tree.packs[k])  # as a query's pack would
        assert windows < 100_000
    assert windows * 64 >= 4 * sum(map(len, tree.packs)) and replaced is not None
    assert tree.map_job is None and tree.unmapped == ""
    assert sum(isinstance(block, memoryview) for block in tree.packs) == len(tree.packs) - 1
    assert any(block is replaced for block in tree.packs)
    assert tree.pieces is not None and isinstance(tree.pieces.ids, memoryview)
    every_term_as_rg(root)
    assert list(mapped_folder.iterdir()) == []
    while not tree.map_out(0.0, lambda: 1.0):  # the one left: mapped by the next calls
        assert tree.map_job is not None and len(tree.map_job.blocks) == 1
    assert all(isinstance(block, memoryview) for block in tree.packs)
    assert len({id(view.obj) for view in (*tree.packs, *tree.pack_at, tree.pieces.ids)}) == 2
    every_term_as_rg(root)


def mapped_files(tree: word_index._Tree) -> int:
    """The files its packed postings are mapped from (its pieces have one of their own)."""
    return len({id(part.obj) for part in (*tree.packs, *tree.pack_at)
                if isinstance(part, memoryview)})


@pytest.mark.parametrize("map_from", [0, 1])
def test_files_mapped_build_after_build_are_put_in_one_once_there_are_max_mapped(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mapped_folder: Path,
        map_from: int) -> None:
    # groups of files with words of their own, each group's words in blocks of their own:
    # a change in one group packs its blocks again, and only those are mapped anew (by
    # the build's pack: with ``MAP_FROM`` above 0, nothing is left for the build's end to
    # map, which must still put the files in one)
    monkeypatch.setattr(word_index, "PACK_WORDS", 64)
    monkeypatch.setattr(mapped, "MAP_FROM", map_from)
    rng = random.Random(4)
    root = tmp_path / "tree"
    groups = 2 * word_index.MAX_MAPPED
    for group in range(groups):
        (root / f"g{group}").mkdir(parents=True)
        words = [f"g{group}w{n}" for n in range(64)]
        for n in range(6):
            (root / f"g{group}" / f"f{n}.txt").write_text(" ".join(rng.sample(words, 40)))
    later(monkeypatch, 3600)
    tree = built(root)
    assert mapped_files(tree) == 1
    counts = []
    for group in range(groups):
        for n in range(3):
            path = root / f"g{group}" / f"f{n}.txt"
            path.write_text(path.read_text() + f" g{group}w{n} g{group}w{n + 1}")
        later(monkeypatch, 3600 * (group + 2))
        every_term_as_rg(root, [[f"g{group}w"], ["w1", "w2"]])
        assert built(root) is tree
        counts.append(mapped_files(tree))
        every_term_as_rg(root, [[f"g{group}w"], ["w1", "w2"]])
    # a build's pack maps its blocks in a file of its own: the build's end puts them all
    # in one when that makes ``MAX_MAPPED``, so fewer are left mapped after a build
    assert max(counts) == word_index.MAX_MAPPED - 1 and min(counts[1:]) == 1, counts
    gc.collect()
    if os.path.isdir("/proc/self/fd"):  # the files let go are closed (CPython's mmap keeps
        held = [fd for fd in os.listdir("/proc/self/fd")  # a copy of its descriptor)
                if os.path.realpath(f"/proc/self/fd/{fd}").startswith(str(mapped_folder))]
        assert len(held) <= mapped_files(tree) + 1  # and the pieces' file


def test_a_mapped_file_left_unfinished_is_closed_with_its_tree(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mapped_folder: Path) -> None:
    if not os.path.isdir("/proc/self/fd"):
        pytest.skip("no /proc/self/fd here")
    root = generated_tree(tmp_path / "tree", 10)
    tree = built_unmapped(root, monkeypatch)
    assert not tree.map_out(0.0, lambda: 1.0)
    assert tree.map_job is not None
    assert tree.map_job.writing.out is not None
    fd = tree.map_job.writing.out.fd

    def in_folder() -> bool:
        try:
            return os.readlink(f"/proc/self/fd/{fd}").startswith(str(mapped_folder))
        except OSError:
            return False

    assert in_folder()
    del tree
    word_index.forget()
    gc.collect()
    assert not in_folder()


def test_a_build_left_unfinished_is_finished_after_a_search_the_index_answers(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mapped_folder: Path,
        matching_runs: list[list[str]]) -> None:
    # a window that ends while the pieces' file is written: the index answers searches
    # already, and each of them asks for the rest to be done once it is answered
    root = generated_tree(tmp_path / "tree", 13)
    tree = built_unmapped(root, monkeypatch)
    files = search(root, ["x"]).files
    task = word_index.Build(root, files)
    task.tree, task.at = tree, len(files)  # as a build whose window ended after its reads
    assert isinstance(task(time.monotonic() - 1), Unfinished)
    assert tree.map_job is not None and tree.unfinished
    matching_runs.clear()
    with as_warm_worker() as run_idle_work:
        answered = search(root, ["set", "real"])
        assert matching_runs == []  # the index answered
        monkeypatch.setattr(mapped, "_WRITE_BYTES", 64 << 10)
        assert run_idle_work(time.monotonic() + 30) == 1  # the build it asked for
    same(answered, by_rg(root, ["set", "real"]))
    assert not tree.unfinished and tree.map_job is None
    assert all(isinstance(block, memoryview) for block in tree.packs)
    every_term_as_rg(root)
    with as_warm_worker() as run_idle_work:
        search(root, ["set"])
        assert run_idle_work(time.monotonic() + 30) == 0  # nothing left: nothing asked


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork here")
def test_a_fork_does_not_go_on_writing_the_files_its_parent_writes(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mapped_folder: Path) -> None:
    # the child shares the file and its offset: it starts those over, the parent goes on
    monkeypatch.setattr(pieces, "RANGE_PIECES", 4)
    root = generated_tree(tmp_path / "tree", 14)
    tree = built_unmapped(root, monkeypatch)
    tree.pieces = None  # its pieces made again, to a file, a step at a time
    tree.piece_build = PieceBuild(tree.text, tree.starts, to_file=True)
    while tree.piece_build.out is None:
        assert tree.index_pieces(0.0, lambda: 1.0) is False
    assert not tree.map_out(0.0, lambda: 1.0) or tree.map_job is None
    pid = os.fork()
    if pid == 0:  # the child: nothing of the parent's files is its to write
        os._exit(0 if tree.piece_build is None and tree.map_job is None else 1)
    assert os.waitpid(pid, 0)[1] == 0
    while not tree.index_pieces(0.0, lambda: 1.0):
        pass
    assert tree.pieces is not None and isinstance(tree.pieces.ids, memoryview)
    every_term_as_rg(root)


@pytest.mark.skipif(mapped.resident_file_bytes() is None, reason="reads /proc/self/statm")
def test_views_put_in_one_new_file_let_go_of_the_pages_they_are_read_from(
        mapped_folder: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # once MAX_MAPPED files hold the blocks, map_out copies them all into one: read through
    # their mappings, every page of them came into the worker's resident memory at once
    # (24 MiB for ten copies of sympy, the worker's peak)
    numbers = array("I", range(4 << 20))  # 16 MiB
    views = mapped.map_out([numbers[at:at + (1 << 18)] for at in range(0, len(numbers), 1 << 18)])
    assert isinstance(views, list)
    del numbers
    mapped.let_go_of_pages()
    start = mapped.resident_file_bytes()
    assert start is not None
    taken: list[int] = []
    write = mapped.Appender.write

    def measured(self: mapped.Appender, data: memoryview) -> int:
        written = write(self, data)
        taken.append((mapped.resident_file_bytes() or 0) - start)
        return written

    monkeypatch.setattr(mapped.Appender, "write", measured)
    copies = mapped.map_out(views)
    assert isinstance(copies, list) and [bytes(c) for c in copies] == [bytes(v) for v in views]
    assert len(taken) >= 256  # 16 MiB in writes of 64 KiB
    assert max(taken) < 4 << 20, f"{max(taken) >> 20} MiB of pages brought in at once"
