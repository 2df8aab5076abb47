"""`slm-rerank cache stats` and `cache clear`: the model score cache."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import click

from slm_rerank.cli.terminal import emit, fail, text_or_json


@click.group()
def cache() -> None:
    """Inspect or clear the model score cache."""

@cache.command("stats")
@text_or_json
def cache_stats(format_name: str) -> None:
    """How many scores are cached, for how many queries and models."""
    stats = _with_cache(lambda c: c.stats())
    if format_name == "json":
        emit(json.dumps(vars(stats), indent=2) + "\n")
        return
    lines = [f"{stats.entries} scores for {stats.queries} queries in {stats.path} "
             f"({stats.bytes / 1e6:.1f} MB)"]
    lines += [f"  {model}: {n}" for model, n in stats.by_model.items()]
    emit("".join(line + "\n" for line in lines))

@cache.command("clear")
@click.option("--query", metavar="TEXT", help="Only the scores of this query.")
def cache_clear(query: str | None) -> None:
    """Delete cached scores (all, or one query's)."""
    if query is None and (removed := _discard_unusable()):
        emit(f"deleted the unusable score cache {removed}\n")
        return
    gone = _with_cache(lambda c: c.clear(query))
    emit(f"{gone} cached scores deleted\n")




def _discard_unusable() -> str | None:
    """Delete a score cache that cannot be opened or read (not one that is only locked).

    The error for a broken cache tells the user to run `cache clear`, so clearing everything
    must work on exactly such a file: its rows cannot be deleted one by one.
    """
    from slm_rerank.cache_folder import cache_path
    from slm_rerank.config import load_settings
    from slm_rerank.errors import SlmRerankError
    from slm_rerank.model.score_cache import ScoreCache, discard

    try:
        folder = cache_path(load_settings())
        try:
            store = ScoreCache(folder)
            try:
                store.stats()
            finally:
                store.close()
        except SlmRerankError as exc:
            if "cache clear" not in str(exc):
                raise
            return ", ".join(str(p) for p in discard(folder)) or None
    except SlmRerankError as exc:
        fail(str(exc))
    return None


def _with_cache(action: Callable[[Any], Any]) -> Any:
    from slm_rerank.cache_folder import cache_path
    from slm_rerank.config import load_settings
    from slm_rerank.errors import SlmRerankError
    from slm_rerank.model.score_cache import ScoreCache

    try:
        store = ScoreCache(cache_path(load_settings()))
        try:
            return action(store)
        finally:
            store.close()
    except SlmRerankError as exc:
        fail(str(exc))
