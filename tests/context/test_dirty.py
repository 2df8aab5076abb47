"""--dirty: files with uncommitted changes that match the query rank higher; nothing else does."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from search_fixtures import cli, git_init, result_paths, search, write_tree

from slm_rerank.context.dirty import find_dirty, parse_status


def git(root: Path, *args: str) -> None:
    # protocol.file.allow: `git submodule add` of a local folder is refused without it
    subprocess.run(["git", "-C", str(root), "-c", "user.email=t@example.com",
                    "-c", "user.name=t", "-c", "protocol.file.allow=always", *args],
                   check=True, capture_output=True)


def committed_repo(root: Path, files: dict[str, str | bytes]) -> Path:
    write_tree(git_init(root), files)
    git(root, "add", "-A")
    git(root, "commit", "-qm", "initial")
    return root


#: Two modules about retries: ``strong`` says it more often, so it leads on the words alone.
FILES: dict[str, str | bytes] = {
    "pkg/strong.py": "def compute():\n    # retry retry budget\n    return 1\n",
    "pkg/weak.py": "def spend():\n    # one retry\n    return 2\n",
    "pkg/other.py": "def unrelated():\n    return 3\n",
}


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return committed_repo(tmp_path / "repo", FILES)


def test_a_modified_file_with_evidence_is_lifted_above_a_clean_one(repo: Path) -> None:
    assert result_paths(search(repo, "retry budget"))[:2] == ["pkg/strong.py", "pkg/weak.py"]
    (repo / "pkg/weak.py").write_text(FILES["pkg/weak.py"] + "# retry budget\n")

    lifted = search(repo, "retry budget", dirty=True)

    assert result_paths(lifted)[0] == "pkg/weak.py"
    assert lifted.results[0].dirty == "modified"
    assert lifted.results[1].dirty is None


def test_the_lift_multiplies_the_lexical_score_by_one_plus_dirty_bonus(repo: Path) -> None:
    (repo / "pkg/weak.py").write_text(FILES["pkg/weak.py"] + "# edited\n")
    before = {c.path: c.lexical_score for c in search(repo, "retry budget").results}

    after = {c.path: c.lexical_score for c in search(repo, "retry budget", dirty=True).results}

    assert after["pkg/weak.py"] == pytest.approx(before["pkg/weak.py"] * 1.5)
    assert after["pkg/strong.py"] == pytest.approx(before["pkg/strong.py"])


def test_a_changed_file_without_evidence_is_not_lifted_into_the_results(repo: Path) -> None:
    (repo / "pkg/other.py").write_text("def unrelated():\n    return 4\n")
    (repo / "pkg/new.py").write_text("print('nothing to do with it')\n")

    report = search(repo, "retry budget", dirty=True)

    assert "pkg/other.py" not in result_paths(report)
    assert "pkg/new.py" not in result_paths(report)


def test_staged_and_untracked_files_count_as_uncommitted(repo: Path) -> None:
    (repo / "pkg/weak.py").write_text(FILES["pkg/weak.py"] + "# retry budget\n")
    git(repo, "add", "pkg/weak.py")
    (repo / "pkg/fresh.py").write_text("# retry\n")

    report = search(repo, "retry budget", dirty=True)

    kinds = {c.path: c.dirty for c in report.results}
    assert kinds["pkg/weak.py"] == "staged"
    assert kinds["pkg/fresh.py"] == "untracked"


def test_a_deleted_and_a_binary_dirty_file_change_nothing_and_cost_nothing(repo: Path) -> None:
    clean = result_paths(search(repo, "retry budget"))
    (repo / "pkg/other.py").unlink()
    (repo / "pkg/blob.bin").write_bytes(b"retry budget\0\x01\x02" * 100)

    report = search(repo, "retry budget", dirty=True)

    assert result_paths(report) == [p for p in clean if p != "pkg/other.py"]
    assert any("1 deleted" in n and "1 untracked" in n for n in report.notes)


def test_outside_a_git_repository_dirty_warns_once_and_changes_nothing(tmp_path: Path) -> None:
    plain = write_tree(tmp_path / "plain", FILES)
    env = {"GIT_CEILING_DIRECTORIES": str(tmp_path)}

    without = cli("--fast", "--format", "json", "-q", "retry budget", cwd=plain, env=env)
    with_flag = cli("--fast", "--dirty", "--format", "json", "-q", "retry budget", cwd=plain,
                    env=env)

    assert with_flag.paths() == without.paths()
    assert with_flag.stderr.count("--dirty changes nothing") == 1
    assert "not in a git repository" in with_flag.stderr
    said = [line.removeprefix("slm-rerank: ") for line in with_flag.stderr.splitlines()]
    # which folder is searched and why (no repository above it), then --dirty's own warning
    assert with_flag.json()["warnings"] == said[:2]
    assert said[0].startswith("no git repository found at or above")


def test_verbose_output_names_the_bonus_and_the_lifted_files(repo: Path) -> None:
    (repo / "pkg/weak.py").write_text(FILES["pkg/weak.py"] + "# edited\n")

    run = cli("--fast", "--dirty", "-v", "-q", "retry budget", cwd=repo)

    assert run.returncode == 0, run.stderr
    assert "1 modified; 1 with evidence scored x1.5 (dirty_bonus = 0.5): pkg/weak.py" \
        in run.stderr


def test_dirty_bonus_comes_from_the_repository_config(repo: Path) -> None:
    (repo / ".slm-rerank.toml").write_text("dirty_bonus = 3.0\n")
    (repo / "pkg/weak.py").write_text(FILES["pkg/weak.py"] + "# edited\n")

    run = cli("--fast", "--dirty", "-v", "-q", "retry budget", cwd=repo)

    assert "scored x4 (dirty_bonus = 3)" in run.stderr


def test_a_search_root_below_the_repository_top_matches_its_own_paths(repo: Path) -> None:
    (repo / "pkg/weak.py").write_text(FILES["pkg/weak.py"] + "# retry budget\n")

    report = search(repo / "pkg", "retry budget", dirty=True)

    assert result_paths(report)[0] == "weak.py"
    assert report.results[0].dirty == "modified"


def test_parse_status_reads_kinds_and_cuts_the_prefix() -> None:
    output = (b" M sub/a.py\0M  sub/b.py\0MM sub/c.py\0?? sub/new dir/d.py\0"
              b" D sub/gone.py\0A  elsewhere.py\0")

    kinds = parse_status(output, "sub/")

    assert kinds == {"a.py": "modified", "b.py": "staged", "c.py": "modified",
                     "new dir/d.py": "untracked", "gone.py": "deleted"}


def test_parse_status_keeps_undecodable_names_as_the_file_system_does() -> None:
    kinds = parse_status(b"?? caf\xe9.py\0", "")

    assert list(kinds) == ["caf\udce9.py"]


def test_find_dirty_outside_git_gives_a_reason(tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path))
    (tmp_path / "plain").mkdir()

    found = find_dirty(tmp_path / "plain")

    assert found.kinds == {}
    assert found.reason is not None and "not in a git repository" in found.reason


@pytest.mark.parametrize("value", ["1e308", "101"])
def test_a_dirty_bonus_too_big_to_be_meaningful_is_refused(repo: Path, value: str) -> None:
    (repo / ".slm-rerank.toml").write_text(f"dirty_bonus = {value}\n")

    run = cli("--fast", "--dirty", "-q", "retry budget", cwd=repo)

    # a repository's file: the value is left out with a warning, the search runs
    assert run.returncode == 0, run.stderr
    assert "key 'dirty_bonus' must be at most 100" in run.stderr and "0.5 applies" in run.stderr


# --- what finding dirty files must not do, and submodules -------------------------------


CLEAN = {"pkg/a.py": "def alpha():\n    return 1\n", "pkg/b.py": "def beta():\n    return 2\n"}


def test_finding_dirty_files_does_not_write_the_repository_index(tmp_path):
    # `git status` refreshes and rewrites .git/index under index.lock when file times moved:
    # run beside the user's own `git commit`, that lock makes the commit fail.
    repo = committed_repo(tmp_path / "repo", CLEAN)
    for name in CLEAN:
        later = (repo / name).stat().st_mtime + 100
        os.utime(repo / name, (later, later))
    index = repo / ".git" / "index"
    before = (index.read_bytes(), index.stat().st_mtime_ns)

    found = find_dirty(repo)

    assert found.reason is None and found.kinds == {}
    assert (index.read_bytes(), index.stat().st_mtime_ns) == before


def test_git_dir_in_the_environment_does_not_point_dirty_at_another_repository(
        tmp_path, monkeypatch):
    repo = committed_repo(tmp_path / "repo", CLEAN)
    other = committed_repo(tmp_path / "other", {"unrelated.txt": "hi\n"})
    (repo / "pkg/b.py").write_text(CLEAN["pkg/b.py"] + "# edited\n")
    monkeypatch.setenv("GIT_DIR", str(other / ".git"))
    monkeypatch.setenv("GIT_INDEX_FILE", str(other / ".git" / "index"))

    found = find_dirty(repo)

    assert found.reason is None
    assert found.kinds == {"pkg/b.py": "modified"}


def test_files_changed_inside_a_submodule_are_found_under_its_path(tmp_path):
    library = committed_repo(tmp_path / "library", CLEAN)
    repo = committed_repo(tmp_path / "repo", {"top.py": "def top():\n    return 0\n"})
    git(repo, "submodule", "add", "-q", str(library), "vendor/lib")
    git(repo, "commit", "-qm", "add the submodule")
    (repo / "vendor/lib/pkg/a.py").write_text(CLEAN["pkg/a.py"] + "# edited\n")
    (repo / "vendor/lib/pkg/new.py").write_text("def gamma():\n    return 3\n")

    found = find_dirty(repo)

    assert found.reason is None
    assert found.kinds == {"vendor/lib/pkg/a.py": "modified",
                           "vendor/lib/pkg/new.py": "untracked"}


def test_a_submodule_is_found_from_a_root_inside_the_superproject(tmp_path):
    library = committed_repo(tmp_path / "library", CLEAN)
    repo = committed_repo(tmp_path / "repo", {"top.py": "def top():\n    return 0\n"})
    git(repo, "submodule", "add", "-q", str(library), "vendor/lib")
    git(repo, "commit", "-qm", "add the submodule")
    (repo / "vendor/lib/pkg/b.py").write_text(CLEAN["pkg/b.py"] + "# edited\n")

    assert find_dirty(repo / "vendor").kinds == {"lib/pkg/b.py": "modified"}


def test_dirty_gives_git_one_deadline_in_total_not_one_per_submodule(tmp_path, monkeypatch):
    # Each submodule's configuration includes a FIFO nobody writes: git blocks reading it.
    # Given GIT_SECONDS per call, three of them took three times the deadline.
    import time

    from slm_rerank.context import dirty

    library = committed_repo(tmp_path / "library", CLEAN)
    repo = committed_repo(tmp_path / "repo", {"top.py": "def top():\n    return 0\n"})
    fifo = tmp_path / "config.fifo"
    os.mkfifo(fifo)
    for n in range(3):
        git(repo, "submodule", "add", "-q", str(library), f"vendor/lib{n}")
    git(repo, "commit", "-qm", "add the submodules")
    for n in range(3):
        git(repo / f"vendor/lib{n}", "config", "include.path", str(fifo))
    (repo / "top.py").write_text("def top():\n    return 1\n")
    monkeypatch.setattr(dirty, "GIT_SECONDS", 1.0)

    started = time.monotonic()
    found = find_dirty(repo)
    took = time.monotonic() - started

    assert took < 2.5  # one 1 s deadline and git's start-ups; 3 s and more without it
    assert found.kinds == {"top.py": "modified"}


def test_a_repository_git_cannot_read_is_named_with_gits_reason_not_outside_git(tmp_path):
    # a bad line in .git/config was reported as "not in a git repository"
    repo = committed_repo(tmp_path / "repo", CLEAN)
    with open(repo / ".git" / "config", "a", encoding="utf-8") as config:
        config.write("[core\n")

    found = find_dirty(repo)

    assert found.reason is not None and "bad config line" in found.reason
    assert find_dirty(tmp_path).reason == f"{tmp_path} is not in a git repository"
