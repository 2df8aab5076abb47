"""Candidate source: ripgrep."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import slm_rerank
from slm_rerank.matches import count_terms, order_for_search, split_file_list
from slm_rerank.registrations import CandidateSource, SourceHits, SourceQuery


def find_rg() -> str | None:
    """`SLM_RERANK_RG`, else the rg installed beside this Python, else rg on PATH."""
    override = os.environ.get("SLM_RERANK_RG")
    if override:
        return override if os.access(override, os.X_OK) else None
    beside = Path(sys.executable).parent / "rg"
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    return shutil.which("rg")


def unavailable(root: Path) -> str | None:
    if find_rg() is None:
        return "rg not found (install the 'ripgrep' package or set SLM_RERANK_RG)"
    return None


def _scope_args(query: SourceQuery) -> list[str]:
    args: list[str] = []
    for glob in query.globs:
        args += ["-g", glob]
    args.append("--")
    args += [os.path.relpath(p, query.root) for p in query.paths]
    return args


def search(query: SourceQuery) -> SourceHits:
    rg = find_rg()
    if rg is None:
        raise RuntimeError(unavailable(query.root))
    scope = _scope_args(query)
    # Listing and matching run side by side: two processes, one wait. Huge files are listed
    # (so a file named after the query can be reported as skipped) but never searched.
    # stdin is /dev/null: given no paths, rg reads a piped stdin instead of the tree.
    listing = subprocess.Popen([rg, "--files", "--null", *scope], cwd=query.root,
                               stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                               stderr=subprocess.DEVNULL)
    matching = None
    terms = order_for_search(query.terms)
    if terms:
        patterns = [arg for term in terms for arg in ("-e", term)]
        matching = subprocess.Popen(
            [rg, "-o", "-i", "-F", "--null", "--no-line-number", "--with-filename",
             "--no-heading", "--color=never", "--no-messages",
             f"--max-filesize={query.max_filesize}", *patterns, *scope],
            cwd=query.root, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
    files_out, _ = listing.communicate()
    hits = SourceHits(files=split_file_list(files_out))
    if matching is not None:
        match_out, _ = matching.communicate()
        hits.body_counts = count_terms(match_out, terms)
    return hits


@slm_rerank.hookimpl
def register_candidate_sources(register: Callable[[CandidateSource], None]) -> None:
    register(CandidateSource(
        name="ripgrep",
        description="rg: respects .gitignore, reaches untracked files",
        unavailable=unavailable,
        search=search,
        priority=10,
    ))
