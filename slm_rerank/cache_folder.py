"""The cache folder: where it is, and whether a query can write to it.

The folder is the user's (``cache_dir``, ``SLM_RERANK_CACHE_DIR`` or the platform's user
cache dir), never a searched repository: a repository's own config cannot set it. It holds
the chunk cache (``lexical/chunk_cache.py``), the score cache (``model/score_cache.py``),
the usage log (``usage.py``), the prompt hook's repository vocabularies
(``hook/vocabulary.py``) and the managed server's files (``llama/``).
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path

from slm_rerank.config import APP_NAME, Settings
from slm_rerank.errors import ConfigError


def cache_path(settings: Settings) -> Path:
    """The cache folder: ``cache_dir`` if set, else the platform's user cache dir."""
    if settings.cache_dir:
        return Path(settings.cache_dir).expanduser()
    from platformdirs import user_cache_path

    return user_cache_path(APP_NAME)


def _unwritable(folder: Path) -> str | None:
    """Why ``folder`` cannot be created or written, or None when it can (it is created)."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        # per thread too: threads of one process removed each other's probe (ENOENT)
        probe = folder / f".write-test-{os.getpid()}-{threading.get_ident()}"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as exc:
        return exc.strerror or str(exc)
    return None


def ensure_writable(folder: Path) -> Path:
    """Create ``folder`` if needed and prove it is writable, or raise ConfigError.

    For what cannot work without the folder (a managed server's state); a query uses
    ``usable_folder`` and goes on without its caches.
    """
    why = _unwritable(folder)
    if why is not None:
        raise ConfigError(f"cache folder {folder} is not writable ({why}); set cache_dir or "
                          "SLM_RERANK_CACHE_DIR to a writable folder")
    return folder


@dataclass(frozen=True)
class CacheFolder:
    """The cache folder a query writes to; ``path`` None when it cannot, ``warning`` why."""

    path: Path | None
    warning: str | None = None


def usable_folder(folder: Path) -> CacheFolder:
    """``folder`` if it is writable, else no folder and a one-line warning.

    The caches and the usage log only save time and keep a record: a read-only or
    uncreatable folder must not cost the query its answer (it made even --fast exit 1).
    """
    why = _unwritable(folder)
    if why is None:
        return CacheFolder(folder)
    return CacheFolder(None, f"cache folder {folder} is not writable ({why}): this query "
                             "runs without the slice and score caches and the usage log; set "
                             "cache_dir or SLM_RERANK_CACHE_DIR to a writable folder")


def prune_entries(folder: Path, kept: int, spare: Collection[Path] = ()) -> None:
    """Remove all but the ``kept`` ``*.json`` entries of ``folder`` written last, and never
    one of ``spare``: a cache with an entry per root or per commit grows without end
    otherwise. Best effort: what cannot be listed or removed stays."""
    try:
        found = [(e.stat(follow_symlinks=False).st_mtime_ns, Path(e.path))
                 for e in os.scandir(folder) if e.name.endswith(".json")]
    except OSError:
        return
    found.sort(reverse=True)
    for _, old in found[kept:]:
        if old not in spare:
            with contextlib.suppress(OSError):
                os.unlink(old)
