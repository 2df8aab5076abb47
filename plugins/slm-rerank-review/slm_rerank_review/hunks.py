"""The chunks a ``--diff`` review asks about: the changed hunks themselves.

Every chunk of a changed code file that holds a changed line is a candidate, cut as the
search cuts the file (``plugin_kit.chunk_text``), whatever the query's words: a review of a
change reviews the change. Only code is reviewed as code: a changed file the search reads
as documentation, a changelog, data or configuration (``plugin_kit.is_source_path`` /
``path_kind``) is left out and counted. A changed file that cannot be read within the
review's bounds (a link out of the root, a FIFO, over 2 MB) is skipped, said, and the rest
reviewed.
"""

from __future__ import annotations

import fnmatch
import os
from dataclasses import dataclass, field
from pathlib import Path

from slm_rerank.errors import SearchError
from slm_rerank.plugin_kit import chunk_text, is_source_path, path_kind
from slm_rerank.report import display_path
from slm_rerank_review.diff import Changes
from slm_rerank_review.gates import split_lines
from slm_rerank_review.generation import ShownChunk
from slm_rerank_review.reading import ChunkUnreadable, read_file

GLOB_CHARS = frozenset("*?[")
#: file names a note lists before it says "and N more"
NOTE_NAMES = 5


@dataclass
class DiffChunks:
    """What a diff gives a review to ask about, and what it leaves out."""

    #: the chunks holding a changed line, by file (sorted) and line
    chunks: list[ShownChunk] = field(default_factory=list)
    #: the changed code files that were read (as git names them, relative to the root)
    code_files: list[str] = field(default_factory=list)
    #: changed files that are not code (shown paths, each with its kind): not reviewed
    not_code: list[str] = field(default_factory=list)
    #: changed code files that could not be read, and why
    unreadable: list[str] = field(default_factory=list)
    #: changed files outside the paths the review was given
    not_named: int = 0


def changed_chunks(root: Path, changes: Changes, named: tuple[str, ...] = (),
                   cwd: Path | None = None) -> DiffChunks:
    """The chunks of ``changes``' code files under ``named`` (paths, folders or globs as a
    search reads them, relative to ``cwd``; none: every changed file) that hold a changed
    line.

    Raises SearchError for a name of ``named`` that is neither there nor a glob, as a search
    refuses a path argument that does not exist.
    """
    for name in named:
        given = os.path.join(cwd or Path.cwd(), os.path.expanduser(name))
        if not GLOB_CHARS & set(name) and not os.path.lexists(given):
            raise SearchError(f"path '{display_path(name)}' does not exist")
    found = DiffChunks()
    for path in changes.paths:
        if named and not is_named(root, path, named, cwd or Path.cwd()):
            found.not_named += 1
            continue
        shown = display_path(path)
        if not is_source_path(path):
            found.not_code.append(f"{shown} ({kind_word(path)})")
            continue
        try:
            data, text = read_file(root, path)
        except ChunkUnreadable as exc:
            found.unreadable.append(str(exc))
            continue
        found.code_files.append(path)
        lines = split_lines(text)
        for chunk in chunk_text(os.path.basename(path), data, text):
            if chunk.start_line > len(lines) or not changes.touches(
                    path, chunk.start_line, chunk.end_line):
                continue
            end = min(chunk.end_line, len(lines))
            found.chunks.append(ShownChunk(shown, chunk.start_line, end,
                                           "\n".join(lines[chunk.start_line - 1:end]),
                                           chunk.symbol))
    return found


def kind_word(path: str) -> str:
    """What a file that is no code is, as the search reads its path."""
    kind = path_kind(path)
    return {"doc": "documentation", "other": "not code", "test": "test data"}.get(kind, kind)


def is_named(root: Path, path: str, named: tuple[str, ...], cwd: Path) -> bool:
    """Whether the changed file ``path`` (relative to ``root``) is one of ``named``, inside
    one of them (a folder), or matched by one (a glob, gitignore-style: one without a slash
    matches any part of the path)."""
    absolute = os.path.join(str(root), path)
    for name in named:
        given = os.path.abspath(os.path.join(cwd, os.path.expanduser(name)))
        if os.path.lexists(given) or not GLOB_CHARS & set(name):
            if absolute == given or absolute.startswith(given.rstrip(os.sep) + os.sep):
                return True
            continue
        glob = os.path.relpath(given, root).replace(os.sep, "/")
        parts = path.split("/")
        if fnmatch.fnmatchcase(path, glob) or ("/" not in glob and any(
                fnmatch.fnmatchcase(part, glob) for part in parts)):
            return True
        if any(fnmatch.fnmatchcase("/".join(parts[:i]), glob) for i in range(1, len(parts))):
            return True  # a glob that selects a folder selects the files inside it
    return False


def listed(names: list[str]) -> str:
    """Names for a note: the first few, then how many more."""
    more = f" and {len(names) - NOTE_NAMES} more" if len(names) > NOTE_NAMES else ""
    return ", ".join(names[:NOTE_NAMES]) + more
