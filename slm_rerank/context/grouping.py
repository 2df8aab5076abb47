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

A wrapper folder is looked through. On the most common Python layouts all the code sits in
one package (``src/<package>/``, or ``<package>/`` at the top), so the roots alone would give
one slice for everything. ``wrapper_of`` finds, from the files in scope, the folder that holds
nearly all (``NEARLY_ALL``) of the program source, going down while one subfolder holds nearly
all of what is below it: ``src/pkg`` in a src layout, ``pkg`` for a top-level package. Below
it each subfolder is a slice (``src/pkg/lexical``, ``src/pkg/model``) and the files directly
in it form the slice named by the wrapper itself (``src/pkg``). The roots still decide where
they name a slice inside the wrapper, or one that does not hold it (a monorepo's
``packages/auth`` stays ``packages/auth`` unless that package is nearly the whole code).
"""

from __future__ import annotations

import posixpath
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache

from slm_rerank.lexical.filetypes import path_kind

#: the share of the program source below a folder that makes one subfolder a wrapper to look
#: through: 0.8 takes pytest's ``src/_pytest`` (its scripts and benchmarks beside it) and
#: xarray's ``xarray`` (its ``asv_bench`` beside it), not a monorepo's larger package
NEARLY_ALL = 0.8


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


def wrapper_of(files: Iterable[str]) -> str | None:
    """The folder that holds nearly all of the program source among ``files``, if any.

    From the searched root down: while one subfolder holds at least NEARLY_ALL of the source
    files below the current folder (the files directly in it count against it), go into it.
    Tests, docs and non-source files are not counted: a src layout has its tests and docs
    beside the package. None when no folder at the top holds nearly all of it.
    """
    below = [f.split("/") for f in files if path_kind(f) == "source"]
    depth = 0
    while below:
        counts = Counter(parts[depth] if len(parts) > depth + 1 else None for parts in below)
        name, count = counts.most_common(1)[0]
        if name is None or count < NEARLY_ALL * len(below):
            break
        below = [parts for parts in below if len(parts) > depth + 1 and parts[depth] == name]
        depth += 1
    if depth == 0:
        return None
    return "/".join(below[0][:depth])


def slice_of(path: str, roots: Sequence[str], wrapper: str | None = None) -> str | None:
    """The slice holding ``path`` (relative, ``/``-separated), if any.

    ``wrapper`` (``wrapper_of`` the files in scope) is looked through: a file below it whose
    roots name no slice, or one that holds the wrapper, is in the wrapper's subfolder (a
    root name there is not a slice: ``src/pkg/features/auth``), or in the wrapper's own
    slice when it sits directly in it.
    """
    names, anchored = _parse_roots(tuple(roots))
    folders = path.split("/")[:-1]  # the last part is the file itself
    named = _by_paths(folders, anchored) or _by_names(folders, names)
    if wrapper is None or not path.startswith(wrapper + "/"):
        return named
    if named is not None and not (wrapper + "/").startswith(named + "/"):
        return named  # the roots name a slice inside the wrapper
    inside = folders[wrapper.count("/") + 1:]
    if not inside:
        return wrapper
    if inside[0] in names:
        return f"{wrapper}/{_by_names(inside, names) or inside[0]}"
    return f"{wrapper}/{inside[0]}"


def _by_paths(folders: list[str], anchored: tuple[tuple[str, ...], ...]) -> str | None:
    """The slice an anchored root (a path from the searched root) gives these folders."""
    for parts in anchored:
        width = len(parts)
        if tuple(folders[:width]) == parts and width < len(folders):
            return "/".join(folders[:width + 1])
    return None


def _by_names(folders: list[str], names: frozenset[str]) -> str | None:
    """The slice a root name gives these folders: the folder under the outermost one."""
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
