"""A repository's change history (``lexical/history.py``): known answers on generated
repositories, the cache by commit, and every way there is no history (one note, no error).
"""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest
from git_history import GIT_ENV, History, git_stepping_in, signing_history

from slm_rerank.lexical import history
from slm_rerank.lexical.history import (
    MAX_COMMIT_PATHS,
    FileHistory,
    KeptHistory,
    kept_history,
    read_history,
)

#: a file whose name is a commit id: it must stay a path, not start a commit
HEX_NAME = "0123456789abcdef0123456789abcdef01234567"


def read(root: Path, cache: Path | None = None, **options: object) -> tuple[
        FileHistory | None, list[str]]:
    notes: list[str] = []
    found = read_history(root, cache_dir=cache, notes=notes, **options)  # type: ignore[arg-type]
    return found, notes


@pytest.fixture(autouse=True)
def _from_disk() -> None:
    """Each test reads as a new process would: nothing kept in memory by an earlier one
    (the tests of the cache folder would otherwise read what the first read kept)."""
    history.forget()


@pytest.fixture
def repo(tmp_path: Path) -> History:
    """Six commits, newest last below (so the first one is 5 commits ago)."""
    repo = History(tmp_path / "repo")
    repo.commit("one", {"a.py": "1", "b.py": "1"})
    repo.commit("two", {"a.py": "2"})
    repo.commit("three", {"a.py": "3", "sub/c.py": "3"})
    repo.commit("four", {"b.py": "4", HEX_NAME: "4", "sub/\nnewline.py": "4"})
    repo.commit("a reformat of everything", {
        "a.py": "5", **{f"gen/f{n}.txt": "5" for n in range(MAX_COMMIT_PATHS)}})
    repo.commit("six", {"sub/c.py": "6", "sub/d.py": "6"})
    return repo


# --- known answers -------------------------------------------------------------------------
def test_counts_ages_and_changes_together_of_a_known_history(repo: History) -> None:
    found, notes = read(repo.root)

    assert notes == []
    assert found is not None
    assert found.head == repo.git("rev-parse", "HEAD") and found.commits == 6
    # the reformat (over MAX_COMMIT_PATHS files) keeps its place but changes nothing
    assert {p: found.changes(p) for p in ["a.py", "b.py", "sub/c.py", "sub/d.py",
                                          "gen/f0.txt", "nowhere.py"]} == {
        "a.py": 3, "b.py": 2, "sub/c.py": 2, "sub/d.py": 1, "gen/f0.txt": 0, "nowhere.py": 0}
    assert {p: found.age(p) for p in ["a.py", "b.py", "sub/c.py", "sub/d.py",
                                      "gen/f0.txt"]} == {
        "a.py": 3, "b.py": 2, "sub/c.py": 0, "sub/d.py": 0, "gen/f0.txt": None}
    # names git might split wrongly: a commit id and a leading newline
    assert found.changes(HEX_NAME) == 1 and found.changes("sub/\nnewline.py") == 1
    assert found.paths() == {"a.py", "b.py", "sub/c.py", "sub/d.py", HEX_NAME,
                             "sub/\nnewline.py"}
    assert found.together("a.py", {"sub/c.py"}) == 1
    assert found.together("a.py", {"b.py", "sub/c.py"}) == 2
    assert found.together("a.py", {"a.py"}) == 0  # itself is not another file
    assert found.together("sub/c.py", {"sub/d.py", "a.py"}) == 2
    assert found.together("gen/f0.txt", {"a.py"}) == 0


def test_what_the_messages_of_a_files_commits_say_of_the_query_words(tmp_path: Path) -> None:
    repo = History(tmp_path / "repo")
    repo.commit("Fix the determinant of symbolic matrices", {"det.py": "1", "common.py": "1"})
    repo.commit("Speed up matrix multiplication", {"mul.py": "1"})
    repo.commit("Determinants: handle NaN entries\n\nThe Bareiss determinant compared a NaN.",
                {"det.py": "2"})
    repo.commit("Reformat everything (says determinant too)",
                {f"gen/f{n}.txt": "1" for n in range(MAX_COMMIT_PATHS + 1)})

    found, notes = read(repo.root)

    assert notes == [] and found is not None
    paths = ["det.py", "mul.py", "common.py", "absent.py", "gen/f0.txt"]
    # three commits changed a file (the reformat keeps its place but counts for none);
    # two of them say "determinant" (a plural counts: both sides are light forms)
    rarity = math.log(1 + 3 / 2)
    assert found.messages(paths, {"determinant"}) == pytest.approx(
        [rarity * 2 / 3.2, 0.0, rarity * 1 / 2.2, 0.0, 0.0])
    # a word every counted commit says weighs less than a rare one
    both = found.messages(["det.py", "mul.py"], {"nan", "matrix"})
    assert both[0] == pytest.approx(math.log(1 + 3 / 1) / 2.2)
    assert both[1] == pytest.approx(math.log(1 + 3 / 1) / 2.2)  # "matrix" once, in mul.py
    # stop words and numbers are no message words; nothing asked, nothing said
    assert found.messages(paths, {"the", "1"}) == [0.0] * 5
    assert found.messages(paths, set()) == [0.0] * 5
    # which words they say, the one adding most first: "nan" (one commit of three says it)
    # before "determinant" (two of three, each less telling); none for a file never told
    told = found.told(["det.py", "mul.py", "common.py"], {"nan", "determinant", "zeta"})
    assert [said for _, said in told] == [("nan", "determinant"), (), ("determinant",)]
    assert [score for score, _ in told] == found.messages(
        ["det.py", "mul.py", "common.py"], {"nan", "determinant", "zeta"})


def test_the_messages_window_is_its_own_and_a_message_keeps_its_first_words(
        repo: History) -> None:
    repo.commit(" ".join(f"word{chr(97 + n // 26)}{chr(97 + n % 26)}" for n in range(100)),
                {"long.py": "1"})

    found, _ = read(repo.root, commits=2, messages=5)
    assert found is not None and found.commits == 2 and len(found.changed) == 2
    assert len(found.said) == 5
    changed, said = found.said[0]
    assert changed == frozenset({"long.py"})
    assert len(said) == history.MAX_MESSAGE_WORDS
    assert "wordaa" in said and "wordcv" not in said  # the first 64 of 100 words
    assert found.said[4][1] == frozenset({"three"})

    none, _ = read(repo.root, messages=0)
    assert none is not None and none.said == () and none.commits == 7
    assert none.messages(["long.py"], {"wordaa"}) == [0.0]


def test_a_message_that_breaks_the_log_shape_keeps_the_commits_before_it() -> None:
    first, second = b"a" * 40, b"b" * 40
    raw = (b"\0" + first + b"\nFix parsing\n\0\nparse.py\0"
           + b"\0" + second + b"\nA message\0\0with NULs\n\0\nother.py\0")

    changed, words = history.parse_log(raw)

    # the broken commit's line was read, then its message broke the shape: it keeps no
    # file, and nothing after it is read as a path
    assert changed == [["parse.py"], []]
    assert words == [frozenset({"fix", "parsing"}), frozenset({"message"})]
    # an id with no newline after it is no commit line either
    assert history.parse_log(b"\0" + first + b"x\n\0\nparse.py\0") == ([], [])
    # a commit without a message (git allows one) is a commit like any other
    assert history.parse_log(b"\0" + first + b"\n\0\na.py\0") == ([["a.py"]], [frozenset()])


def test_a_subfolder_root_sees_its_files_by_its_own_paths(repo: History) -> None:
    found, notes = read(repo.root / "sub")

    assert notes == [] and found is not None
    assert found.commits == 6  # the window is the repository's
    assert found.paths() == {"c.py", "d.py", "\nnewline.py"}
    assert (found.changes("c.py"), found.age("c.py")) == (2, 0)
    assert found.changes("a.py") == 0 and found.changes("sub/c.py") == 0
    assert found.together("c.py", {"d.py"}) == 1


def test_the_window_is_the_newest_commits_asked_for(repo: History) -> None:
    found, _ = read(repo.root, commits=2)

    assert found is not None and found.commits == 2
    assert found.changes("sub/c.py") == 1 and found.changes("b.py") == 0


def test_a_merge_is_not_a_change_and_a_branch_commit_is(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    repo = History(tmp_path / "repo")
    clock = iter(range(1_700_000_000, 1_700_001_000, 10))

    def at_next_second() -> None:  # the log's order is the commit dates'
        date = f"@{next(clock)} +0000"
        monkeypatch.setenv("GIT_AUTHOR_DATE", date)
        monkeypatch.setenv("GIT_COMMITTER_DATE", date)

    at_next_second()
    repo.commit("base", {"a.py": "1"})
    repo.git("checkout", "-q", "-b", "side")
    at_next_second()
    repo.commit("side work", {"side.py": "1"})
    repo.git("checkout", "-q", "main")
    at_next_second()
    repo.commit("main work", {"a.py": "2"})
    at_next_second()
    repo.git("merge", "-q", "--no-ff", "-m", "merge side", "side")

    found, _ = read(repo.root)

    assert found is not None and found.commits == 3  # main work, side work, base
    assert (found.changes("side.py"), found.age("side.py")) == (1, 1)
    assert (found.changes("a.py"), found.age("a.py")) == (2, 0)


def test_a_log_over_the_byte_cap_is_cut_at_a_whole_commit_and_says_so(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    repo = History(tmp_path / "repo")
    repo.commits([(f"change {n}", {f"file{n:03}.py": str(n)}) for n in range(40)])
    monkeypatch.setattr(history, "MAX_LOG_BYTES", 500)  # a commit prints about 55 bytes

    found, notes = read(repo.root)

    assert found is not None and 1 < found.commits < 10
    # the newest commits, each whole: file039.py is the newest
    assert found.paths() == {f"file{n:03}.py" for n in range(40 - found.commits, 40)}
    assert len(notes) == 1 and "passed 500 bytes" in notes[0]
    assert f"the newest {found.commits} commits" in notes[0]


# --- the cache -----------------------------------------------------------------------------
def counting_git(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A ``git`` first on PATH that records each call's arguments, then runs the real git."""
    real = shutil.which("git")
    assert real is not None
    folder = tmp_path / "bin"
    folder.mkdir()
    record = tmp_path / "git-calls"
    script = folder / "git"
    script.write_text(f"#!/bin/sh\necho \"$*\" >> '{record}'\nexec '{real}' \"$@\"\n")
    script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ['PATH']}")
    return record


def logs_run(record: Path) -> int:
    if not record.exists():
        return 0
    return sum(" log " in f" {line} " for line in record.read_text().splitlines())


def same(one: FileHistory | None, two: FileHistory | None) -> bool:
    assert one is not None and two is not None
    return (one.head, one.commits, one.changed, one.cut, one.said) == (
        two.head, two.commits, two.changed, two.cut, two.said)


def test_a_second_read_of_the_same_commit_comes_from_the_cache(
        repo: History, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        isolated_home: Path) -> None:
    record = counting_git(tmp_path, monkeypatch)

    cold, _ = read(repo.root, isolated_home)
    assert logs_run(record) == 1
    history.forget()  # a new process: from the cache folder
    warm, notes = read(repo.root, isolated_home)

    assert logs_run(record) == 1  # no second git log
    assert notes == [] and same(cold, warm)
    # a subfolder root of the same repository and commit shares the entry
    under, _ = read(repo.root / "sub", isolated_home)
    assert logs_run(record) == 1
    assert under is not None and under.changes("c.py") == 2


def test_a_new_commit_is_read_again(repo: History, tmp_path: Path,
                                    monkeypatch: pytest.MonkeyPatch,
                                    isolated_home: Path) -> None:
    record = counting_git(tmp_path, monkeypatch)
    read(repo.root, isolated_home)
    repo.commit("seven", {"b.py": "7"})

    found, _ = read(repo.root, isolated_home)

    assert logs_run(record) == 2
    assert found is not None and (found.commits, found.changes("b.py"), found.age("b.py")) == (
        7, 3, 0)


def test_a_warm_process_reads_the_same_commit_from_memory(
        repo: History, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        isolated_home: Path) -> None:
    cold, _ = read(repo.root, isolated_home)
    cache_entry(isolated_home).unlink()  # neither the cache folder nor git log is read
    record = counting_git(tmp_path, monkeypatch)

    warm, notes = read(repo.root, isolated_home)

    assert logs_run(record) == 0 and notes == [] and same(cold, warm)
    assert not list((isolated_home / "history").glob("*.json"))
    # a new HEAD is a new key: read from git, then kept too
    repo.commit("seven", {"b.py": "7"})
    moved, _ = read(repo.root, isolated_home)
    assert logs_run(record) == 1
    assert moved is not None and moved.head == repo.git("rev-parse", "HEAD")
    assert (moved.commits, moved.changes("b.py"), moved.age("b.py")) == (7, 3, 0)
    # back to the first commit (a reset): its history again, as kept
    repo.git("reset", "-q", "--hard", "HEAD~1")
    back, _ = read(repo.root, isolated_home)
    assert logs_run(record) == 1 and same(cold, back)


def test_without_a_cache_folder_nothing_is_kept_in_memory(
        repo: History, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    read(repo.root)
    record = counting_git(tmp_path, monkeypatch)

    found, _ = read(repo.root)

    assert logs_run(record) == 1 and found is not None


def cache_entry(cache: Path) -> Path:
    (entry,) = (cache / "history").glob("*.json")
    return entry


def _corrupt(doc: dict[str, object], key: str, value: object) -> bytes:
    if key == "changed" and isinstance(value, list):  # the damage is to the paths alone
        return json.dumps({**doc, key: value, "said": [[]] * len(value)}).encode()
    return json.dumps({**doc, key: value}).encode()


def _each_says(doc: dict[str, object], value: object) -> bytes:
    rows = doc["changed"]
    assert isinstance(rows, list)
    return _corrupt(doc, "said", [value] * len(rows))


#: how a cache entry can be wrong: name -> the entry's new bytes, from the good document
DAMAGE = {
    "not json": lambda doc: b"\x00{garbage",
    "not an object": lambda doc: b"[1, 2, 3]",
    "another commit": lambda doc: _corrupt(doc, "head", "f" * 40),
    "another repository": lambda doc: _corrupt(doc, "top", "/elsewhere"),
    "another window": lambda doc: _corrupt(doc, "asked", 5),
    "a path index out of range": lambda doc: _corrupt(doc, "changed", [[10_000]]),
    "a path that is not a string": lambda doc: _corrupt(doc, "paths", [1, 2]),
    "a flag that is not a flag": lambda doc: _corrupt(doc, "cut", "no"),
    "more commits than asked": lambda doc: _corrupt(
        doc, "changed", [[0]] * (history.MESSAGE_COMMITS + 1)),
    "a word index out of range": lambda doc: _each_says(doc, [10_000]),
    "a word that is not a string": lambda doc: _corrupt(doc, "vocabulary", [1, 2]),
    "words as floats": lambda doc: _each_says(doc, [0.0]),
    "more words than a message keeps": lambda doc: _each_says(
        doc, [0] * (history.MAX_MESSAGE_WORDS + 1)),
    "fewer messages than commits": lambda doc: _corrupt(doc, "said", []),
    "no messages": lambda doc: json.dumps({k: v for k, v in doc.items() if k != "said"}
                                          ).encode(),
    "counts as floats": lambda doc: _corrupt(doc, "changed", [[0.0]]),
}


@pytest.mark.parametrize("damage", list(DAMAGE))
def test_a_damaged_or_foreign_cache_entry_is_read_again_and_rewritten(
        repo: History, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        isolated_home: Path, damage: str) -> None:
    cold, _ = read(repo.root, isolated_home)
    entry = cache_entry(isolated_home)
    good = entry.read_bytes()
    entry.write_bytes(DAMAGE[damage](json.loads(good)))
    history.forget()  # a new process: the entry is all there is
    record = counting_git(tmp_path, monkeypatch)

    found, notes = read(repo.root, isolated_home)

    assert notes == [] and same(cold, found)
    assert logs_run(record) == 1  # read from git, not from the damaged entry
    assert json.loads(entry.read_bytes()) == json.loads(good)  # and written again


def test_a_cache_entry_over_its_size_cap_or_a_fifo_is_not_read(
        repo: History, monkeypatch: pytest.MonkeyPatch, isolated_home: Path) -> None:
    cold, _ = read(repo.root, isolated_home)
    entry = cache_entry(isolated_home)
    monkeypatch.setattr(history, "MAX_ENTRY_BYTES", entry.stat().st_size - 1)
    history.forget()  # each read below as a new process: the entry is all there is
    assert same(cold, read(repo.root, isolated_home)[0])
    monkeypatch.undo()
    entry.unlink()
    os.mkfifo(entry)  # opening it to read would wait for a writer for ever
    history.forget()

    found, notes = read(repo.root, isolated_home)

    assert notes == [] and same(cold, found)
    assert entry.is_file()  # the FIFO was replaced by the entry


def test_an_unwritable_cache_folder_costs_only_time(repo: History, tmp_path: Path) -> None:
    blocked = tmp_path / "blocked"
    blocked.write_text("a file where the cache folder should be")

    found, notes = read(repo.root, blocked)

    assert notes == [] and found is not None and found.changes("a.py") == 3


# --- no history: one note, no error --------------------------------------------------------
def test_outside_git_there_is_no_history_and_a_note_says_why(tmp_path: Path) -> None:
    folder = tmp_path / "plain"
    folder.mkdir()

    found, notes = read(folder)

    assert found is None
    assert notes == [f"no change history: {folder} is not in a git repository"]


def test_a_repository_without_a_commit_has_no_history(tmp_path: Path) -> None:
    repo = History(tmp_path / "empty")

    found, notes = read(repo.root)

    assert found is None and len(notes) == 1 and "has no commits yet" in notes[0]


def test_a_shallow_clone_has_no_history(repo: History, tmp_path: Path) -> None:
    shallow = tmp_path / "shallow"
    subprocess.run(["git", "clone", "-q", "--depth", "2", f"file://{repo.root}",
                    str(shallow)], check=True, capture_output=True,
                   env={**os.environ, **GIT_ENV})

    found, notes = read(shallow)

    assert found is None and len(notes) == 1 and "shallow clone" in notes[0]
    assert "git fetch --unshallow" in notes[0]


def test_a_broken_repository_has_no_history(repo: History) -> None:
    head = repo.git("rev-parse", "HEAD")
    (repo.root / ".git" / "objects" / head[:2] / head[2:]).unlink()

    found, notes = read(repo.root)

    assert found is None and len(notes) == 1
    assert f"HEAD in {repo.root} names {head}, which git cannot read" in notes[0]


def test_a_repository_missing_an_older_commit_has_no_history(repo: History) -> None:
    first = repo.git("rev-list", "--max-parents=0", "HEAD")
    (repo.root / ".git" / "objects" / first[:2] / first[2:]).unlink()

    found, notes = read(repo.root)

    assert found is None and len(notes) == 1
    assert notes[0].startswith("no change history: git log ") and "failed" in notes[0]


def test_without_git_there_is_no_history(repo: History, tmp_path: Path,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "nothing-here"))

    found, notes = read(repo.root)

    assert found is None and len(notes) == 1 and "cannot run git" in notes[0]


def test_a_tiny_deadline_ends_the_read_at_once_with_a_note(repo: History) -> None:
    started = time.monotonic()

    found, notes = read(repo.root, deadline_s=1e-6)

    assert found is None
    assert notes == [f"no change history: git did not answer within 1e-06 s in {repo.root}"]
    assert time.monotonic() - started < 2.0


def test_a_log_still_printing_at_the_deadline_keeps_the_commits_it_gave_whole(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, isolated_home: Path) -> None:
    """A git whose log prints its first commits, then stalls: the history is those
    commits, with a note, and nothing is cached (the next read reads the log whole)."""
    repo = History(tmp_path / "repo")
    for n in range(30):
        repo.commit(f"change number {n}", {f"f{n}.py": "1"})
    path = os.environ["PATH"]
    git_stepping_in(monkeypatch, tmp_path / "bin", "log",
                    '"$REAL" "$@" | head -c 700; exec sleep 30')
    started = time.monotonic()

    found, notes = read(repo.root, isolated_home, deadline_s=1.0)

    assert time.monotonic() - started < 5.0
    assert found is not None and 0 < found.commits < 30, notes
    assert found.cut
    assert notes == [f"change history: git log did not end within 1 s in "
                     f"{os.path.realpath(repo.root)}; the newest {found.commits} commits it "
                     "gave are used"]
    # the newest commits, whole: each changed its own file
    assert found.changed[0] == frozenset({"f29.py"})
    assert all(len(paths) == 1 for paths in found.changed)

    monkeypatch.setenv("PATH", path)
    again, later = read(repo.root, isolated_home, deadline_s=5.0)
    assert again is not None and again.commits == 30 and not again.cut and later == []


def test_a_log_cut_where_the_next_commit_begins_keeps_the_one_before(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, isolated_home: Path) -> None:
    """A git that prints every commit whole, then the start of one more (its record's NUL
    and part of its id), then stalls: the commits printed are whole, all of them kept (the
    last was dropped as if it might have had more paths to come)."""
    repo = History(tmp_path / "repo")
    for n in range(5):
        repo.commit(f"change number {n}", {f"f{n}.py": "1"})
    git_stepping_in(monkeypatch, tmp_path / "bin", "log",
                    '"$REAL" "$@"; printf \'\\000ab12\'; exec sleep 30')

    found, notes = read(repo.root, isolated_home, deadline_s=1.0)

    assert found is not None and found.commits == 5, notes
    assert found.changed[-1] == frozenset({"f0.py"})
    assert notes == [f"change history: git log did not end within 1 s in "
                     f"{os.path.realpath(repo.root)}; the newest 5 commits it gave are used"]


def test_a_cut_log_keeps_each_commit_the_next_one_began_after() -> None:
    first, second = b"a" * 40 + b"\nfirst\n", b"b" * 40 + b"\nsecond\n"
    whole = b"\0" + first + b"\0\na.py\0b.py\0\0" + second + b"\0\nc.py\0"
    # cut inside the second commit's paths: it may have more, so it is left out
    assert history.parse_log(whole, cut=True)[0] == [["a.py", "b.py"]]
    # cut where the second begins (its NUL, part of its id, or its id alone)
    for end in (b"", b"bbb", b"b" * 40, second[:45]):
        cut = b"\0" + first + b"\0\na.py\0b.py\0\0" + end
        assert history.parse_log(cut, cut=True)[0] == [["a.py", "b.py"]], end
    # cut after a path's NUL: another path of the same commit may follow
    assert history.parse_log(b"\0" + first + b"\0\na.py\0", cut=True)[0] == []
    # a commit without paths is whole once the next begins
    assert history.parse_log(b"\0" + first + b"\0\0" + b"bb", cut=True)[0] == [[]]
    assert history.parse_log(b"\0" + first + b"\0", cut=True)[0] == []


def test_a_git_that_lingers_after_its_output_is_not_waited_for_past_the_deadline(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, isolated_home: Path) -> None:
    """A git log that prints the whole log, then closes its output and goes on running past
    the deadline (it would exit half a second later): the deadline is a total, so the read
    ends at it with the commits given and a note, rather than a whole log a while after."""
    repo = History(tmp_path / "repo")
    for n in range(3):
        repo.commit(f"change number {n}", {f"f{n}.py": "1"})
    git_stepping_in(monkeypatch, tmp_path / "bin", "log",
                    '"$REAL" "$@"; sleep 0.9; exec >&-; sleep 0.6; exit 0')

    found, notes = read(repo.root, isolated_home, deadline_s=1.0)

    assert found is not None and found.cut, notes
    assert len(notes) == 1 and "git log did not end within 1 s" in notes[0], notes


def test_a_log_that_prints_no_whole_commit_by_the_deadline_is_no_history(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, repo: History) -> None:
    git_stepping_in(monkeypatch, tmp_path / "bin", "log", "exec sleep 30")

    found, notes = read(repo.root, deadline_s=0.5)

    assert found is None
    assert notes == [f"no change history: git did not answer within 0.5 s in {repo.root}"]


def test_a_revision_that_is_an_option_is_refused(repo: History) -> None:
    with pytest.raises(ValueError, match="not a revision"):
        read(repo.root, rev="--output=/tmp/x")


def test_a_named_revision_reads_the_history_before_it(repo: History) -> None:
    found, notes = read(repo.root, rev="HEAD~2")  # before the reformat and "six"

    assert notes == [] and found is not None and found.commits == 4
    assert found.head == repo.git("rev-parse", "HEAD~2")
    assert (found.changes("a.py"), found.age("a.py"), found.changes("sub/d.py")) == (3, 1, 0)


# --- the repository's configuration starts nothing -----------------------------------------
def test_the_repository_configuration_starts_no_process(tmp_path: Path) -> None:
    marks = tmp_path / "marks"
    marks.mkdir()

    def planted(name: str, then: str) -> str:
        script = tmp_path / name
        script.write_text(f"#!/bin/sh\necho ran >> '{marks / name}'\n{then}\n")
        script.chmod(0o755)
        return str(script)

    repo = signing_history(tmp_path)
    repo.commit("one", {".gitattributes": "*.py filter=evil diff=evil\n", "a.py": "1\n"})
    repo.commit("two", {"a.py": "2\n", "src/b.py": "2\n"})
    # what git log (and rev-parse) could start: a signature check, and more for good measure
    for key, value in [("log.showSignature", "true"),
                       ("gpg.program", planted("gpg", "exit 1")),
                       ("core.fsmonitor", planted("fsmonitor", "true")),
                       ("filter.evil.clean", planted("clean", "cat")),
                       ("filter.evil.smudge", planted("smudge", "cat")),
                       ("diff.evil.textconv", planted("textconv", 'cat "$1"')),
                       ("diff.external", planted("external", "true")),
                       ("core.pager", planted("pager", "cat")),
                       ("diff.relative", "true")]:
        repo.git("config", key, value)
    subprocess.run(["git", "-C", str(repo.root), "log", "-n1"], capture_output=True,
                   env={**os.environ, **GIT_ENV}, check=False)
    assert sorted(p.name for p in marks.iterdir()) == ["gpg"], "the plant is not live"
    (marks / "gpg").unlink()

    found, notes = read(repo.root)
    under, _ = read(repo.root / "src")  # diff.relative would list its paths relative to src

    assert list(marks.iterdir()) == []
    assert notes == [] and found is not None and under is not None
    assert (found.changes("a.py"), found.changes("src/b.py"),
            found.together("a.py", {"src/b.py"})) == (2, 1, 1)
    assert under.paths() == {"b.py"}


# --- looked up beside the search's sources (kept_history) ---------------------------------
def test_kept_history_needs_a_log_until_one_is_read_then_gives_what_read_history_gives(
        repo: History, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        isolated_home: Path) -> None:
    record = counting_git(tmp_path, monkeypatch)

    assert kept_history(repo.root, cache_dir=isolated_home) is None  # only a log can tell
    assert logs_run(record) == 0
    cold, notes = read(repo.root, isolated_home)
    kept = kept_history(repo.root, cache_dir=isolated_home)
    history.forget()  # a new process: from the cache folder
    from_disk = kept_history(repo.root, cache_dir=isolated_home)

    assert logs_run(record) == 1
    assert kept is not None and from_disk is not None
    assert kept.notes == from_disk.notes == notes
    assert same(kept.history, cold) and same(from_disk.history, cold)


def test_kept_history_knows_there_is_none_outside_git_with_the_same_note(
        tmp_path: Path) -> None:
    folder = tmp_path / "plain"
    folder.mkdir()

    kept = kept_history(folder, cache_dir=tmp_path / "cache")

    assert kept == KeptHistory(None, read(folder)[1])


def test_kept_history_leaves_git_out_of_time_to_read_history(
        repo: History, isolated_home: Path) -> None:
    read(repo.root, isolated_home)

    # read_history, called after it with its own time, says why or reads the log
    assert kept_history(repo.root, cache_dir=isolated_home, deadline_s=1e-6) is None


def test_kept_history_says_what_read_history_says_without_git(
        repo: History, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        isolated_home: Path) -> None:
    read(repo.root, isolated_home)
    monkeypatch.setenv("PATH", str(tmp_path / "nothing-here"))

    kept = kept_history(repo.root, cache_dir=isolated_home)

    assert kept == KeptHistory(None, read(repo.root, isolated_home)[1])
    assert kept.notes and "cannot run git" in kept.notes[0]
