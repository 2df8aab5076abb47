"""The user's path arguments, resolved against the working directory: the CLI/API edge.

The pipeline sees only what this module returns: an absolute root, files and folders
inside it, and globs relative to it.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from slm_rerank.config import repo_root
from slm_rerank.errors import SearchError
from slm_rerank.report import display_path

GLOB_CHARS = frozenset("*?[")


@dataclass
class Scope:
    root: Path
    paths: list[Path] = field(default_factory=list)
    globs: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def resolve_root(root: Path | None, cwd: Path) -> Path:
    """``root`` as an absolute folder, or the repository holding ``cwd`` (else ``cwd``)."""
    if root is not None:
        folder = root.expanduser()
        if not folder.is_absolute():
            folder = cwd / folder
        if not folder.is_dir():
            raise SearchError(f"root {display_path(str(folder))} does not exist or is not "
                              "a directory")
        return folder.resolve()
    return repo_root(cwd) or cwd.resolve()


def resolve_scope(root: Path, args: Sequence[str], piped: Sequence[str], cwd: Path) -> Scope:
    """Turn path arguments (must exist) and piped names (skipped when missing) into a Scope."""
    scope = Scope(root)
    for arg, must_exist in [(a, True) for a in args] + [(a, False) for a in piped]:
        candidate = Path(arg).expanduser()
        if not candidate.is_absolute():
            candidate = cwd / candidate
        if not candidate.exists() and GLOB_CHARS & set(arg):
            # a glob is written relative to where the user stands, like any other path
            scope.globs.append(os.path.relpath(os.path.abspath(cwd / arg), root))
            continue
        if not candidate.exists():
            if must_exist:
                raise SearchError(f"path '{display_path(arg)}' does not exist")
            scope.notes.append(f"skipped piped path '{display_path(arg)}': it does not exist")
            continue
        resolved = candidate.resolve()
        if resolved != root and root not in resolved.parents:
            raise SearchError(f"path '{display_path(arg)}' is outside the searched root "
                              f"{display_path(str(root))}; pass --root to search another "
                              "repository")
        scope.paths.append(resolved)
    if (args or piped) and not scope.paths and not scope.globs:
        raise SearchError("none of the given paths exist")
    return scope
