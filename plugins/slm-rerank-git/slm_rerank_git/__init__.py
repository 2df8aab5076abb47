"""Candidate source: git ls-files and git grep."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import slm_rerank
from slm_rerank.matches import count_terms, order_for_search, split_file_list
from slm_rerank.registrations import CandidateSource, SourceHits, SourceQuery


def unavailable(root: Path) -> str | None:
    if shutil.which("git") is None:
        return "git not found on PATH"
    done = subprocess.run(["git", "-C", str(root), "rev-parse", "--is-inside-work-tree"],
                          capture_output=True, text=True)
    if done.returncode != 0 or done.stdout.strip() != "true":
        return f"{root} is not inside a git work tree"
    return None


def _pathspecs(query: SourceQuery) -> list[str]:
    specs = [os.path.relpath(p, query.root) for p in query.paths]
    specs += [f":(glob){g}" for g in query.globs]
    return ["--", *specs]


def search(query: SourceQuery) -> SourceHits:
    specs = _pathspecs(query)
    base = ["git", "-c", "core.quotepath=off", "-C", str(query.root)]
    listing = subprocess.Popen(
        [*base, "ls-files", "-z", "--cached", "--others", "--exclude-standard", *specs],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
    )
    matching = None
    terms = order_for_search(query.terms)
    if terms:
        patterns = [arg for term in terms for arg in ("-e", term)]
        matching = subprocess.Popen(
            [*base, "grep", "--untracked", "-I", "-i", "-F", "-o", "-z", "-H",
             "--no-line-number", "--no-color", *patterns, *specs],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
        )
    files_out, _ = listing.communicate()
    # ls-files lists a file once per merge stage and keeps deleted-but-tracked files.
    # Huge files are listed (so a file named after the query can be reported as skipped),
    # but their matches are not counted: files larger than max_filesize are not searched.
    sizes = {f: _size(query.root / f) for f in dict.fromkeys(split_file_list(files_out))}
    files = [f for f, size in sizes.items() if size is not None]
    hits = SourceHits(files=files)
    if matching is not None:
        match_out, _ = matching.communicate()
        keep = {f for f in files if (sizes[f] or 0) <= query.max_filesize}
        hits.body_counts = {p: c for p, c in count_terms(match_out, terms).items() if p in keep}
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
