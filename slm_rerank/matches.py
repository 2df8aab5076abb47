"""Reads what `rg -o --null` and `git grep -o -z` print: `path NUL match` records, file lists.

Also turns a tool's stderr into the short excerpt an error message carries.
"""

from __future__ import annotations

import os
import re
from collections import Counter
from collections.abc import Iterable, Iterator

#: ripgrep writes these notices to stdout, without a NUL, when it meets a NUL byte in a file
#: it was searching (`binary file matches (...)`, `WARNING: stopped searching binary file
#: after match (...)`). They are not records, and must not be read as the start of a path.
_BINARY_NOTICES = re.compile(rb'(?:[^\n]*\(found "\\0" byte around offset \d+\)\n)+')

#: How much of a tool's stderr an error message carries.
STDERR_LINES = 12
STDERR_LINE_CHARS = 300


def order_for_search(terms: Iterable[str]) -> list[str]:
    """Distinct terms, longest first, so a leftmost-first matcher reports the longer one."""
    return sorted({t.lower() for t in terms if t}, key=lambda t: (-len(t), t))


def match_records(output: bytes) -> Iterator[tuple[bytes, bytes]]:
    """(path, matched text) for each `path\\0matched-text\\n` record, paths as raw bytes.

    A path may hold any byte but NUL (a newline or a carriage return included), so records
    are not lines: a path runs up to the next NUL, and the matched text after it up to the
    next newline. The text never holds a newline itself, because every term is a literal
    on one line.
    """
    pieces = output.split(b"\0")
    path = _without_notices(pieces[0])
    for piece in pieces[1:]:
        text, _, rest = piece.partition(b"\n")
        yield path, text
        path = _without_notices(rest)


def _without_notices(segment: bytes) -> bytes:
    found = _BINARY_NOTICES.match(segment)
    return segment[found.end():] if found else segment


def count_terms(output: bytes, terms: Iterable[str]) -> dict[str, dict[str, int]]:
    """path -> term -> occurrences, from `path\\0matched-text` records.

    A matched text counts for every term it contains, so ``classes`` found in a file also
    counts for the shorter term ``class`` that the matcher did not report separately.
    """
    wanted = order_for_search(terms)
    counts: dict[str, dict[str, int]] = {}
    for (raw_path, raw_match), n in Counter(match_records(output)).items():
        path = _relative(os.fsdecode(raw_path))
        text = raw_match.decode("utf-8", "replace").lower()
        per_file = counts.setdefault(path, {})
        for term in wanted:
            if term in text:
                per_file[term] = per_file.get(term, 0) + n
    return {path: c for path, c in counts.items() if c}


def split_file_list(output: bytes) -> list[str]:
    """NUL-separated file names as str (undecodable bytes kept via surrogateescape)."""
    return [_relative(os.fsdecode(raw)) for raw in output.split(b"\0") if raw]


def _relative(path: str) -> str:
    return path[2:] if path.startswith("./") else path


def stderr_excerpt(stderr: bytes) -> str:
    """The first lines of a tool's stderr, cut short and joined by " | " into one line.

    Error messages are printed on one line, so they can carry it as it is.
    """
    lines = [line.strip() for line in stderr.decode("utf-8", "replace").splitlines()]
    lines = [line for line in lines if line]
    if not lines:
        return "(nothing on stderr)"
    shown = [line if len(line) <= STDERR_LINE_CHARS else line[:STDERR_LINE_CHARS] + "…"
             for line in lines[:STDERR_LINES]]
    if len(lines) > STDERR_LINES:
        shown.append(f"… and {len(lines) - STDERR_LINES} more lines")
    return " | ".join(shown)
