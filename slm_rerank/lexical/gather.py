"""Gather: the files in scope that hold the query's terms, asked of the first candidate
source that can search the root, and each file's lexical evidence."""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from slm_rerank.errors import SearchError, SlmRerankError
from slm_rerank.host import Host
from slm_rerank.lexical.file_scores import FileEvidence, score_files
from slm_rerank.lexical.scope import globs_matching_nothing
from slm_rerank.lexical.scores import TermStats
from slm_rerank.lexical.terms import QueryTerms
from slm_rerank.registrations import CandidateSource, SourceHits, SourceQuery
from slm_rerank.report import display_path

#: Above this many explicit paths, the source searches the root and results are filtered.
MAX_PATH_ARGS = 200


@dataclass
class Gathered:
    """The candidates' evidence: which source ran, what it found, per-file scores."""

    terms: QueryTerms
    source: str
    hits: SourceHits
    stats: TermStats
    evidence: list[FileEvidence]
    #: byte sizes of the files with body matches (length normalisation), as ``score_files``
    #: used them
    sizes: dict[str, int] = field(default_factory=dict)



def choose_source(host: Host, root: Path, notes: list[str]) -> CandidateSource:
    """The first source in the ``sources`` setting that can search ``root``."""
    available = host.registry.sources()
    wanted = host.settings.sources
    order = [n for n in wanted if n in available] + sorted(
        (n for n in available if n not in wanted), key=lambda n: available[n].priority)
    reasons: list[str] = []
    for name in order:
        reason = available[name].unavailable(root)
        if reason is None:
            if reasons:
                notes.append(f"source {name} used because {'; '.join(reasons)}")
            return available[name]
        reasons.append(f"{name}: {reason}")
    if not available:
        disabled = host.settings.disabled_plugins
        if disabled:
            raise SearchError(
                "every candidate source is disabled (disabled_plugins = "
                f"{disabled} from {host.settings.origins.get('disabled_plugins')}); "
                "enable ripgrep or git")
        raise SearchError("no candidate source is installed (pip install slm-rerank-ripgrep)")
    raise SearchError(f"no candidate source can search {display_path(str(root))} "
                      f"({'; '.join(reasons)})")


def _sizes(root: Path, paths: Iterable[str]) -> dict[str, int]:
    """Byte sizes of the files with body matches, for length normalisation."""
    base = os.fsencode(root)
    sizes = {}
    for rel in paths:
        try:
            sizes[rel] = os.stat(os.path.join(base, os.fsencode(rel))).st_size
        except OSError:
            continue
    return sizes


def _within(path: str, restrict: set[str]) -> bool:
    """True when ``path`` or one of its parent folders is in ``restrict``."""
    return path in restrict or any(str(parent) in restrict
                                   for parent in PurePosixPath(path).parents)


def gather_files(host: Host, root: Path, terms: QueryTerms, notes: list[str], *,
                 paths: Sequence[Path] = (), globs: Sequence[str] = (),
                 explain: bool = False) -> Gathered:
    """Ask the first available source for the files in scope and their term counts.

    ``paths`` (inside ``root``; empty: all of it) and ``globs`` are the resolved scope;
    ``explain`` asks the source to say why it skipped each file (``-v``).
    """
    source = choose_source(host, root, notes)
    listed, restrict = list(paths), set()
    if len(listed) > MAX_PATH_ARGS:
        prefix = os.path.join(str(root), "")  # the paths are resolved ones inside root
        restrict = {str(p)[len(prefix):] if str(p).startswith(prefix)
                    else os.path.relpath(p, root) for p in listed}
        listed = []
    query = SourceQuery(root=root, terms=terms.literals(), paths=listed,
                        globs=list(globs), max_filesize=host.settings.max_file_bytes,
                        explain=explain)
    try:
        hits = source.search(query)
    except SlmRerankError:
        raise
    except Exception as exc:
        raise SearchError(f"candidate source '{source.name}' failed on "
                          f"{display_path(str(root))}: "
                          f"{type(exc).__name__}: {exc}") from exc
    if restrict:
        kept = [f for f in hits.files if _within(f, restrict)]
        keep = set(kept)
        hits = SourceHits(files=kept, skipped=hits.skipped,
                          body_counts={p: c for p, c in hits.body_counts.items() if p in keep},
                          sizes={p: n for p, n in hits.sizes.items() if p in keep})
    for path, why in sorted(hits.skipped.items()):
        notes.append(f"skipped {display_path(path)}: {why}")
    for glob in globs_matching_nothing(list(globs), hits.files):
        notes.append(f"glob '{display_path(glob)}' matches no file")
    stats = TermStats.from_hits(terms, hits)
    sizes = _sizes(root, [p for p in hits.body_counts if p not in hits.sizes])
    sizes.update((p, n) for p, n in hits.sizes.items() if p in hits.body_counts)
    evidence = score_files(terms, hits, stats, sizes)
    return Gathered(terms, source.name, hits, stats, evidence, sizes)
