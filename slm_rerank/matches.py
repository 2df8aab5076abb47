"""Reads the `path NUL match` lines that `rg -o --null` and `git grep -o -z` print."""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Iterable


def order_for_search(terms: Iterable[str]) -> list[str]:
    """Distinct terms, longest first, so a leftmost-first matcher reports the longer one."""
    return sorted({t.lower() for t in terms if t}, key=lambda t: (-len(t), t))


def count_terms(output: bytes, terms: Iterable[str]) -> dict[str, dict[str, int]]:
    """path -> term -> occurrences, from `path\\0matched-text` lines.

    A matched text counts for every term it contains, so ``classes`` found in a file also
    counts for the shorter term ``class`` that the matcher did not report separately.
    """
    wanted = order_for_search(terms)
    per_line = Counter(output.splitlines())
    counts: dict[str, dict[str, int]] = {}
    for line, n in per_line.items():
        raw_path, sep, raw_match = line.partition(b"\0")
        if not sep:
            continue  # a warning line, not a match
        path = os.fsdecode(raw_path)
        if path.startswith("./"):
            path = path[2:]
        text = raw_match.decode("utf-8", "replace").lower()
        per_file = counts.setdefault(path, {})
        for term in wanted:
            if term in text:
                per_file[term] = per_file.get(term, 0) + n
    return {path: c for path, c in counts.items() if c}


def split_file_list(output: bytes) -> list[str]:
    """NUL-separated file names as str (undecodable bytes kept via surrogateescape)."""
    files = []
    for raw in output.split(b"\0"):
        if raw:
            path = os.fsdecode(raw)
            files.append(path[2:] if path.startswith("./") else path)
    return files
