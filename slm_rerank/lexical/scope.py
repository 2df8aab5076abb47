"""The user's path arguments, resolved against the working directory: the CLI/API edge.

The pipeline sees only what this module returns: an absolute root, regular files and
folders inside it, and globs relative to it. Whatever cannot be searched is refused here,
before any tool runs: a path argument with an error naming it, a name piped on stdin with
a note (``-v``) saying why it was skipped.
"""

from __future__ import annotations

import errno
import os
import re
import stat
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from slm_rerank.config import repo_root
from slm_rerank.errors import ScopeError
from slm_rerank.report import display_path

GLOB_CHARS = frozenset("*?[")
#: How much of a name an error message shows: an over-long path is cut, not printed whole.
SHOWN_CHARS = 120
#: How much of stdin's first line the "no existing file names" error shows.
STDIN_LINE_CHARS = 60
MISSING = "it does not exist"
BINARY_STDIN = ("stdin does not look like a list of file names (binary data); pipe file "
                "names one per line, or use --query-file -")

#: What a stat that does not follow to a regular file or folder found there.
_KINDS = [(stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISSOCK, "a socket"),
          (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device")]


@dataclass
class Scope:
    root: Path
    paths: list[Path] = field(default_factory=list)
    globs: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class RootChoice:
    """The folder a search with no root given runs in, and why that one."""

    path: Path
    #: "repository": the git repository holding the working directory; "working
    #: directory": no git repository at or above it, so the working directory itself
    source: str
    #: one line saying which folder is searched and why, when that is no repository (it may
    #: be a home or shared temporary folder full of other programs' files); else None
    reason: str | None = None


def choose_root(cwd: Path, root_name: str = "--root") -> RootChoice:
    """The repository holding ``cwd``, else ``cwd`` itself with a reason saying so;
    ``root_name`` is how the caller's user sets the root instead."""
    found = repo_root(cwd)
    if found is not None:
        return RootChoice(found, "repository")
    folder = cwd.resolve()
    shown_folder = display_path(str(folder))
    return RootChoice(folder, "working directory",
                      f"no git repository found at or above {shown_folder}; searching "
                      f"{shown_folder} (the working directory) and everything under it; "
                      f"pass {root_name} or run inside a repository to search one")


def resolve_root(root: Path | None, cwd: Path) -> Path:
    """``root`` as an absolute folder, or the repository holding ``cwd`` (else ``cwd``)."""
    if root is not None:
        folder = root.expanduser()
        if not folder.is_absolute():
            folder = cwd / folder
        try:
            is_dir = stat.S_ISDIR(os.stat(folder).st_mode)
        except (OSError, ValueError):
            is_dir = False
        if not is_dir:
            raise ScopeError(f"root {shown(str(folder))} does not exist or is not "
                             "a directory")
        return folder.resolve()
    return choose_root(cwd).path


def shown(name: str) -> str:
    """A name as an error message prints it: escaped, and cut when it is very long."""
    text = display_path(name)
    return text if len(text) <= SHOWN_CHARS else text[:SHOWN_CHARS] + "…"


class _Unusable(Exception):
    """A name that cannot be looked at; the message says why."""

    def __init__(self, why: str, may_exist: bool) -> None:
        super().__init__(why)
        #: False when no file can have that name (too long), True when one may be there
        self.may_exist = may_exist


def _kind(candidate: Path) -> int | None:
    """The mode of what ``candidate`` names (symlinks followed); None when nothing is there.

    Only stat is used: opening a FIFO or a device to look at it could block forever.
    """
    try:
        return os.stat(candidate).st_mode
    except FileNotFoundError:
        return None
    except NotADirectoryError:  # a/b where a is a file: nothing can be there
        return None
    except OSError as exc:
        if exc.errno == errno.ENAMETOOLONG:
            raise _Unusable("its name is longer than the system allows", False) from None
        raise _Unusable(f"it cannot be read ({exc.strerror or exc})", True) from None
    except ValueError:  # an embedded NUL byte: no file has such a name
        return None


def _not_searchable(mode: int) -> str | None:
    if stat.S_ISREG(mode) or stat.S_ISDIR(mode):
        return None
    what = next((name for test, name in _KINDS if test(mode)), "not a regular file")
    return f"it is {what}, not a regular file or folder"


def _outside(arg: str, root: Path, root_name: str) -> ScopeError:
    return ScopeError(f"path '{shown(arg)}' is outside the searched root "
                      f"{display_path(str(root))}; pass {root_name} to search another "
                      "repository")


def resolve_scope(root: Path, args: Sequence[str], piped: Sequence[str], cwd: Path,
                  root_name: str = "--root") -> Scope:
    """Turn path arguments and names piped on stdin into a Scope.

    A path argument must exist and be a regular file or a folder inside ``root``, or be a
    glob (a name with ``*?[`` that does not exist) inside ``root``; anything else is a
    ``ScopeError`` naming it. A piped name is taken literally (never as a glob), and one
    that is missing or cannot be searched is skipped with a note. ``root_name`` is how the
    caller's user sets the root (the CLI's ``--root``), for the error a path outside it gets.
    """
    scope = Scope(root)
    if any("\0" in name for name in piped):
        raise ScopeError(BINARY_STDIN)
    for arg in args:
        if "\0" in arg:
            raise ScopeError(f"path '{shown(arg)}' holds a NUL byte; no file has such a name")
        _add_argument(scope, arg, cwd, root_name)
    piped_found = False
    folders: dict[str, str] = {}
    for name in dict.fromkeys(piped):  # a name piped twice is looked up (and noted) once
        piped_found = _add_piped(scope, name, cwd, root_name, folders) or piped_found
    # Every argument was added or refused above, so only piped names can leave nothing.
    if piped and not scope.paths and not scope.globs:
        if not piped_found:
            first = piped[0]
            cut = first if len(first) <= STDIN_LINE_CHARS else first[:STDIN_LINE_CHARS] + "…"
            raise ScopeError(
                f"stdin held no existing file names (first line: '{display_path(cut)}'); "
                "to search the whole tree, run without a pipe on stdin "
                "(add `< /dev/null`), or pass the query with --query-file -")
        why = next(n for n in scope.notes if not n.endswith(MISSING))
        raise ScopeError(f"none of the files named on stdin can be searched ({why})")
    # once each: a source lists a file once per path naming it (`rg --files src src`), and
    # a file listed twice counted twice in every score (`src src` doubled the files in
    # scope and each term's count)
    scope.paths = list(dict.fromkeys(scope.paths))
    return scope


def _absolute(name: str, cwd: Path) -> Path:
    candidate = Path(name).expanduser()
    return candidate if candidate.is_absolute() else cwd / candidate


def _inside(resolved: Path, root: Path) -> bool:
    """Whether ``resolved`` is ``root`` or under it; both are resolved, so a prefix of whole
    names is the test (a string's, not ``Path.parents``': this runs once per piped name)."""
    path, top = str(resolved), str(root)
    return path == top or path.startswith(top if top.endswith(os.sep) else top + os.sep)


def _add_argument(scope: Scope, arg: str, cwd: Path, root_name: str) -> None:
    candidate = _absolute(arg, cwd)
    try:
        mode = _kind(candidate)
    except _Unusable as exc:
        raise ScopeError(f"path '{shown(arg)}' cannot be searched: {exc}") from None
    invalid = glob_problem(arg) if mode is None and GLOB_CHARS & set(arg) else None
    if mode is None and invalid:
        # Not a path, and no tool could read it as a glob: what the user meant is a path,
        # and the clear error is that it is missing, not the source's glob parse error.
        raise ScopeError(f"path '{shown(arg)}' does not exist (nor is it a glob: {invalid})")
    if mode is None and GLOB_CHARS & set(arg):
        # a glob is written relative to where the user stands, like any other path
        glob = os.path.relpath(os.path.abspath(cwd / arg), scope.root)
        if glob == ".." or glob.startswith(".." + os.sep):
            raise _outside(arg, scope.root, root_name)
        scope.globs.append(glob)
        return
    if mode is None:
        raise ScopeError(f"path '{shown(arg)}' does not exist")
    problem = _not_searchable(mode)
    if problem:
        raise ScopeError(f"path '{shown(arg)}' cannot be searched: {problem}; "
                         "pass regular files or folders")
    resolved = candidate.resolve()
    if not _inside(resolved, scope.root):
        raise _outside(arg, scope.root, root_name)
    scope.paths.append(resolved)


def _resolved(candidate: Path, folders: dict[str, str]) -> Path:
    """``candidate.resolve()`` for a name that exists, each folder resolved once: a name
    that is not itself a symlink resolves to its folder's real path and its own name, so
    ``git ls-files | slm-rerank`` resolves each folder of the tree once, not once per file."""
    head, base = os.path.split(str(candidate))
    if base in ("", ".", "..") or os.path.islink(candidate):
        return candidate.resolve()
    real = folders.get(head)
    if real is None:
        real = folders[head] = os.path.realpath(head)
    return Path(os.path.join(real, base))


def _add_piped(scope: Scope, name: str, cwd: Path, root_name: str,
               folders: dict[str, str]) -> bool:
    """Add one piped name; True when it named something that exists."""
    candidate = _absolute(name, cwd)
    try:
        mode = _kind(candidate)
    except _Unusable as exc:
        scope.notes.append(f"skipped piped path '{shown(name)}': {exc}")
        return exc.may_exist
    if mode is None:
        scope.notes.append(f"skipped piped path '{shown(name)}': {MISSING}")
        return False
    problem = _not_searchable(mode)
    if problem:
        scope.notes.append(f"skipped piped path '{shown(name)}': {problem}")
        return True
    resolved = _resolved(candidate, folders)
    if not _inside(resolved, scope.root):
        raise _outside(name, scope.root, root_name)
    scope.paths.append(resolved)
    return True


def glob_problem(glob: str) -> str | None:
    """Why ``glob`` is not a glob the sources accept (rg refuses these outright), or None.

    A class is ``[`` then an optional ``!`` or ``^``, at least one character (a ``]`` there is
    literal), then ``]``; its ranges must run upwards. A trailing ``\\`` escapes nothing.
    """
    i = 0
    while i < len(glob):
        char = glob[i]
        if char == "\\":
            if i + 1 == len(glob):
                return "it ends in a '\\' that escapes nothing"
            i += 2
            continue
        if char == "[":
            start = i + 1
            if start < len(glob) and glob[start] in "!^":
                start += 1
            end = glob.find("]", start + 1)
            if end < 0:
                return "its '[' has no closing ']'"
            body = glob[start:end]
            for k in range(1, len(body) - 1):
                if body[k] == "-" and body[k - 1] > body[k + 1]:
                    return f"its range '{body[k - 1]}-{body[k + 1]}' runs backwards"
            i = end + 1
            continue
        i += 1
    return None


def glob_regex(glob: str) -> re.Pattern[str]:
    """A regex for the POSIX paths (relative to the root) that ``glob`` may select.

    It errs towards matching: the sources read globs gitignore-style (rg) or as pathspecs
    (git), and a glob reported as matching nothing must really match nothing. A glob
    without a slash matches any path component; one with a slash matches from the root.
    A match of a leading folder counts, since a folder selects the files inside it.
    """
    pattern = glob.replace(os.sep, "/")
    out, i = [], 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif pattern[i] == "*":
            out.append("[^/]*")
            i += 1
        elif pattern[i] == "?":
            out.append("[^/]")
            i += 1
        elif pattern[i] == "[" and "]" in pattern[i + 2:]:
            end = pattern.index("]", i + 2)
            body = pattern[i + 1:end]
            body = "^" + body[1:] if body.startswith("!") else body
            out.append("[" + body.replace("\\", "\\\\") + "]")
            i = end + 1
        else:
            out.append(re.escape(pattern[i]))
            i += 1
    body = "".join(out)
    anchor = "" if "/" in pattern.strip("/") else "(?:.*/)?"
    try:
        return re.compile(f"{anchor}{body}(?:/.*)?", re.DOTALL)
    except re.error:  # a class the source will reject itself, with its own message
        return re.compile(".*", re.DOTALL)


def globs_matching_nothing(globs: Sequence[str], files: Sequence[str]) -> list[str]:
    """The globs that select none of ``files`` (POSIX paths relative to the root)."""
    return [g for g in globs if not any(glob_regex(g).fullmatch(f) for f in files)]
