"""Candidate source: git ls-files and git grep."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import slm_rerank
from slm_rerank.errors import SourceError
from slm_rerank.plugin_kit import (
    GitError,
    count_terms,
    order_for_search,
    size_reason,
    split_file_list,
    start_git,
    stderr_excerpt,
)
from slm_rerank.registrations import CandidateSource, SourceHits, SourceQuery

#: What git prints on stderr for a folder or file it could not read, and goes on (recorded
#: from git 2.39 run as an unprivileged user): ls-files and grep for a folder, grep for a
#: file.
_UNREADABLE = re.compile(rb"^(?:warning: could not open directory|error: failed to stat) "
                         rb"'(.+)': (.+?)\s*$")


#: How long ``git rev-parse`` may take to say whether the root is in a work tree.
PROBE_SECONDS = 10.0


def unavailable(root: Path) -> str | None:
    if shutil.which("git") is None:
        return "git not found on PATH"
    # Through start_git (start_tool) like the search itself: a caller abandoning the search
    # at its deadline kills this one too; and bounded, as git on a hung file system never
    # answers. start_git turns off whatever the repository's git configuration would run.
    deadline = time.monotonic() + PROBE_SECONDS  # in total, the driver names' read too
    try:
        proc = start_git(root, ["rev-parse", "--is-inside-work-tree"], timeout=PROBE_SECONDS)
    except GitError as exc:
        return f"git could not run: {exc}"
    except OSError as exc:
        return f"git could not run: {exc.strerror or exc}"
    try:
        out, _ = proc.communicate(timeout=max(deadline - time.monotonic(), 0.0))
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        return f"git rev-parse did not answer within {PROBE_SECONDS:g} s in {root}"
    if proc.returncode != 0 or out.strip() != b"true":
        return f"{root} is not inside a git work tree"
    return None


def _pathspecs(query: SourceQuery) -> list[str]:
    specs = [os.path.relpath(p, query.root) for p in query.paths]
    specs += [f":(glob){g}" for g in query.globs]
    return ["--", *specs]


def _start(args: list[str], root: Path) -> subprocess.Popen[bytes]:
    # start_git records the process, for a caller abandoning the search to kill.
    try:
        return start_git(root, args)
    except GitError as exc:
        raise SourceError(f"candidate source 'git' could not run git for {root}: "
                          f"{exc}") from None
    except OSError as exc:
        raise SourceError(f"candidate source 'git' could not run git for {root}: "
                          f"{exc.strerror or exc}; check that git is installed") from exc


def _check(what: str, proc: subprocess.Popen[bytes], err: bytes, ok: tuple[int, ...],
           root: Path) -> None:
    """Raise SourceError unless git exited with one of the ``ok`` statuses.

    git reports a file it could not read as an error line and goes on with the rest,
    exiting 0 (or 1: nothing matched); a fatal fault, such as a corrupt index or a folder
    that vanished, exits 128.
    """
    code = proc.returncode
    if code in ok:
        return
    status = f"was killed by signal {-code}" if code < 0 else f"exited with status {code}"
    raise SourceError(f"candidate source 'git' failed: `{what}` {status} in {root}: "
                      f"{stderr_excerpt(err)}. Fix what git reports, or choose another "
                      "source (sources = [\"ripgrep\"] in .slm-rerank.toml).")


def unreadable(err: bytes) -> dict[str, str]:
    """path -> why, for each file or folder git reported it could not read."""
    found = {}
    for line in err.splitlines():
        match = _UNREADABLE.match(line)
        if match:
            path = os.fsdecode(match.group(1)).rstrip("/")
            found[path] = f"unreadable ({match.group(2).decode('utf-8', 'replace')})"
    return found


def search(query: SourceQuery) -> SourceHits:
    specs = _pathspecs(query)
    base = ["-c", "core.quotepath=off"]
    listing = _start(
        [*base, "ls-files", "-z", "--cached", "--others", "--exclude-standard", *specs],
        query.root,
    )
    matching = naming = None
    terms = order_for_search(query.terms)
    if terms:
        patterns = [arg for term in terms for arg in ("-e", term)]
        grep = [*base, "grep", "--untracked", "-i", "-F", "-z"]
        try:
            matching = _start([*grep, "-I", "-o", "-H", "--no-line-number", "--no-color",
                               *patterns, *specs], query.root)
            # -I drops binary files silently; the names of all files that match, binary
            # ones included, tell them apart (a third process: only -v pays for it).
            if query.explain:
                naming = _start([*grep, "-l", *patterns, *specs], query.root)
        except SourceError:
            for proc in (listing, matching):
                if proc is not None:
                    proc.kill()
                    proc.communicate()
            raise
    # Read the listing to its end first; meanwhile git grep may block on a full pipe, which
    # only delays it: the two processes do not wait on each other.
    files_out, files_err = listing.communicate()
    match_out, match_err = matching.communicate() if matching is not None else (b"", b"")
    named_out, named_err = naming.communicate() if naming is not None else (b"", b"")
    _check("git ls-files", listing, files_err, (0,), query.root)
    # ls-files lists a file once per merge stage and keeps deleted-but-tracked files.
    # Huge files are listed (so a file named after the query can be reported as skipped),
    # but their matches are not counted: files larger than max_filesize are not searched.
    sizes = {f: _size(query.root / f) for f in dict.fromkeys(split_file_list(files_out))}
    files = [f for f, size in sizes.items() if size is not None]
    # The sizes are known anyway: saying which files are too big to search costs nothing.
    hits = SourceHits(files=files, skipped=unreadable(files_err))
    hits.skipped.update({f: why for f in files
                         if (why := size_reason(sizes[f] or 0, query.max_filesize))})
    if matching is not None:
        _check("git grep", matching, match_err, (0, 1), query.root)
        counts = count_terms(match_out, terms)
        keep = {f for f in files if (sizes[f] or 0) <= query.max_filesize}
        hits.body_counts = {p: c for p, c in counts.items() if p in keep}
        hits.skipped.update(unreadable(match_err))
    if naming is not None:
        _check("git grep -l", naming, named_err, (0, 1), query.root)
        for path in split_file_list(named_out):
            if path not in counts and path in sizes:
                hits.skipped.setdefault(path, "binary (NUL byte)")
    return hits


def _size(path: Path) -> int | None:
    """A regular file's size; None for a deleted file, a directory or a broken symlink."""
    try:
        return path.stat().st_size if path.is_file() else None
    except OSError:
        return None


@slm_rerank.hookimpl
def register_candidate_sources(register: Callable[[CandidateSource], None]) -> None:
    register(CandidateSource(
        name="git",
        description="git ls-files and git grep (inside a git work tree)",
        unavailable=unavailable,
        search=search,
        priority=20,
    ))
