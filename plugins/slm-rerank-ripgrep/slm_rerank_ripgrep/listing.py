"""rg's listing of an indexed tree (``rg --files``), kept while nothing that shapes it changed.

On sympy ``rg --files`` costs about half of one ``rg -c`` over the terms (its ignore rules
are most of that), and a query the word index answers needs nothing else from rg. So the
listing a query ran is kept beside the tree's index (``word_index._Tree.listing``) with a
stamp of everything rg's walk depends on, and the next query of the same tree, with the
same globs and the same rg, takes the kept listing when every stamp is unchanged.

**What is stamped** (device, inode, mode, size, modification and change times, as the word
index stamps a file; a path that is not there has a stamp of its own):

- the root and every folder under it that is not hidden, symbolic links not followed:
  adding, removing or renaming an entry (a file, a folder, an ignore file) changes its
  folder's times. Ignored folders are walked too: more stamps than rg needs, never fewer;
- the ignore files in them (``.gitignore``, ``.ignore``, ``.rgignore``, whose edits leave the
  folder's times alone) and ``.git/info/exclude``;
- in each folder above the root, the same files, there or not (not those folders' own
  times: ``/tmp``'s change all the time); ``.git`` anywhere only as there and a folder (its
  times change with every git command);
- the git configuration rg reads for the global excludes file (``~/.gitconfig``,
  ``$XDG_CONFIG_HOME/git/config``, ``~/.config/git/config``), the excludes file it names
  and the default ones (``.../git/ignore``); ``HOME`` and ``XDG_CONFIG_HOME`` are part of
  the key.

**Kept only when old**: as the index trusts a file, a listing is kept only when every stamp's
modification and change times are older than ``word_index.RACY_SECONDS`` before rg was
started, so a change in the same clock tick as a stamp, or while rg walked, always changes a
stamp. (While a folder was changed in the last minute, each query lists, as before, and
the folders are not walked again until that minute has passed: ``_Tree.walk_after``.)

**Not kept** (every query lists, as before): a listing rg printed errors for, one naming a
hidden path (an ignore file's ``!`` rule let rg into one: a hidden folder is not stamped),
a ``.git`` that is a file (its git folder is elsewhere), a git configuration with an
``[include`` (what it includes is not stamped), a listing of more files than an index
takes (``word_index.MAX_FILES``: what is kept stays bounded), and a tree of more than
``MAX_FOLDERS`` folders (then not walked again while that tree's index lives).
"""

from __future__ import annotations

import os
import re
import stat
import struct
from collections.abc import Sequence
from dataclasses import dataclass

#: folders walked and stamped at most; more, and the tree is listed by rg every query
MAX_FOLDERS = 4096
IGNORE_FILES = (".gitignore", ".ignore", ".rgignore")
_ABSENT = (0, 0, 0, -1, 0, 0)
_EXCLUDES = re.compile(rb"^\s*excludesfile\s*=\s*(.*?)\s*$", re.IGNORECASE | re.MULTILINE)

Stamp = tuple[int, int, int, int, int, int]
#: a stamp as a kept listing holds it: 44 bytes in one object, not a tuple of six ints (a
#: quarter of the memory: a tree of 2,400 folders kept 0.6 MiB of tuples)
_PACKED = struct.Struct("<QQIqqq")


def _stamp(path: str) -> Stamp:
    """The path's stamp; for a ``.git``, whether it is there and its type only (its times
    change with every git command); for a symbolic link (an ignore file may be one, which
    rg reads through), what it points to."""
    try:
        st = os.lstat(path)
        if stat.S_ISLNK(st.st_mode):
            st = os.stat(path)
    except OSError:
        return _ABSENT
    if os.path.basename(path) == ".git":
        return (0, 0, stat.S_IFMT(st.st_mode), 0, 0, 0)
    return (st.st_dev, st.st_ino, st.st_mode, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def _packed(stamp: Stamp) -> bytes:
    """``stamp`` in ``_PACKED``; one that does not fit is kept as ``b""``, which
    ``unchanged`` never takes as unchanged."""
    try:
        return _PACKED.pack(*stamp)
    except struct.error:
        return b""


@dataclass
class Listing:
    """One ``rg --files`` run: its files, the stamps it depends on (packed, ``kept``)."""

    key: tuple[str, ...]
    #: the listed paths: the word index's own strings where it holds the path, so the
    #: listing keeps no copy of them (``word_index._Tree.shared``)
    files: list[str]
    stamps: dict[str, bytes]
    #: when rg was started (the index's clock, ns)
    began: int

    @classmethod
    def kept(cls, key: tuple[str, ...], files: list[str], stamps: dict[str, Stamp],
             began: int) -> Listing:
        return cls(key, files, {path: _packed(was) for path, was in stamps.items()}, began)

    def output(self) -> bytes:
        """What rg printed: each path and a NUL. A listing is kept only for the whole tree
        and with no hidden path (``keepable``), so rg printed each as it is, with no
        ``./`` before it, and ``os.fsencode`` gives back its bytes."""
        return b"".join(os.fsencode(rel) + b"\0" for rel in self.files)


class Unfollowable(Exception):
    """What rg's listing depends on cannot be stamped (too many folders, a ``.git`` file,
    an ``[include``)."""


def key_of(rg: str, scope: Sequence[str]) -> tuple[str, ...]:
    """What the listing depends on besides the files: rg, its globs, the environment."""
    return (rg, _home(), os.environ.get("XDG_CONFIG_HOME", ""), *scope)


def _home() -> str:
    """The user's home folder as rg finds it (``$HOME``, else the password database)."""
    return os.path.expanduser("~")


def _config_paths() -> list[str]:
    home = _home()
    xdg = os.environ.get("XDG_CONFIG_HOME", "")
    paths = [os.path.join(home, ".gitconfig"), os.path.join(home, ".config", "git", "config"),
             os.path.join(home, ".config", "git", "ignore")]
    if xdg:
        paths += [os.path.join(xdg, "git", "config"), os.path.join(xdg, "git", "ignore")]
    return paths


def _global_stamps(stamps: dict[str, Stamp]) -> None:
    """Stamp the git configuration and the excludes files it names."""
    for path in _config_paths():
        stamps[path] = _stamp(path)
        if stamps[path] == _ABSENT or path.endswith("ignore"):
            continue
        try:
            with open(path, "rb") as f:
                text = f.read(1 << 20)
        except OSError as exc:
            raise Unfollowable(path) from exc
        if b"[include" in text.lower():
            raise Unfollowable(path)
        for match in _EXCLUDES.finditer(text):
            named = os.path.expanduser(os.fsdecode(match.group(1).strip(b"\"'")))
            stamps[named] = _stamp(named)


def _git_stamps(git: str, stamps: dict[str, Stamp]) -> None:
    """A ``.git`` folder's parts that hold ignore rules (``info/exclude``); a ``.git`` that
    is a file (a worktree's, a submodule's) names a git folder elsewhere."""
    stamps[git] = _stamp(git)
    if stamps[git] != _ABSENT and not stat.S_ISDIR(stamps[git][2]):
        raise Unfollowable(git)
    exclude = os.path.join(git, "info", "exclude")
    stamps[exclude] = _stamp(exclude)


def _folder_stamps(folder: str, stamps: dict[str, Stamp]) -> None:
    """A folder above the root: each ignore file it may hold, there or not (not the
    folder's own times: ``/tmp``'s change all the time)."""
    for name in IGNORE_FILES:
        path = os.path.join(folder, name)
        stamps[path] = _stamp(path)
    _git_stamps(os.path.join(folder, ".git"), stamps)


def shape(root: str) -> dict[str, Stamp] | None:
    """The stamps of everything rg's listing of ``root`` (a real path) depends on; None when
    it cannot be followed (``Unfollowable``)."""
    stamps: dict[str, Stamp] = {}
    try:
        _global_stamps(stamps)
        above = os.path.dirname(root)
        while True:
            _folder_stamps(above, stamps)
            parent = os.path.dirname(above)
            if parent == above:
                break
            above = parent
        _walk(root, stamps, [0])
    except Unfollowable:
        return None
    return stamps


def _walk(folder: str, stamps: dict[str, Stamp], count: list[int]) -> None:
    """A folder of the tree and the ones under it: each folder's stamp covers the entries
    it gains or loses, so only the ignore files it holds are stamped besides."""
    count[0] += 1
    if count[0] > MAX_FOLDERS:
        raise Unfollowable(folder)
    stamps[folder] = _stamp(folder)
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return  # rg says it could not read it, and a listing with errors is not kept
    for entry in entries:
        name = entry.name
        if name.startswith("."):
            if name in IGNORE_FILES:
                stamps[entry.path] = _stamp(entry.path)
            elif name == ".git":
                _git_stamps(entry.path, stamps)
            continue
        try:
            is_folder = entry.is_dir(follow_symlinks=False)
        except OSError:
            continue
        if is_folder:
            _walk(entry.path, stamps, count)


def newest(stamps: dict[str, Stamp]) -> int:
    """The latest modification or change time among ``stamps`` (ns): a listing is kept only
    when it is older than the racy window before rg started, so that a later change always
    changes a stamp."""
    return max((max(was[4], was[5]) for was in stamps.values()), default=0)


def unchanged(listing: Listing) -> bool:
    """Whether every stamp of ``listing`` is as it was."""
    return all(was and _packed(_stamp(path)) == was for path, was in listing.stamps.items())


def keepable(files: Sequence[str], errors: bytes) -> bool:
    """Whether a listing may be kept: rg said nothing, and listed no hidden path."""
    return not errors and not any(rel.startswith(".") or "/." in rel for rel in files)
