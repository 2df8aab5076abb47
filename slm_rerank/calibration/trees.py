"""The tree a case is searched in: a commit's files laid out in the cache folder.

``git archive`` writes the commit's tracked files as a tar, which is unpacked under
``<cache>/calibrate/`` and removed when the case is done, also when the run fails. The
user's working tree and ``.git`` are only read: no worktree is added, no index touched.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tarfile
import tempfile
from collections.abc import Iterator
from pathlib import Path

from slm_rerank.errors import ConfigError
from slm_rerank.git_runner import GitError, git_stream

#: bytes of one tree's tar: larger, and the repository is not one to calibrate on here
MAX_TREE_BYTES = 4_000_000_000
#: seconds ``git archive`` may take for one tree
ARCHIVE_TIMEOUT = 300.0
FOLDER = "calibrate"
_PREFIX = "tree-"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True  # another user's process: not ours to judge
    return True


def sweep(base: Path) -> None:
    """Remove the trees of runs that were killed before they could (their pid is gone)."""
    for entry in base.glob(f"{_PREFIX}*"):
        pid = entry.name[len(_PREFIX):].split("-", 1)[0]
        if pid.isdigit() and int(pid) != os.getpid() and not _alive(int(pid)):
            shutil.rmtree(entry, ignore_errors=True)


def _inside(member: tarfile.TarInfo, dest: str) -> tarfile.TarInfo | None:
    """The "data" filter (no absolute paths, no links out of the folder, no device files),
    but a member it refuses is left out rather than failing the whole tree: a repository
    may track a link to /etc/... or ../.., which the search would not follow anyway."""
    try:
        return tarfile.data_filter(member, dest)
    except tarfile.FilterError:
        return None


@contextlib.contextmanager
def commit_tree(repo: Path, commit: str, cache_dir: Path) -> Iterator[Path]:
    """The files of ``commit`` in a fresh folder under ``cache_dir``, removed afterwards."""
    base = cache_dir / FOLDER
    try:
        base.mkdir(parents=True, exist_ok=True)
        folder = Path(tempfile.mkdtemp(prefix=f"{_PREFIX}{os.getpid()}-{commit[:12]}-",
                                       dir=base))
    except OSError as exc:
        raise ConfigError(f"cannot lay out the tree of {commit[:12]} under {base} "
                          f"({exc.strerror or exc}); set cache_dir or SLM_RERANK_CACHE_DIR "
                          "to a writable folder") from None
    try:
        archive, tree = folder / "tree.tar", folder / "tree"
        with open(archive, "wb") as sink:
            git_stream(repo, ["archive", "--format=tar", commit], sink,
                       timeout=ARCHIVE_TIMEOUT, max_bytes=MAX_TREE_BYTES)
        tree.mkdir()
        try:
            with tarfile.open(archive) as tar:
                tar.extractall(tree, filter=_inside)
        except (tarfile.TarError, OSError) as exc:
            raise GitError(f"cannot unpack the tree of {commit[:12]} into {tree}: "
                           f"{exc}") from None
        archive.unlink()
        yield tree
    finally:
        shutil.rmtree(folder, ignore_errors=True)
