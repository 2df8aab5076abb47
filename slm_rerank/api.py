"""The Python API: one call from a question to a Report, for scripts and RAG pipelines.

    import slm_rerank
    report = slm_rerank.pipeline("where are retries configured", root="~/src/app")
    for c in report.results:
        print(c.location, c.score, c.symbol)
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from pathlib import Path

from slm_rerank import usage
from slm_rerank.config import ConfigError, cache_path, ensure_writable
from slm_rerank.host import Host
from slm_rerank.pipeline import SearchRequest, run_search
from slm_rerank.report import Report


def search(
    query: str,
    root: str | os.PathLike[str] | None = None,
    *,
    paths: Sequence[str] = (),
    top_k: int | None = None,
    chunks: bool | None = None,
    fast: bool = True,
    caller: str = "python",
    host: Host | None = None,
    piped_paths: Sequence[str] = (),
) -> Report:
    """Rank the places under ``root`` (default: the repository holding the cwd) for ``query``.

    Settings come from the usual layers; ``top_k`` and ``chunks`` override them like flags.
    Raises ``SearchError`` (``QueryError`` for an unusable query), ``ConfigError`` or
    ``RegistrationError`` with a message naming what to fix. The query is logged to
    ``usage.jsonl`` under ``caller`` unless ``usage_log = false``.
    """
    started = time.perf_counter()
    root_path = Path(root).expanduser() if root is not None else None
    if host is None:
        host = Host.from_environment(start=root_path or Path.cwd(),
                                     flags={"top_k": top_k, "chunks": chunks})
    settings = host.settings
    cache_dir = ensure_writable(cache_path(settings))
    request = SearchRequest(
        query=query, root=root_path, paths=list(paths), piped_paths=list(piped_paths),
        fast=fast, top_k=settings.top_k, chunks=settings.chunks, cache_dir=cache_dir,
    )
    report = run_search(request, host)
    if settings.usage_log:
        try:
            usage.append(cache_dir, report, caller, (time.perf_counter() - started) * 1000)
        except OSError as exc:
            raise ConfigError(
                f"cannot append to {cache_dir / usage.LOG_NAME}: {exc.strerror}; set "
                "usage_log = false or cache_dir to a writable folder"
            ) from None
    return report
