"""A repository's vocabulary: its path components and declared symbols, bounded, cached."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from slm_rerank.hook import vocabulary
from slm_rerank.hook.vocabulary import NAME, PART, OutOfTime, load


def tree(root: Path, files: dict[str, str | bytes]) -> Path:
    for rel, body in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(body.encode() if isinstance(body, str) else body)
    return root


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The files whose contents the vocabulary reads, in order."""
    seen: list[str] = []
    real = vocabulary._file_words

    def counted(base: bytes, rel: str, limit: int) -> str:
        seen.append(rel)
        return real(base, rel, limit)

    monkeypatch.setattr(vocabulary, "_file_words", counted)
    return seen


def test_path_components_and_declared_symbols_are_words(tmp_path: Path) -> None:
    root = tree(tmp_path / "repo", {
        "src/upload/progress_bar.py": "class ProgressBar:\n    def redraw(self):\n"
                                      "        pass\n",
        "web/theme.ts": "export function applyDarkMode() {}\n"})

    words = load(root, tmp_path / "cache", 30).vocabulary

    assert words.lookup("upload") == (1, NAME)
    assert words.lookup("progress") == (1, PART)  # of progress_bar and ProgressBar
    assert words.lookup("progressbar") == (1, NAME)
    assert words.lookup("redraw") == (1, NAME)
    assert words.lookup("dark") == (1, PART)
    assert words.lookup("redrawing") == (1, NAME)  # a form of a word finds it
    assert words.lookup("class") is None  # a keyword is not a name


def test_a_second_load_of_an_unchanged_tree_reads_no_file(tmp_path: Path,
                                                          reads: list[str]) -> None:
    root = tree(tmp_path / "repo", {"a.py": "def alpha():\n    pass\n", "b.py": "X = 1\n"})
    first = load(root, tmp_path / "cache", 30)
    reads.clear()

    second = load(root, tmp_path / "cache", 30)

    assert (first.cached, second.cached) == (False, True)
    assert second.vocabulary == first.vocabulary
    assert reads == []


def test_an_edit_rereads_only_the_file_it_changed(tmp_path: Path, reads: list[str]) -> None:
    root = tree(tmp_path / "repo", {f"m{i}.py": f"def f{i}():\n    pass\n" for i in range(20)})
    load(root, tmp_path / "cache", 30)
    reads.clear()
    (root / "m7.py").write_text("def renamed_helper():\n    pass\n")

    words = load(root, tmp_path / "cache", 30).vocabulary

    assert reads == ["m7.py"]
    assert words.lookup("helper") == (1, PART)


def test_a_build_out_of_time_keeps_what_it_read_for_the_next_one(
        tmp_path: Path, reads: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    root = tree(tmp_path / "repo", {f"m{i:03}.py": "def f():\n    pass\n" for i in range(200)})
    clock = iter(range(10_000))
    # each look at the clock is a second later: a budget of 3 s runs out part way
    monkeypatch.setattr(vocabulary, "_clock", lambda: float(next(clock)))

    with pytest.raises(OutOfTime):
        load(root, tmp_path / "cache", 3)
    read_first = len(reads)
    monkeypatch.setattr(vocabulary, "_clock", lambda: 0.0)
    reads.clear()
    words = load(root, tmp_path / "cache", 3).vocabulary

    assert 0 < read_first < 200
    assert len(reads) == 200 - read_first
    assert words.files == 200


def test_the_walk_stops_at_the_file_bound_and_says_it_is_incomplete(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(vocabulary, "MAX_FILES", 10)
    root = tree(tmp_path / "repo", {f"f{i:02}.txt": "" for i in range(30)})

    words = load(root, tmp_path / "cache", 30).vocabulary

    assert (words.files, words.complete) == (10, False)


def test_a_folder_of_more_entries_than_the_bound_is_read_only_to_the_bound(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(vocabulary, "MAX_ENTRIES", 20)
    root = tree(tmp_path / "repo", {f"f{i:03}.txt": "" for i in range(300)})
    yielded = []
    real_scandir = os.scandir

    class Counted:
        def __init__(self, path: object) -> None:
            self.inner = real_scandir(path)  # type: ignore[call-overload]

        def __enter__(self) -> Counted:
            return self

        def __exit__(self, *exc: object) -> None:
            self.inner.close()

        def __iter__(self) -> Counted:
            return self

        def __next__(self) -> os.DirEntry[str]:
            entry = next(self.inner)
            yielded.append(entry.name)
            return entry

    monkeypatch.setattr(vocabulary.os, "scandir", Counted)
    words = load(root, None, 30).vocabulary

    assert words.complete is False
    assert len(yielded) <= 21


def test_only_the_head_of_a_huge_source_file_is_read(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(vocabulary, "MAX_FILE_BYTES", 1000)
    body = "def early_name():\n    pass\n" + "#" * 5000 + "\ndef late_name():\n    pass\n"
    root = tree(tmp_path / "repo", {"big.py": body})

    words = load(root, tmp_path / "cache", 30).vocabulary

    assert words.lookup("early") is not None
    assert words.lookup("late") is None


def test_names_with_control_characters_and_binary_files_give_only_plain_words(
        tmp_path: Path) -> None:
    root = tree(tmp_path / "repo", {
        "src/evil\x1b]0;pwned\x07\n.py": "def \x1b[2Jbeacon():\n    pass\n",
        "blob.so": bytes(range(256)) * 64,
        "fn.rs": b"fn \xff\xfeodd() {}\nfn plain_name() {}\n"})

    words = load(root, tmp_path / "cache", 30).vocabulary

    assert words.words and all(w.isascii() and w.isalnum() and w.islower()
                               for w in words.words)
    assert words.lookup("pwned") is not None and words.lookup("plain") is not None


def test_a_fifo_or_a_symlink_in_place_of_a_cache_entry_is_a_miss_not_a_hang(
        tmp_path: Path) -> None:
    root = tree(tmp_path / "repo", {"a.py": "def alpha():\n    pass\n"})
    cache = tmp_path / "cache"
    load(root, cache, 30)
    words_path, files_path = vocabulary._entry_paths(cache, root)
    words_path.unlink()
    os.mkfifo(words_path)
    files_path.unlink()
    files_path.symlink_to(tmp_path / "elsewhere.json")

    loaded = load(root, cache, 30)

    assert loaded.cached is False
    assert loaded.vocabulary.lookup("alpha") is not None
    assert not (tmp_path / "elsewhere.json").exists()  # replaced by rename, not followed


@pytest.mark.parametrize("words", ["alpha:x", "alpha", "alpha:1 \x1b[31m:9", "Alpha:1"])
def test_a_corrupt_word_list_of_a_cached_file_is_read_again(tmp_path: Path,
                                                             words: str) -> None:
    root = tree(tmp_path / "repo", {"a.py": "def alpha():\n    pass\n"})
    cache = tmp_path / "cache"
    load(root, cache, 30)
    words_path, files_path = vocabulary._entry_paths(cache, root)
    info = (root / "a.py").stat()
    words_path.unlink()  # the tree's entry gone: the per-file words are used
    files_path.write_text(json.dumps({"a.py": [info.st_size, info.st_mtime_ns, words]}))

    loaded = load(root, cache, 30)

    assert loaded.vocabulary.lookup("alpha") is not None
    assert all(vocabulary._WORD.fullmatch(word) for word in loaded.vocabulary.words)


def test_a_cache_entry_over_its_size_cap_is_not_read(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    root = tree(tmp_path / "repo", {"a.py": "def alpha():\n    pass\n"})
    load(root, tmp_path / "cache", 30)
    monkeypatch.setattr(vocabulary, "MAX_ENTRY_BYTES", 10)

    assert load(root, tmp_path / "cache", 30).cached is False


def test_the_cache_keeps_a_bounded_number_of_roots(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(vocabulary, "KEEP_ENTRIES", 3)
    for i in range(8):
        load(tree(tmp_path / f"repo{i}", {"a.py": "X = 1\n"}), tmp_path / "cache", 30)

    assert len(list((tmp_path / "cache" / "vocabulary").glob("*.json"))) <= 2 * 3 + 2


def test_a_kept_vocabulary_is_served_while_its_cache_entry_is_the_same_file(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(vocabulary, "_KEPT", {})
    root = tree(tmp_path / "repo", {"a.py": "def alpha():\n    pass\n"})
    cache = tmp_path / "cache"
    load(root, cache, 30)
    first = load(root, cache, 30)  # read from the entry file, and kept
    assert load(root, cache, 30).vocabulary is first.vocabulary  # not parsed again
    words_path, _ = vocabulary._entry_paths(cache, root)
    doc = json.loads(words_path.read_text())
    doc["words"]["omega"] = [1, NAME]
    replacement = words_path.with_suffix(".new")
    replacement.write_text(json.dumps(doc))
    os.replace(replacement, words_path)  # as another process's rebuild writes it

    again = load(root, cache, 30)

    assert again.cached and again.vocabulary.lookup("omega") == (1, NAME)
