"""Where HEAD is: kept while nothing git reads to say it changed, asked of git again after
any change (``lexical/git_head.py``)."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from git_history import History

from slm_rerank.lexical import git_head


@pytest.fixture(autouse=True)
def nothing_kept() -> Iterator[None]:
    git_head.forget()
    yield
    git_head.forget()


@pytest.fixture
def settled(monkeypatch: pytest.MonkeyPatch) -> None:
    """git's clock an hour ahead: every file it read looks old enough to stamp."""
    monkeypatch.setattr(git_head, "now_ns", lambda: time.time_ns() + 3600 * 10**9)


@pytest.fixture
def asked(monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """The git commands ``where`` ran."""
    runs: list[list[str]] = []
    real = git_head.git_output

    def counted(repo: Path, args: list[str], **kwargs: object) -> bytes:
        runs.append(list(args))
        return real(repo, args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(git_head, "git_output", counted)
    return runs


@pytest.fixture
def repo(tmp_path: Path) -> History:
    repo = History(tmp_path / "repo")
    repo.commit("one", {"a.py": "1", "sub/b.py": "2"})
    return repo


def where(root: Path) -> git_head.Where:
    found = git_head.where(root, "HEAD", 10.0)
    assert isinstance(found, git_head.Where)
    return found


def test_asked_again_with_nothing_changed_git_is_not_run(
        repo: History, settled: None, asked: list[list[str]]) -> None:
    first = where(repo.root / "sub")
    assert where(repo.root / "sub") == first
    assert len(asked) == 1
    assert first == git_head.Where(os.path.realpath(repo.root), "sub/",
                                   repo.git("rev-parse", "HEAD"))


def _in_place(repo: History) -> None:
    """The branch's ref written over with the previous commit: the same size, and its
    modification time put back, so only its change time tells."""
    ref = repo.root / ".git" / "refs" / "heads" / "main"
    st = ref.stat()
    previous = repo.git("rev-parse", "HEAD~1")
    ref.write_text(previous + "\n")
    os.utime(ref, ns=(st.st_atime_ns, st.st_mtime_ns))


CHANGES: dict[str, Callable[[History], None]] = {
    "a new commit": lambda repo: repo.commit("two", {"a.py": "3"}),
    "another branch checked out": lambda repo: (
        repo.git("branch", "other", "HEAD~1"), repo.git("checkout", "-q", "other")),
    "a detached HEAD": lambda repo: repo.git("checkout", "-q", "--detach", "HEAD~1"),
    "the refs packed, then the branch moved": lambda repo: (
        repo.git("pack-refs", "--all"), repo.git("update-ref", "refs/heads/main", "HEAD~1")),
    "the ref written in place": _in_place,
    "a repository made between the root and the top": lambda repo: History(
        repo.root / "sub").commit("inner", {"c.py": "4"}),
}


@pytest.mark.parametrize("change", list(CHANGES))
def test_each_change_is_asked_of_git_again(repo: History, settled: None, change: str) -> None:
    repo.commit("two", {"a.py": "2"})
    where(repo.root / "sub")
    CHANGES[change](repo)
    assert where(repo.root / "sub") == git_head.Where(
        os.path.realpath(repo.git("-C", "sub", "rev-parse", "--show-toplevel")),
        repo.git("-C", "sub", "rev-parse", "--show-prefix"),
        repo.git("-C", "sub", "rev-parse", "HEAD"))


def test_a_user_config_made_after_is_asked_of_git_again(
        repo: History, settled: None, asked: list[list[str]], tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    where(repo.root)
    where(repo.root)
    assert len(asked) == 1
    (home / ".gitconfig").write_text("[safe]\n\tdirectory = *\n")
    where(repo.root)
    assert len(asked) == 2


def test_another_git_environment_is_another_answer(
        repo: History, settled: None, asked: list[list[str]],
        monkeypatch: pytest.MonkeyPatch) -> None:
    where(repo.root)
    monkeypatch.setenv("GIT_DIR", str(repo.root / ".git"))
    where(repo.root)
    assert len(asked) == 2


def test_what_was_changed_just_before_git_ran_is_not_kept(
        repo: History, asked: list[list[str]]) -> None:
    where(repo.root)  # the commit was just made: its ref's times are too recent to trust
    where(repo.root)
    assert len(asked) == 2


@pytest.mark.parametrize("how", ["an include", "a worktree"])
def test_what_cannot_be_followed_is_asked_of_git_every_time(
        repo: History, settled: None, asked: list[list[str]], how: str,
        tmp_path: Path) -> None:
    root = repo.root
    if how == "an include":
        (tmp_path / "more").write_text("")
        repo.git("config", "include.path", str(tmp_path / "more"))
    else:
        root = tmp_path / "tree"
        repo.git("worktree", "add", "-q", str(root), "HEAD")
    first = where(root)
    assert where(root) == first
    assert len(asked) == 2


def _symbolic_ref_to_another_folder(repo: History) -> Callable[[], None]:
    """HEAD names a branch that names a ref in another folder (``git symbolic-ref``)."""
    repo.git("update-ref", "refs/other/x", "HEAD~1")
    repo.git("symbolic-ref", "refs/heads/alias", "refs/other/x")
    repo.git("symbolic-ref", "HEAD", "refs/heads/alias")
    return lambda: repo.git("update-ref", "refs/other/x", "main")


def _config_through_a_link(repo: History) -> Callable[[], None]:
    """The repository's config a link to a file elsewhere (``git-new-workdir``, a dotfile)."""
    config = repo.root / ".git" / "config"
    shared = repo.root.parent / "shared-config"
    shared.write_text(config.read_text())
    config.unlink()
    config.symlink_to(shared)

    def moved() -> None:
        with shared.open("a") as f:
            f.write(f"[core]\n\tworktree = {repo.root / 'sub'}\n")
    return moved


def _ref_through_a_link(repo: History) -> Callable[[], None]:
    ref = repo.root / ".git" / "refs" / "heads" / "main"
    target = repo.root.parent / "main-ref"
    target.write_text(ref.read_text())
    ref.unlink()
    ref.symlink_to(target)

    def moved() -> None:
        new = repo.root.parent / "new-ref"
        new.write_text(repo.git("rev-parse", "HEAD~1") + "\n")
        os.replace(new, target)
    return moved


@pytest.mark.parametrize("made", [_symbolic_ref_to_another_folder, _config_through_a_link,
                                  _ref_through_a_link])
def test_what_a_link_or_a_symbolic_ref_leads_to_is_followed(
        repo: History, settled: None, made: Callable[[History], Callable[[], None]]) -> None:
    repo.commit("two", {"a.py": "2"})
    change = made(repo)
    where(repo.root / "sub")
    change()
    truth = git_head.Where(
        os.path.realpath(repo.git("-C", "sub", "rev-parse", "--show-toplevel")),
        repo.git("-C", "sub", "rev-parse", "--show-prefix"),
        repo.git("-C", "sub", "rev-parse", "HEAD"))
    assert where(repo.root / "sub") == truth


def test_outside_a_repository_git_is_asked_once_and_again_once_one_is_made(
        tmp_path: Path, settled: None, asked: list[list[str]]) -> None:
    docs = tmp_path / "docs" / "notes"
    docs.mkdir(parents=True)
    outside = f"{docs} is not in a git repository"
    assert git_head.where(docs, "HEAD", 10.0) == outside
    assert git_head.where(docs, "HEAD", 10.0) == outside
    assert len(asked) == 1
    repo = History(tmp_path / "docs")  # a repository made above it
    repo.commit("one", {"notes/a.md": "a"})
    assert where(docs) == git_head.Where(os.path.realpath(repo.root), "notes/",
                                         repo.git("rev-parse", "HEAD"))


@pytest.mark.parametrize("swapped", ["config", "refs/heads/main"])
def test_a_fifo_swapped_into_the_git_folder_is_never_waited_on(
        repo: History, settled: None, swapped: str) -> None:
    import threading

    answer = where(repo.root)
    git_head.forget()
    path = repo.root / ".git" / swapped
    path.unlink()
    os.mkfifo(path)  # as if put there after git answered: a read would wait for a writer
    done = threading.Event()

    def keep() -> None:
        git_head._keep(repo.root, "HEAD", answer, time.time_ns() + 3600 * 10**9)
        done.set()

    threading.Thread(target=keep, daemon=True).start()
    assert done.wait(10), "keeping the answer waited on a FIFO"
    assert git_head._KEPT == {}  # what cannot be read is not followed
