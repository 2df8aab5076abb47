"""Baseline file rankers the tool is compared against: BM25 over whole files (bm25s) and a
bare ripgrep term count.

Which files BM25 indexes (``FILE_SETS``):

- ``all``: every text file of the tree.
- ``src``: files with a programming-language extension (``SOURCE_EXTENSIONS``), wherever
  they are: test modules (``tests/test_x.py``, ``x_test.go``, ``x.test.ts``), vendored
  copies, ``docs/conf.py`` and examples stay in; Markdown, reST, config and data go.
- ``code``: the files the tool itself calls program source
  (``slm_rerank.lexical.filetypes.path_kind(path) == "source"``, the same test that says
  which changed files a mined case's answer may be): extension as above, and not a test,
  not under a docs or examples folder, not a changelog, not a versioned vendored library.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

MAX_FILE_BYTES = 1_000_000
BINARY_SNIFF_BYTES = 8192
# Written by the tree materializer at a tree's root; not part of the repository.
TREE_MARKER = ".complete"

SOURCE_EXTENSIONS = frozenset(
    """
    .py .pyx .pxd .pxi .pyi
    .c .h .cc .cpp .cxx .c++ .hh .hpp .hxx .h++ .inl .m .mm .cu .cuh
    .js .jsx .mjs .cjs .ts .tsx .mts .cts .vue .svelte
    .java .kt .kts .scala .groovy .clj .cljs .cs .fs .vb
    .go .rs .rb .php .swift .dart .lua .pl .pm .r .jl .hs .ml .mli .ex .exs .erl .elm
    .f .for .f77 .f90 .f95 .f03 .zig .nim .v .sv .vhd
    .sh .bash .zsh .ps1 .sql
    """.split()
)

# Common English function words, dropped from rg-count queries.
ENGLISH_STOP_WORDS = frozenset(
    """
    a about above after again against all am an and any are aren't as at be because been
    before being below between both but by can cannot could couldn't did didn't do does
    doesn't doing don't down during each few for from further had hadn't has hasn't have
    haven't having he her here hers herself him himself his how i if in into is isn't it
    it's its itself just let me more most my myself no nor not now of off on once only or
    other ought our ours ourselves out over own same she should shouldn't so some such than
    that the their theirs them themselves then there these they this those through to too
    under until up very was wasn't we were weren't what when where which while who whom why
    will with won't would wouldn't you your yours yourself yourselves also may might must
    shall us get got via within without upon yet
    """.split()
)

_TERM_RE = re.compile(r"[a-z0-9_]+")


def query_terms(text: str, min_len: int = 3, max_terms: int = 32) -> list[str]:
    """Lowercase word terms of a query, in order of first appearance: alphanumeric or
    underscore runs of at least `min_len` characters, stop words dropped, deduplicated,
    at most `max_terms`."""
    terms: list[str] = []
    seen: set[str] = set()
    for term in _TERM_RE.findall(text.lower()):
        if len(term) < min_len or term in ENGLISH_STOP_WORDS or term in seen:
            continue
        seen.add(term)
        terms.append(term)
        if len(terms) >= max_terms:
            break
    return terms


def is_source_file(path: str) -> bool:
    """True for files of programming languages (by extension), not docs, data or config."""
    suffix = os.path.splitext(path)[1].lower()
    return suffix in SOURCE_EXTENSIONS


def is_code_file(path: str) -> bool:
    """True for program source as the tool classifies it: no tests, docs folders,
    changelogs or versioned vendored libraries (see the module docstring)."""
    from slm_rerank.lexical.filetypes import path_kind

    return path_kind(path) == "source"


#: The file sets BM25 can index: a name and the test a relative path must pass (None: all).
FILE_SETS: dict[str, Callable[[str], bool] | None] = {
    "all": None,
    "src": is_source_file,
    "code": is_code_file,
}


# --- ripgrep term count -----------------------------------------------------------------


def find_rg() -> str | None:
    """ripgrep on PATH, else the one the `ripgrep` wheel put next to this Python."""
    found = shutil.which("rg")
    if found:
        return found
    beside = Path(sys.executable).parent / "rg"
    return str(beside) if beside.is_file() and os.access(beside, os.X_OK) else None


def rg_count_rank(rg: str, tree: Path, text: str, k: int = 10) -> list[str]:
    """Rank the tree's files by how many matches of the query's terms ripgrep counts in
    them (case-insensitive fixed strings, one rg process); best first, ties by path."""
    terms = query_terms(text)
    if not terms:
        return []
    args = [rg, "--count-matches", "--ignore-case", "--fixed-strings", "--null", "--no-messages"]
    for term in terms:
        args += ["-e", term]
    args += ["--", str(tree)]
    proc = subprocess.run(args, capture_output=True, check=False)
    if proc.returncode not in (0, 1) and not proc.stdout:
        raise RuntimeError(f"rg exited {proc.returncode}: {proc.stderr.decode(errors='replace')}")
    prefix = str(tree).rstrip("/") + "/"
    counts: list[tuple[int, str]] = []
    for line in proc.stdout.splitlines():
        raw_path, _, raw_count = line.rpartition(b"\0")
        if not raw_path:
            continue
        path = os.fsdecode(raw_path)
        if path.startswith(prefix):
            path = path[len(prefix) :]
        counts.append((int(raw_count), path))
    counts.sort(key=lambda item: (-item[0], item[1]))
    return [path for _, path in counts[:k]]


# --- BM25 over whole files ---------------------------------------------------------------


def read_text_files(
    tree: Path, keep: Callable[[str], bool] | None = None
) -> tuple[list[str], list[str]]:
    """Relative POSIX paths and contents of the tree's text files that ``keep`` accepts
    (None: all), sorted by path: binary files (a NUL byte in the first 8 KiB) and files
    over 1 MB are skipped."""
    paths: list[str] = []
    texts: list[str] = []
    for dirpath, dirnames, filenames in os.walk(tree):
        dirnames.sort()
        rel_dir = os.path.relpath(dirpath, tree)
        for name in sorted(filenames):
            rel = name if rel_dir == "." else f"{rel_dir}/{name}".replace(os.sep, "/")
            if rel == TREE_MARKER or (keep is not None and not keep(rel)):
                continue
            full = os.path.join(dirpath, name)
            if not os.path.isfile(full) or os.path.getsize(full) > MAX_FILE_BYTES:
                continue
            with open(full, "rb") as handle:
                data = handle.read()
            if b"\0" in data[:BINARY_SNIFF_BYTES]:
                continue
            paths.append(rel)
            texts.append(data.decode("utf-8", errors="replace"))
    order = sorted(range(len(paths)), key=paths.__getitem__)
    return [paths[i] for i in order], [texts[i] for i in order]


@dataclass
class Bm25Index:
    """A bm25s index over one tree's files (one document per file)."""

    tree: Path
    file_set: str  # a FILE_SETS name
    paths: list[str]
    retriever: Any  # bm25s.BM25
    build_seconds: float

    @classmethod
    def build(cls, tree: Path, file_set: str) -> Bm25Index:
        import bm25s

        started = time.perf_counter()
        paths, texts = read_text_files(tree, FILE_SETS[file_set])
        retriever = bm25s.BM25()
        if paths:
            tokens = bm25s.tokenize(texts, stopwords="en", show_progress=False)
            retriever.index(tokens, show_progress=False)
        return cls(tree, file_set, paths, retriever, time.perf_counter() - started)

    def search(self, text: str, k: int = 10) -> list[str]:
        """The k best-scoring files for a query (only files scoring above zero)."""
        import bm25s
        import numpy as np

        if not self.paths:
            return []
        tokens = bm25s.tokenize(text, stopwords="en", return_ids=False, show_progress=False)[0]
        known = [token for token in tokens if token in self.retriever.vocab_dict]
        if not known:
            return []
        scores = np.asarray(self.retriever.get_scores(known))
        # Stable sort on descending score: ties keep path order.
        order = np.argsort(-scores, kind="stable")[:k]
        return [self.paths[i] for i in order if scores[i] > 0]


class Bm25Cache:
    """Keeps the indexes of the tree being worked on; building for another tree drops them
    (cases are run grouped by tree, so each tree is indexed once per system)."""

    def __init__(self) -> None:
        self._tree: Path | None = None
        self._indexes: dict[str, Bm25Index] = {}

    def get(self, tree: Path, file_set: str) -> tuple[Bm25Index, bool]:
        """The index for (tree, file_set), and whether it was built by this call."""
        if tree != self._tree:
            self._tree = tree
            self._indexes = {}
        if file_set in self._indexes:
            return self._indexes[file_set], False
        index = Bm25Index.build(tree, file_set)
        self._indexes[file_set] = index
        return index, True
