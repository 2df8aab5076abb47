"""Mining cases from git history: which commits make cases, and what each case holds."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
from git_history import History

from slm_rerank.calibration.mining import RULES, history_root, mine, subject_rule
from slm_rerank.git_runner import GitError

RETRY = "def retry(call):\n    return call()\n"
FIXED = "def retry(call, attempts=3):\n    for _ in range(attempts):\n        return call()\n"


def seeded(history: Callable[[str], History]) -> History:
    repo = history("repo")
    repo.commit("start the project with a retry helper",
                {"src/retry.py": RETRY, "src/http.py": "def get():\n    pass\n",
                 "README.md": "# demo\n", "tests/test_retry.py": "def test():\n    pass\n"})
    return repo


def test_a_fix_of_one_source_file_is_a_case_searched_in_its_parent(
        history: Callable[[str], History]) -> None:
    repo = seeded(history)
    parent = repo.git("rev-parse", "HEAD")
    fix = repo.commit("retry gives up after three attempts",
                      {"src/retry.py": FIXED, "tests/test_retry.py": "def test():\n    1\n",
                       "CHANGES.md": "- retry\n"})

    [case] = mine(repo.root, 10).cases

    assert case.query == "retry gives up after three attempts"
    assert case.gold_files == ("src/retry.py",)  # the test and changelog are no answer
    assert case.tree == parent and case.id == fix[:12]


@pytest.mark.parametrize(("subject", "files", "rule"), [
    ("Revert \"retry gives up after three attempts\"", {"src/retry.py": RETRY}, "revert"),
    ("Bump version to 2.0.1", {"src/retry.py": FIXED}, "release"),
    ("run black over the retry module", {"src/retry.py": FIXED}, "formatting"),
    ("fix typo in the retry helper", {"src/retry.py": FIXED}, "typo"),
    ("update dev dependencies for the build", {"src/retry.py": FIXED}, "dependencies"),
    ("Bump mypy from 1.5.0 to 1.5.1", {"src/retry.py": FIXED}, "dependencies"),
    ("[pre-commit.ci] pre-commit autoupdate", {"src/retry.py": FIXED}, "formatting"),
    ("fix: retry", {"src/retry.py": FIXED}, "short subject"),
    ("explain the retry helper in the docs", {"README.md": "# retry\n",
                                              "tests/test_retry.py": "x = 1\n"},
     "no source file"),
    ("touch every module of the client at once",
     {f"src/m{i}.py": f"x = {i + 1}\n" for i in range(3)} | {"src/retry.py": FIXED},
     "too many files"),
    ("add a backoff module for the retries", {"src/backoff.py": "def backoff():\n    1\n"},
     "only new files"),
])
def test_each_rule_skips_the_commit_that_breaks_it(
        history: Callable[[str], History], subject: str, files: dict[str, str], rule: str
        ) -> None:
    repo = seeded(history)
    if rule == "too many files":  # the files must exist in the parent to count as changed
        repo.commit("add three modules to change later",
                    {f"src/m{i}.py": "x = 0\n" for i in range(3)})
    repo.commit(subject, files)

    mined = mine(repo.root, 1)

    assert mined.cases == [] and mined.looked_at == 1
    assert dict(mined.skipped) == {rule: 1}
    assert rule in {name for name, _ in RULES}


def test_merges_and_the_first_commit_are_skipped(history: Callable[[str], History]) -> None:
    repo = seeded(history)
    repo.git("checkout", "-q", "-b", "side")
    repo.commit("retry gives up after three attempts", {"src/retry.py": FIXED})
    repo.git("checkout", "-q", "main")
    repo.commit("http get sends a user agent header", {"src/http.py": "def get():\n    ua\n"})
    repo.git("-c", "user.name=t", "-c", "user.email=t@example.org", "merge", "-q",
             "--no-edit", "side")

    mined = mine(repo.root, 10)

    assert mined.skipped["merge"] == 1 and mined.skipped["root"] == 1
    assert sorted(c.query for c in mined.cases) == ["http get sends a user agent header",
                                                    "retry gives up after three attempts"]


def test_commits_bounds_how_far_back_mining_looks_newest_first(
        history: Callable[[str], History]) -> None:
    repo = seeded(history)
    repo.commit("retry gives up after three attempts", {"src/retry.py": FIXED})
    repo.commit("http get sends a user agent header", {"src/http.py": "def get():\n    ua\n"})

    mined = mine(repo.root, 1)

    assert mined.looked_at == 1
    assert [c.query for c in mined.cases] == ["http get sends a user agent header"]


def test_with_body_the_query_is_the_whole_message(history: Callable[[str], History]) -> None:
    repo = seeded(history)
    repo.commit("retry gives up after three attempts\n\nIt looped forever on a dead host.",
                {"src/retry.py": FIXED})

    [case] = mine(repo.root, 1, with_body=True).cases

    assert case.query == ("retry gives up after three attempts\n\n"
                          "It looped forever on a dead host.")


def test_a_path_that_is_not_utf8_is_kept_as_the_file_system_spells_it(
        history: Callable[[str], History]) -> None:
    repo = seeded(history)
    name = b"src/caf\xe9.py"
    repo.commit("add the cafe module to the project", {name: "def brew():\n    pass\n"})
    repo.commit("brew the cafe coffee twice as long", {name: "def brew():\n    twice\n"})

    [case] = mine(repo.root, 1).cases

    assert case.gold_files == ("src/caf\udce9.py",)
    assert (repo.root / case.gold_files[0]).is_file()


@pytest.mark.parametrize("encoding", ["UTF-16", "ISO-8859-1"])
def test_a_repositorys_log_output_encoding_changes_no_case(
        history: Callable[[str], History], encoding: str) -> None:
    # i18n.logOutputEncoding=UTF-16 in .git/config ended calibrate in a traceback
    repo = seeded(history)
    repo.commit("retry gives up after three attempts \u2014 caf\u00e9", {"src/retry.py": FIXED})
    repo.git("config", "i18n.logOutputEncoding", encoding)

    [case] = mine(repo.root, 10).cases

    assert case.query == "retry gives up after three attempts \u2014 caf\u00e9"
    assert case.gold_files == ("src/retry.py",)


def test_a_folder_outside_git_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(GitError, match="is not inside a git repository"):
        history_root(tmp_path)


def test_a_repository_git_cannot_read_is_gits_error_not_outside_git(
        history: Callable[[str], History]) -> None:
    # a bad line in .git/config was reported as "not inside a git repository"
    repo = seeded(history)
    with open(repo.root / ".git" / "config", "a", encoding="utf-8") as config:
        config.write("[core\n")

    with pytest.raises(GitError, match="bad config line") as raised:
        history_root(repo.root)
    assert "not inside a git repository" not in str(raised.value)


def test_a_repository_without_commits_is_a_clear_error(history: Callable[[str], History]
                                                       ) -> None:
    repo = history("empty")

    with pytest.raises(GitError, match="has no commits yet"):
        history_root(repo.root)


def test_a_shallow_clone_is_a_clear_error_saying_how_to_unshallow(
        history: Callable[[str], History], tmp_path: Path) -> None:
    repo = seeded(history)
    repo.commit("retry gives up after three attempts", {"src/retry.py": FIXED})
    shallow = tmp_path / "shallow"
    subprocess.run(["git", "clone", "-q", "--depth", "1", f"file://{repo.root}",
                    str(shallow)], check=True, capture_output=True)

    with pytest.raises(GitError, match="shallow clone.*git fetch --unshallow"):
        history_root(shallow)


@pytest.mark.parametrize("subject", ["fix date format parsing in the log reader",
                                     "handle an empty retry list without a crash"])
def test_a_subject_that_says_something_breaks_no_rule(subject: str) -> None:
    assert subject_rule(subject) is None


@pytest.mark.parametrize(("subject", "rule"), [
    ("chore(deps): Update Rust Stable to v1.89 (#6093)", "dependencies"),
    ("fix(deps): update module golang.org/x/sys to v0.30.0", "dependencies"),
    ("Update plugin com.diffplug.spotless to v8.8.0 (#9520)", "dependencies"),
    ("Update kotlinpoet to v1.17.0 (#1761)", "dependencies"),
    ("Update graalvm to v1 (major) (#9393)", "dependencies"),
    ("Update `supports-color` to 9.4.0 (#603)", "dependencies"),
    ("feat: bump strip-json-comments from 3 to 5 (#5484)", "dependencies"),
    # a subject that goes on after the version says what changed: kept
    ("Update the parser to v2 so old clients keep working", None),
    ("fix(deps-resolver): keep the newest of two equal versions", None),
    ("retry gives up after three attempts", None),
])
def test_dependency_bot_subjects_are_skipped_and_fixes_kept(subject: str,
                                                            rule: str | None) -> None:
    assert subject_rule(subject) == rule
