"""A repository's git configuration starts no process, at any git call site.

Each test plants a real command (a script that records it ran) where a repository's
``.git/config``, ``.gitattributes`` or hooks folder names it, shows that plain git runs it
(so the plant is live), then runs the tool's own call site and asserts the record never
appears and the tool's answer is still right.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
from git_history import GIT_ENV, History, signing_history
from oracle_judge import answer, words
from search_fixtures import cli, isolate
from slm_rerank_review.diff import changed_lines

from slm_rerank.calibration.mining import mine
from slm_rerank.calibration.trees import BadTree, commit_tree
from slm_rerank.context.dirty import find_dirty


class Plant:
    """Commands that record each run in ``marks/<name>``, and the records."""

    def __init__(self, tmp_path: Path) -> None:
        self.folder = tmp_path / "plants"
        self.marks = tmp_path / "marks"
        self.folder.mkdir()
        self.marks.mkdir()

    def command(self, name: str, then: str = "cat") -> str:
        """A script that records it ran, then ``then`` (``cat``: a filter passing through)."""
        script = self.folder / name
        script.write_text(f"#!/bin/sh\necho ran >> '{self.marks / name}'\n{then}\n")
        script.chmod(0o755)
        return str(script)

    def ran(self) -> list[str]:
        return sorted(p.name for p in self.marks.iterdir())

    def clear(self) -> None:
        for mark in self.marks.iterdir():
            mark.unlink()


def plain_git(root: Path, *args: str) -> None:
    """git as a user would run it, the repository's configuration in force."""
    subprocess.run(["git", "-C", str(root), *args], capture_output=True,
                   env={**os.environ, **GIT_ENV}, check=False)


def bump(path: Path) -> None:
    """Move a file's times on, so git must read it again (and filter it) to compare."""
    later = path.stat().st_mtime + 100
    os.utime(path, (later, later))


@pytest.fixture
def plant(tmp_path: Path) -> Plant:
    return Plant(tmp_path)


def assert_plant_is_live(plant: Plant, root: Path, *args: str) -> None:
    plain_git(root, *args)
    assert plant.ran(), f"the planted command did not run under plain `git {' '.join(args)}`"
    plant.clear()


# --- one repository with one planted command per class ----------------------------------
#: class -> how the repository names the planted command
Planting = Callable[[History, Plant], None]


def clean_filter(repo: History, plant: Plant) -> None:
    repo.git("config", "filter.evil.clean", plant.command("clean"))


def process_filter(repo: History, plant: Plant) -> None:
    repo.git("config", "filter.evil.process", plant.command("process", "exit 1"))
    repo.git("config", "filter.evil.required", "true")


def smudge_filter(repo: History, plant: Plant) -> None:
    repo.git("config", "filter.evil.smudge", plant.command("smudge"))


def fsmonitor(repo: History, plant: Plant) -> None:
    repo.git("config", "core.fsmonitor", plant.command("fsmonitor", "true"))


def textconv(repo: History, plant: Plant) -> None:
    repo.git("config", "diff.evil.textconv", plant.command("textconv", 'cat "$1"'))


def external_diff(repo: History, plant: Plant) -> None:
    repo.git("config", "diff.external", plant.command("external-diff", "true"))


def index_hook(repo: History, plant: Plant) -> None:
    hook = Path(plant.command("post-index-change", "true"))
    (repo.root / ".git" / "hooks" / "post-index-change").symlink_to(hook)


def signature(repo: History, plant: Plant) -> None:
    repo.git("config", "log.showSignature", "true")
    repo.git("config", "gpg.program", plant.command("gpg", "exit 1"))


def driver_name_with_equals(repo: History, plant: Plant) -> None:
    # `-c filter.a=b.clean=` would set filter.a; the runner must still turn this one off
    (repo.root / ".gitattributes").write_text("*.t filter=a=b\n")
    repo.git("add", ".gitattributes")
    repo.git("commit", "-qm", "attributes")
    repo.git("config", "filter.a=b.clean", plant.command("clean-a=b"))


# --- review --diff: git diff and git ls-files ---------------------------------------------
@pytest.mark.parametrize("planting", [clean_filter, process_filter, fsmonitor, textconv,
                                      external_diff, index_hook, driver_name_with_equals])
def test_review_diff_runs_nothing_the_repository_names(tmp_path: Path, plant: Plant,
                                                       planting: Planting) -> None:
    repo = History(tmp_path / "repo")
    repo.commit("first", {".gitattributes": "*.t filter=evil diff=evil\n",
                          "a.t": "hello\nworld\n", "b.t": "same\n"})
    planting(repo, plant)
    (repo.root / "a.t").write_text("hello\nwormd\n")  # the same size: git must hash it
    (repo.root / "new.t").write_text("x\n")
    bump(repo.root / "b.t")  # unchanged, but its index entry is stale
    assert_plant_is_live(plant, repo.root, "diff")
    bump(repo.root / "a.t")
    bump(repo.root / "b.t")

    changes = changed_lines(repo.root, None)

    assert plant.ran() == []
    assert changes.lines == {"a.t": {2}} and changes.new_files == {"new.t"}


# --- --dirty: git status ------------------------------------------------------------------
@pytest.mark.parametrize("planting", [clean_filter, process_filter, fsmonitor, index_hook])
def test_dirty_runs_nothing_the_repository_names(tmp_path: Path, plant: Plant,
                                                 planting: Planting) -> None:
    repo = History(tmp_path / "repo")
    repo.commit("first", {".gitattributes": "*.t filter=evil\n", "a.t": "hello\n",
                          "b.t": "same\n"})
    planting(repo, plant)
    (repo.root / "a.t").write_text("hellp\n")
    bump(repo.root / "b.t")
    assert_plant_is_live(plant, repo.root, "status")
    bump(repo.root / "a.t")
    bump(repo.root / "b.t")

    found = find_dirty(repo.root)

    assert plant.ran() == []
    assert found.reason is None and found.kinds == {"a.t": "modified"}


def test_the_dirty_flag_runs_no_fsmonitor_and_lifts_the_changed_file(
        tmp_path: Path, plant: Plant, monkeypatch: pytest.MonkeyPatch) -> None:
    isolate(monkeypatch, tmp_path)
    repo = History(tmp_path / "repo")
    repo.commit("first", {"src/frobnicate.py": "def frobnicate():\n    return 'zorblax'\n",
                          "src/other.py": "def other():\n    return 'zorblax'\n"})
    fsmonitor(repo, plant)
    (repo.root / "src/other.py").write_text("def other():\n    return 'zorblax!'\n")
    assert_plant_is_live(plant, repo.root, "status")

    run = cli("-q", "zorblax", "--fast", "--dirty", "--format", "json", cwd=repo.root)

    assert plant.ran() == []
    assert run.returncode == 0, run.stderr
    dirty = {r["path"]: r["dirty"] for r in json.loads(run.stdout)["results"]}
    assert dirty == {"src/other.py": "modified", "src/frobnicate.py": None}


def with_hostile_submodule(tmp_path: Path, plant: Plant) -> History:
    """A repository whose submodule ``vendor/lib`` configures a clean filter of its own (a
    driver name the superproject's configuration does not hold), with a changed file."""
    library = History(tmp_path / "library")
    library.commit("first", {".gitattributes": "*.t filter=inner\n", "a.t": "hello\n"})
    repo = History(tmp_path / "repo")
    repo.commit("first", {"top.t": "top\n"})
    repo.git("-c", "protocol.file.allow=always", "submodule", "add", "-q",
             str(library.root), "vendor/lib")
    repo.git("commit", "-qm", "the submodule")
    inner = repo.root / "vendor/lib"
    plain_git(inner, "config", "filter.inner.clean", plant.command("inner-clean"))
    (inner / "a.t").write_text("hellp\n")
    return repo


def test_review_diff_runs_no_filter_a_submodule_configures(tmp_path: Path,
                                                          plant: Plant) -> None:
    repo = with_hostile_submodule(tmp_path, plant)
    (repo.root / "top.t").write_text("top\nmore\n")
    assert_plant_is_live(plant, repo.root, "diff")
    bump(repo.root / "vendor/lib/a.t")

    changes = changed_lines(repo.root, None)

    assert plant.ran() == []
    assert changes.lines == {"top.t": {2}}


def test_dirty_runs_no_filter_a_submodule_configures_and_finds_its_changes(
        tmp_path: Path, plant: Plant) -> None:
    repo = with_hostile_submodule(tmp_path, plant)
    assert_plant_is_live(plant, repo.root, "status")
    bump(repo.root / "vendor/lib/a.t")

    found = find_dirty(repo.root)

    assert plant.ran() == []
    assert found.reason is None and found.kinds == {"vendor/lib/a.t": "modified"}


# --- calibrate: git log, git diff-tree, git archive ---------------------------------------
def signed_history(tmp_path: Path, extra: dict[str, str]) -> History:
    """A setup commit (with ``extra`` files) and three fixes, each a case; all signed."""
    repo = signing_history(tmp_path)
    chosen = words(3)
    files = dict(extra)
    for word in chosen:
        files[f"src/{word}_notes.py"] = f"def {word}():\n    pass\n# {word} zorblax widget\n"
        files[answer(word)] = "def run():\n    return 'zorblax'\n"
    repo.commit("lay out the modules of the widget", files)
    for word in chosen:
        repo.commit(f"{word} zorblax widget must frobnicate",
                    {answer(word): "def run():\n    return 'zorblax frobnicated'\n"})
    assert "gpgsig" in repo.git("cat-file", "commit", "HEAD")
    return repo


CALIBRATE_PLANTS: dict[str, tuple[dict[str, str], Planting, tuple[str, ...]]] = {
    # name: (files of the setup commit, planting, the plain git command that runs it)
    "smudge": ({".gitattributes": "*.py filter=evil\n"}, smudge_filter,
               ("archive", "--format=tar", "-o", os.devnull, "HEAD")),
    "fsmonitor": ({}, fsmonitor, ("diff-tree", "-r", "HEAD~1", "HEAD")),
    "signature in log": ({}, signature, ("log", "-n1", "--format=%H")),
    # (git 2.39 does not check a signature for an export-subst file's %G?: no test can
    # show that the runner's empty gpg programs keep git archive from running one)
}


@pytest.mark.parametrize("name", list(CALIBRATE_PLANTS))
def test_calibrate_runs_nothing_the_repository_names(tmp_path: Path, plant: Plant,
                                                     monkeypatch: pytest.MonkeyPatch,
                                                     name: str) -> None:
    cache = isolate(monkeypatch, tmp_path)
    files, planting, plain = CALIBRATE_PLANTS[name]
    repo = signed_history(tmp_path, files)
    planting(repo, plant)
    assert_plant_is_live(plant, repo.root, *plain)

    run = cli("calibrate", "--fast", "--format", "json", cwd=repo.root, timeout=120)

    assert plant.ran() == []
    assert run.json()["cases"] == 3, run.stderr
    # and the trees it searched hold the files as committed (no filter applied)
    case = mine(repo.root, 10).cases[0]
    with commit_tree(repo.root, case.tree, cache) as tree:
        assert (tree / case.gold_files[0]).read_text() == "def run():\n    return 'zorblax'\n"
    assert plant.ran() == []


def test_calibrate_fetches_nothing_for_a_partial_clones_missing_object(
        tmp_path: Path, plant: Plant) -> None:
    # a partial clone fetches a missing object from its promisor remote on demand: over
    # ssh, with the repository's core.sshCommand
    repo = History(tmp_path / "repo")
    commit = repo.commit("first", {"a.txt": "hello\n"})
    blob = repo.git("rev-parse", "HEAD:a.txt")
    (repo.root / ".git" / "objects" / blob[:2] / blob[2:]).unlink()
    for key, value in [("core.repositoryformatversion", "1"),
                       ("extensions.partialClone", "origin"),
                       ("remote.origin.promisor", "true"),
                       ("remote.origin.url", "ssh://example.invalid/x"),
                       ("core.sshCommand", plant.command("ssh", "exit 1"))]:
        repo.git("config", key, value)
    assert_plant_is_live(plant, repo.root, "archive", "--format=tar", "-o", os.devnull,
                         "HEAD")

    # the tree cannot be laid out: calibrate leaves that one case out (BadTree)
    with pytest.raises(BadTree, match=r"git archive --format=tar \w+ in .* failed"):
        with commit_tree(repo.root, commit, tmp_path / "cache"):
            pass

    assert plant.ran() == []


# --- the git candidate source: git rev-parse, ls-files, grep --------------------------------
def test_the_git_source_a_repository_chooses_runs_no_fsmonitor(
        tmp_path: Path, plant: Plant, monkeypatch: pytest.MonkeyPatch) -> None:
    # (git ls-files --cached --others and git grep read no file through a filter)
    isolate(monkeypatch, tmp_path)
    repo = History(tmp_path / "repo")
    repo.commit("first", {".slm-rerank.toml": 'sources = ["git"]\n',
                          ".gitattributes": "*.py filter=evil\n",
                          "src/frobnicate.py": "def frobnicate():\n    return 'zorblax'\n",
                          "src/other.py": "def other():\n    return 1\n"})
    fsmonitor(repo, plant)
    assert_plant_is_live(plant, repo.root, "ls-files")
    bump(repo.root / "src/frobnicate.py")

    run = cli("-q", "zorblax frobnicate", "--fast", "--format", "json", "-v", cwd=repo.root)

    assert plant.ran() == []
    assert run.returncode == 0, run.stderr
    document = json.loads(run.stdout)
    assert document["results"][0]["path"] == "src/frobnicate.py"
    assert "source: git;" in run.stderr  # the repository's choice of source was followed
