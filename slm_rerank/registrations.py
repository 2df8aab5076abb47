"""The things plugins register: one frozen dataclass per hook family."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    pass


@dataclass(frozen=True)
class OutputFormatter:
    """Turns a finished report into text for stdout.

    ``render(report, tty=...)`` returns the whole output; ``tty`` is true when stdout is a
    terminal, so a formatter may align a table for people and write plain lines for pipes.
    """

    name: str
    description: str
    render: Callable[..., str]


@dataclass(frozen=True)
class SourceQuery:
    """What a candidate source is asked for."""

    root: Path
    #: lower-case literals to find in file bodies (matched case-insensitively, as substrings)
    terms: Sequence[str]
    #: files or directories (absolute) to restrict the search to; empty means all of root
    paths: Sequence[Path] = ()
    #: glob patterns (relative to root) that files must match; empty means any
    globs: Sequence[str] = ()
    #: files larger than this many bytes are not searched
    max_filesize: int = 2_000_000


@dataclass
class SourceHits:
    """What a candidate source found: every searchable file, and body matches per file."""

    #: every text file in scope, as POSIX paths relative to the root
    files: list[str] = field(default_factory=list)
    #: path -> lower-case term -> number of occurrences in the file's body
    body_counts: dict[str, dict[str, int]] = field(default_factory=dict)


@dataclass(frozen=True)
class CandidateSource:
    """Where candidate files come from (ripgrep, git, ...).

    ``unavailable(root)`` returns None when the source can search ``root``, else a short
    reason (``"rg not found on PATH"``); ``search(query)`` returns ``SourceHits``.
    """

    name: str
    description: str
    unavailable: Callable[[Path], str | None]
    search: Callable[[SourceQuery], SourceHits]
    #: lower runs first when several sources are available
    priority: int = 100


@dataclass(frozen=True)
class QueryExpander:
    """Adds recall terms for a query: ``expand(query)`` returns extra words."""

    name: str
    description: str
    expand: Callable[[str], list[str]]


@dataclass(frozen=True)
class ModelProfile:
    """How to talk to one model family: prompt layout, answer words, and which ids it claims."""

    name: str
    description: str
    #: prompt template with ``{instruction}``, ``{query}`` and ``{document}`` fields
    template: str
    yes_words: tuple[str, ...]
    no_words: tuple[str, ...]
    #: regular expressions matched against a server's model id
    claims: tuple[str, ...] = ()
    stop: tuple[str, ...] = ()
    length_exponent: float = 0.0
    default_port: int | None = None


@dataclass(frozen=True)
class Scorer:
    """How a relevance score is obtained for a batch of chunks.

    ``score(query, documents, **options)`` returns one probability in [0, 1] per document.
    """

    name: str
    description: str
    score: Callable[..., list[float]]
