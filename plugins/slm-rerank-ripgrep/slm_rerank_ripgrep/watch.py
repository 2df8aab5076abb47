"""The kernel's word that nothing in an indexed tree changed (Linux ``inotify``), so that a
warm query need not ``lstat`` every file to learn it (issue 30).

A query of the word index checks every indexed file's stamp, to see a file edited in place
(which changes no folder). On sympy that is 1,414 ``lstat`` calls and the Python around
them, a quarter of a warm query. With a watch on every folder that holds an indexed file
(and every folder above it: a folder renamed or replaced tells no watch below it),
the kernel queues an event for each file written, truncated, created, removed, renamed or
whose attributes changed in them, before the call that changed it returns; a query that
finds the queue empty takes the last full check's result, which a full check may then
keep only if it found every file unchanged and settled.

What it cannot see, so is never trusted for it:
- a file system the kernel does not hear every change of: only local ones are watched
  (``LOCAL_FILE_SYSTEMS``); a tree on NFS, SMB, FUSE, 9p or virtiofs (a folder shared
  with a container's host, WSL's Windows drives) is checked file by file, as before;
- a file with more than one link (written through another name, in an unwatched folder,
  it raises no event here) or on another device than the tree's root (a mount inside
  the tree): such a file is checked on its stamp at every query (``Watch.exposed``);
- the root replaced by another folder at the same path (a parent renamed): the root's
  device and inode are compared at every query.
Not seen at all: a write through a shared memory map (``mmap``), which Linux reports to no
watch; a write through a second link made, in a folder not watched, after the check that
found the file with one (``link`` tells the file's own watches, none of its folder's); a
file system mounted over a folder of the tree after that check. An indexed file changed
that way is read again once anything else in the tree changes, or by the next process
that builds the index.

A watch's descriptor is opened only when a build finishes (idle work: a command that
left one open would be a leak to the warm process's worker, ``warm_process/isolation``),
closed with its tree; a query only reads it and adds folders to it.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import sys
from collections.abc import Iterable

#: events that mean a watched folder's files may differ (any of them: a full check)
IN_MODIFY = 0x2
IN_ATTRIB = 0x4
IN_CLOSE_WRITE = 0x8
IN_MOVED_FROM = 0x40
IN_MOVED_TO = 0x80
IN_CREATE = 0x100
IN_DELETE = 0x200
IN_DELETE_SELF = 0x400
IN_MOVE_SELF = 0x800
IN_ONLYDIR = 0x01000000
IN_DONT_FOLLOW = 0x02000000
MASK = (IN_MODIFY | IN_ATTRIB | IN_CLOSE_WRITE | IN_MOVED_FROM | IN_MOVED_TO | IN_CREATE
        | IN_DELETE | IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR | IN_DONT_FOLLOW)
#: ``statfs`` magic numbers of the file systems whose every change the kernel sees:
#: ext2/3/4, XFS, Btrfs, tmpfs, overlayfs, F2FS, ZFS, bcachefs
LOCAL_FILE_SYSTEMS = frozenset({0xEF53, 0x58465342, 0x9123683E, 0x01021994, 0x794C7630,
                                0xF2F52010, 0x2FC12FC1, 0xCA451A4E})
#: more folders than this and the tree is checked file by file (a watch each costs the
#: kernel about 1 KiB, and a user's watches are limited, often to 8,192)
MAX_FOLDERS = 4096
#: the user's limit on watches, of which one tree takes at most a quarter (an editor's or
#: a build tool's watchers need theirs); where it cannot be read, what older kernels set
WATCH_LIMIT_FILE = "/proc/sys/fs/inotify/max_user_watches"
DEFAULT_WATCH_LIMIT = 8192

_libc: ctypes.CDLL | None = None


def _lib() -> ctypes.CDLL | None:
    global _libc
    if _libc is None and sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            lib = ctypes.CDLL(None, use_errno=True)
            for name in ("inotify_init1", "inotify_add_watch", "fstatfs"):
                getattr(lib, name)
            lib.inotify_add_watch.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_uint32]
            lib.fstatfs.argtypes = [ctypes.c_int, ctypes.c_void_p]
            _libc = lib
    return _libc


def file_system(fd: int) -> int | None:
    """The ``statfs`` magic number of the file system ``fd`` is on, or None."""
    lib = _lib()
    if lib is None:
        return None
    buf = ctypes.create_string_buffer(256)  # struct statfs: f_type is its first field
    if lib.fstatfs(fd, buf) != 0:
        return None
    return ctypes.c_long.from_buffer(buf).value & 0xFFFFFFFF


class Watch:
    """An ``inotify`` instance on the folders of one tree's indexed files."""

    def __init__(self, fd: int, root_id: tuple[int, int]) -> None:
        self.fd = fd
        #: the root's (device, inode) when the watch was set
        self.root_id = root_id

    @classmethod
    def open(cls, root_fd: int) -> Watch | None:
        """A watch for the tree open as ``root_fd``, or None (not Linux, a file system
        whose changes the kernel may not hear, no instance to be had)."""
        lib = _lib()
        if lib is None or file_system(root_fd) not in LOCAL_FILE_SYSTEMS:
            return None
        fd = lib.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
        if fd < 0:
            return None
        st = os.fstat(root_fd)
        return cls(fd, (st.st_dev, st.st_ino))

    def arm(self, root_fd: int, folders: Iterable[str]) -> bool:
        """Watch each of ``folders`` and the folders above them (again: a folder renamed,
        removed or made since is watched by its path now); False when one could not be
        (then nothing is trusted). A folder above is watched for its entries: one of them
        renamed or replaced changes the files under it, and tells no watch below."""
        lib = _lib()
        if lib is None or self.fd < 0:
            return False
        wanted = {""}
        for folder in folders:
            while folder not in wanted:
                wanted.add(folder)
                folder = folder_of(folder)
        if len(wanted) > min(MAX_FOLDERS, _watch_limit() // 4):
            return False
        base = f"/proc/self/fd/{root_fd}"
        for folder in wanted:
            path = os.fsencode(f"{base}/{folder}" if folder else f"{base}/.")
            if lib.inotify_add_watch(self.fd, path, MASK) < 0:
                if folder and ctypes.get_errno() == errno.ENOENT:
                    continue  # gone: its files are gone too, which the check finds
                return False
        st = os.fstat(root_fd)  # the folder at the root's path now
        self.root_id = (st.st_dev, st.st_ino)
        return True

    def quiet(self) -> bool:
        """Whether nothing was reported since the last call (what was is read and dropped;
        an overflowed queue reports itself)."""
        quiet = True
        while True:
            try:
                if not os.read(self.fd, 65536):
                    return quiet
            except BlockingIOError:
                return quiet
            except OSError:
                return False
            quiet = False

    def close(self) -> None:
        if self.fd >= 0:
            with contextlib.suppress(OSError):
                os.close(self.fd)
            self.fd = -1

    def __del__(self) -> None:
        self.close()


def _watch_limit() -> int:
    try:
        with open(WATCH_LIMIT_FILE, "rb") as f:
            return int(f.read(32))
    except (OSError, ValueError):
        return DEFAULT_WATCH_LIMIT


def folder_of(rel: str) -> str:
    """The folder of a listed path, relative to the root ("" for the root itself)."""
    cut = rel.rfind("/")
    return rel[:cut] if cut >= 0 else ""
