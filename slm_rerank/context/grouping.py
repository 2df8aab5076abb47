"""Architectural slices: which vertical slice of a repository holds a file (``--by-slice``).

A slice is a folder directly under one of the configured slice roots: with the default
roots, ``packages/auth/src/login.py`` belongs to ``packages/auth`` and
``services/billing/api.go`` to ``services/billing``. A root without ``/`` matches a folder
of that name at any depth (the outermost one wins, so ``packages/auth/src/x/y.py`` is in
``packages/auth``, not ``packages/auth/src/x``); a root with ``/`` (``internal/handlers``)
is a path from the searched root, and wins over names (``./src``, ``a//b`` and ``x/../a``
are read as the paths they name; ``""``, ``/``, ``.`` and ``..`` name no folder under the
searched root and match nothing). A slice is named by its whole path from
the searched root, and a folder that is itself a root name is not a slice:
``src/features/auth/x.ts`` is in ``src/features/auth``, not ``src/features``. A
file directly inside a root, or outside every root, has no slice; such files form one group
of their own.
"""

from __future__ import annotations

import posixpath
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache


@lru_cache(maxsize=8)  # one query asks for each result's slice with the same roots
def _parse_roots(roots: tuple[str, ...]) -> tuple[frozenset[str], tuple[tuple[str, ...], ...]]:
    """(folder names, anchored paths as parts) of ``roots``.

    A root is a path from the searched root when it holds a ``/`` inside or starts with
    ``./``; it is read as the path it names (``./a``, ``a//b``, ``x/../a/b``), and one that
    names no folder under the searched root (``""``, ``/``, ``.``, ``..``) is ignored.
    """
    names: set[str] = set()
    anchored: list[tuple[str, ...]] = []
    for root in roots:
        bare = root.strip("/")
        normal = posixpath.normpath(bare) if bare else "."
        if normal == "." or normal == ".." or normal.startswith("../"):
            continue
        if "/" in bare:
            anchored.append(tuple(normal.split("/")))
        else:
            names.add(normal)
    return frozenset(names), tuple(anchored)


def slice_of(path: str, roots: Sequence[str]) -> str | None:
    """The slice (``root/name``) holding ``path`` (relative, ``/``-separated), if any."""
    folders = path.split("/")[:-1]  # the last part is the file itself
    names, anchored = _parse_roots(tuple(roots))
    for parts in anchored:
        width = len(parts)
        if tuple(folders[:width]) == parts and width < len(folders):
            return "/".join(folders[:width + 1])
    for i, folder in enumerate(folders[:-1]):
        # ``src/features/auth``: the slice is src/features/auth, not src/features.
        if folder in names and folders[i + 1] not in names:
            return "/".join(folders[:i + 2])
    return None


@dataclass
class SliceGroup:
    """One slice's results, in rank order; ``name`` None for the files outside any slice."""

    name: str | None
    #: indices into the report's results
    members: list[int] = field(default_factory=list)
    best_score: float = 0.0


def group(slices: Sequence[str | None], scores: Sequence[float]) -> list[SliceGroup]:
    """Results grouped by slice, the slice with the best result first.

    ``slices[i]`` and ``scores[i]`` belong to the i-th result, which arrive in rank order,
    so each group keeps its results' order and a group's best score is its first result's.
    """
    groups: dict[str | None, SliceGroup] = {}
    for index, (name, score) in enumerate(zip(slices, scores, strict=True)):
        entry = groups.get(name)
        if entry is None:
            entry = groups[name] = SliceGroup(name, best_score=score)
        entry.members.append(index)
    # Stable: equal best scores keep the order of their first results.
    return sorted(groups.values(), key=lambda g: -g.best_score)
