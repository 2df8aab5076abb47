"""Path arguments and piped file names: what cannot be searched is refused at the edge.

Arguments that cannot be searched are errors naming them; piped names are skipped with a
note. Nothing here may open a FIFO or a device: that is what used to hang a search.
"""

from __future__ import annotations

import errno
import json
import os
from pathlib import Path

import pytest
from search_fixtures import cli, make_repo

import slm_rerank
from slm_rerank.errors import SearchError
from slm_rerank.lexical.scope import BINARY_STDIN, Scope, glob_regex, resolve_scope

FILES = {"src/retry.py": "def retry():\n    return 'retry'\n", "README.md": "retry\n"}


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return make_repo(tmp_path / "repo", FILES).resolve()


def scope_of(root: Path, args: list[str] = (), piped: list[str] = ()) -> Scope:
    return resolve_scope(root, list(args), list(piped), root)


# --- FIFOs, sockets and devices ------------------------------------------------------------


def test_a_fifo_argument_is_an_error_naming_it(root: Path) -> None:
    os.mkfifo(root / "pipe.py")

    with pytest.raises(SearchError, match=r"'pipe.py' cannot be searched: it is a FIFO"):
        scope_of(root, ["pipe.py"])


def test_a_device_argument_is_an_error_naming_it(root: Path) -> None:
    (root / "zero.py").symlink_to("/dev/zero")

    with pytest.raises(SearchError, match=r"'zero.py' cannot be searched: it is a character "
                                          r"device"):
        scope_of(root, ["zero.py"])


def test_a_fifo_named_on_stdin_is_skipped_with_a_note(root: Path) -> None:
    os.mkfifo(root / "pipe.py")

    scope = scope_of(root, piped=["pipe.py", "src/retry.py"])

    assert scope.paths == [root / "src/retry.py"]
    assert scope.notes == ["skipped piped path 'pipe.py': it is a FIFO (named pipe), not a "
                           "regular file or folder"]


def test_a_device_named_on_stdin_is_skipped_with_a_note(root: Path) -> None:
    (root / "zero.py").symlink_to("/dev/zero")

    scope = scope_of(root, piped=["zero.py", "README.md"])

    assert scope.paths == [root / "README.md"]
    assert "skipped piped path 'zero.py': it is a character device" in scope.notes[0]


def test_stdin_naming_only_fifos_is_an_error_saying_why(root: Path) -> None:
    os.mkfifo(root / "pipe.py")

    with pytest.raises(SearchError, match="none of the files named on stdin can be searched "
                                          r"\(skipped piped path 'pipe.py': it is a FIFO"):
        scope_of(root, piped=["pipe.py"])


def test_a_fifo_on_stdin_does_not_hang_the_cli(root: Path) -> None:
    os.mkfifo(root / "pipe.py")

    run = cli("-q", "retry", "--fast", "-v", cwd=root, stdin="pipe.py\nsrc/retry.py\n")

    assert run.returncode == 0, run.stderr
    assert "skipped piped path 'pipe.py': it is a FIFO" in run.stderr


# --- names the system refuses --------------------------------------------------------------


def test_an_argument_longer_than_the_system_allows_is_a_one_line_error(root: Path) -> None:
    with pytest.raises(SearchError, match=r"path 'a{20,}…' cannot be searched: its name is "
                                          "longer than the system allows"):
        scope_of(root, ["a" * 5000])


def test_a_piped_name_longer_than_the_system_allows_is_skipped_with_a_note(root: Path) -> None:
    scope = scope_of(root, piped=["b" * 5000, "README.md"])

    assert scope.paths == [root / "README.md"]
    assert "its name is longer than the system allows" in scope.notes[0]


def stat_denied_under(folder: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Make os.stat fail as it does for a name inside a folder one may not search.

    The tests run as root on some machines, where chmod cannot make a folder unsearchable.
    """
    real = os.stat

    def stat(path: os.PathLike[str] | str, *args: object, **kwargs: object) -> os.stat_result:
        if Path(os.fsdecode(path)).parent == folder:
            raise PermissionError(errno.EACCES, "Permission denied", str(path))
        return real(path, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "stat", stat)


def test_an_argument_in_an_unsearchable_folder_is_a_one_line_error(
        root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    stat_denied_under(root / "src", monkeypatch)

    with pytest.raises(SearchError, match=r"'src/retry.py' cannot be searched: it cannot be "
                                          r"read \(Permission denied\)"):
        scope_of(root, ["src/retry.py"])


def test_a_piped_name_in_an_unsearchable_folder_is_skipped_with_a_note(
        root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    stat_denied_under(root / "src", monkeypatch)

    scope = scope_of(root, piped=["src/retry.py", "README.md"])

    assert scope.paths == [root / "README.md"]
    assert scope.notes == ["skipped piped path 'src/retry.py': it cannot be read "
                           "(Permission denied)"]


def test_binary_data_on_stdin_is_not_taken_for_a_file_list(root: Path) -> None:
    with pytest.raises(SearchError) as caught:
        scope_of(root, piped=["\x7fELF\x00\x01", "README.md"])

    assert str(caught.value) == BINARY_STDIN


def test_binary_data_on_stdin_is_a_one_line_cli_error(root: Path) -> None:
    run = cli("-q", "retry", "--fast", cwd=root, stdin="src/retry.py\n\x00\x01\x02\n")

    assert run.returncode == 2
    assert "stdin does not look like a list of file names (binary data)" in run.stderr
    assert "Traceback" not in run.stderr


# --- prose on stdin ------------------------------------------------------------------------


def test_prose_on_stdin_says_stdin_held_no_file_names_and_how_to_search_without_it(
        root: Path) -> None:
    line = "where is the retry loop that keeps going when the server is down for a while"

    with pytest.raises(SearchError) as caught:
        scope_of(root, piped=[line, "and why does it never stop"])

    message = str(caught.value)
    assert message.startswith("stdin held no existing file names (first line: "
                              f"'{line[:60]}…')")
    assert "< /dev/null" in message
    assert "none of the given paths exist" not in message


def test_a_missing_argument_is_still_named_when_stdin_holds_prose(root: Path) -> None:
    with pytest.raises(SearchError, match="path 'nope.py' does not exist"):
        scope_of(root, ["nope.py"], piped=["where is the retry loop"])


def test_piped_names_are_never_globs(root: Path) -> None:
    # "?" ends many questions: a piped line is a file name, or nothing.
    with pytest.raises(SearchError, match="stdin held no existing file names"):
        scope_of(root, piped=["where is the retry?"])


# --- globs ---------------------------------------------------------------------------------


def test_a_glob_outside_the_root_is_the_same_error_as_a_path_outside_it(root: Path) -> None:
    (root.parent / "elsewhere.py").write_text("retry\n")

    with pytest.raises(SearchError, match=r"path '\.\./\*\.py' is outside the searched root"):
        scope_of(root, ["../*.py"])
    with pytest.raises(SearchError, match=r"path '\.\./elsewhere\.py' is outside the searched "
                                          "root"):
        scope_of(root, ["../elsewhere.py"])


@pytest.mark.parametrize("arg", ["nope[", "*[", "x[!]", "a[z-a]*", "nope*\\"])
def test_a_missing_path_that_is_no_valid_glob_is_said_not_to_exist(root: Path,
                                                                     arg: str) -> None:
    with pytest.raises(SearchError) as caught:
        scope_of(root, [arg])

    assert str(caught.value).startswith(f"path '{arg}' does not exist (nor is it a glob: ")


def test_the_cli_says_a_missing_path_with_a_bracket_does_not_exist_not_that_rg_failed(
        root: Path) -> None:
    run = cli("-q", "retry", "--fast", "nope[", cwd=root)

    assert run.returncode == 2
    assert "path 'nope[' does not exist" in run.stderr
    assert "ripgrep" not in run.stderr and "choose another source" not in run.stderr


def test_an_existing_file_whose_name_has_an_unclosed_bracket_is_searched(root: Path) -> None:
    (root / "odd[.py").write_text("retry\n")

    assert scope_of(root, ["odd[.py"]).paths == [root / "odd[.py"]


def test_a_valid_glob_with_a_class_is_still_a_glob(root: Path) -> None:
    assert scope_of(root, ["src/[!x]*.py"]).globs == ["src/[!x]*.py"]


def test_a_glob_that_matches_no_file_is_explained(root: Path) -> None:
    report = slm_rerank.search("retry", root=root, paths=[str(root / "*.rs")])

    assert "glob '*.rs' matches no file" in report.notes


def test_a_glob_that_matches_is_not_reported(root: Path) -> None:
    report = slm_rerank.search("retry", root=root, paths=[str(root / "*.py")])

    assert not [n for n in report.notes if n.startswith("glob")]
    assert [c.path for c in report.results] == ["src/retry.py"]


@pytest.mark.parametrize("glob, path", [
    ("*.py", "src/net/retry.py"), ("src/*.py", "src/retry.py"), ("src/**/x.py", "src/x.py"),
    ("src/**/x.py", "src/a/b/x.py"), ("[rs]*.md", "docs/readme.md"), ("src", "src/a.py"),
    ("doc?/*", "docs/a/b.md"),
])
def test_a_glob_regex_selects_what_the_sources_would(glob: str, path: str) -> None:
    assert glob_regex(glob).fullmatch(path)


@pytest.mark.parametrize("glob, path", [
    ("*.rs", "src/retry.py"), ("src/*.py", "lib/src.py"), ("[!r]*.py", "retry.py"),
])
def test_a_glob_regex_rejects_what_no_source_would_select(glob: str, path: str) -> None:
    assert not glob_regex(glob).fullmatch(path)


# --- explaining skipped files (-v) ---------------------------------------------------------


def test_explain_notes_a_binary_file_that_matches_and_a_file_too_big_to_search(
        root: Path) -> None:
    (root / "lib").mkdir()
    (root / "lib/cache.bin").write_bytes(b"retry = 1\n\0\0\0 compiled\n")
    (root / ".slm-rerank.toml").write_text("max_file_bytes = 1000\n")
    (root / "big.log").write_text("retry\n" * 200)

    quiet = slm_rerank.search("retry", root=root)
    explained = slm_rerank.search("retry", root=root, explain=True)

    assert "skipped lib/cache.bin: binary (NUL byte)" in explained.notes
    assert "skipped big.log: huge (1200 bytes > max_file_bytes 1000)" in explained.notes
    assert [c.path for c in explained.results] == [c.path for c in quiet.results]


def test_a_search_outside_git_says_which_folder_it_walks_and_why(tmp_path: Path) -> None:
    # a shared temporary folder: other programs' files, no repository above it
    folder = tmp_path / "shared-tmp"
    (folder / "someone-else").mkdir(parents=True)
    (folder / "someone-else" / "retry.py").write_text("def retry():\n    return 1\n")
    assert not any((p / ".git").exists() for p in (folder, *folder.parents))

    run = cli("-q", "retry", "--fast", "-k", "1", "--format", "json", cwd=folder)

    assert run.returncode == 0, run.stderr
    said = (f"no git repository found at or above {folder.resolve()}; searching "
            f"{folder.resolve()} (the working directory) and everything under it; pass "
            "--root or run inside a repository to search one")
    assert run.stderr == f"slm-rerank: {said}\n"
    doc = run.json()
    assert (doc["root"], doc["root_source"]) == (str(folder.resolve()), "working directory")
    assert doc["warnings"] == [said]


def test_a_search_in_a_repository_or_with_a_root_says_nothing_of_the_folder(
        root: Path, tmp_path: Path) -> None:
    (root / "src" / "deep").mkdir()

    inside = cli("-q", "retry", "--fast", "-k", "1", "--format", "json", cwd=root / "src/deep")
    given = cli("-q", "retry", "--fast", "-k", "1", "--format", "json", "--root", str(root),
                cwd=tmp_path)

    assert (inside.stderr, given.stderr) == ("", "")
    assert (inside.json()["root"], inside.json()["root_source"]) == (str(root), "repository")
    assert (given.json()["root_source"], given.json()["warnings"]) == ("given", [])


# --- a path given twice ----------------------------------------------------------------------


def test_a_path_given_twice_is_searched_once_and_scores_as_given_once(root: Path) -> None:
    # rg lists a file once per path naming it: `src src` counted each file, and each of its
    # terms, twice, and the scores moved twenty-fold
    (root / "src" / "other.py").write_text("def other():\n    return 'retry twice'\n")
    once = cli("-q", "retry", "--fast", "--format", "json", "src", cwd=root)
    twice = cli("-q", "retry", "--fast", "--format", "json", "src", "./src", "src/", cwd=root)

    assert once.returncode == twice.returncode == 0, twice.stderr
    assert ([(r["path"], r["score"]) for r in json.loads(twice.stdout)["results"]]
            == [(r["path"], r["score"]) for r in json.loads(once.stdout)["results"]])
    assert scope_of(root, ["src", "src/", str(root / "src")]).paths == [root / "src"]


# --- piped names through symlinks (each folder is resolved once) -----------------------------


def test_piped_names_resolve_through_symlinked_folders_and_files_as_paths_do(
        root: Path, tmp_path: Path) -> None:
    (root / "lib").symlink_to("src", target_is_directory=True)  # a folder link inside
    (root / "alias.py").symlink_to("src/retry.py")  # a file link inside
    (root / "src" / "up").symlink_to("..", target_is_directory=True)
    piped = ["lib/retry.py", "alias.py", "src/up/src/retry.py", "src/../README.md",
             "src/retry.py"]

    scope = scope_of(root, piped=piped)

    assert scope.paths == [root / "src" / "retry.py", root / "README.md"]
    assert scope.paths == list(dict.fromkeys(
        (root / name).resolve() for name in piped))  # what Path.resolve gives, name by name


@pytest.mark.parametrize("link", ["folder", "file"])
def test_a_piped_name_through_a_symlink_out_of_the_root_is_outside_it(
        root: Path, tmp_path: Path, link: str) -> None:
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "secret.py").write_text("def retry(): ...\n")
    if link == "folder":
        (root / "src" / "out").symlink_to(outside, target_is_directory=True)
        name = "src/out/secret.py"
    else:
        (root / "src" / "secret.py").symlink_to(outside / "secret.py")
        name = "src/secret.py"

    with pytest.raises(SearchError, match=r"is outside the searched root"):
        scope_of(root, piped=["src/retry.py", name])


def test_a_name_piped_twice_is_one_path_and_one_note(root: Path) -> None:
    scope = scope_of(root, piped=["src/retry.py", "gone.py", "src/retry.py", "gone.py"])

    assert scope.paths == [root / "src" / "retry.py"]
    assert scope.notes == ["skipped piped path 'gone.py': it does not exist"]
