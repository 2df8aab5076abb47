"""What a caller sets for one run (a flag, a keyword argument), as the settings keys it sets.

The CLI's flags, ``serve-api``, ``mcp``, ``search()``, ``Reranker`` and ``rerank_documents``
all name their values as their users write them (``cache``, ``--local``); this is the one
place that says which setting each one overrides. Free of click: the Python API uses it.
``Host.with_overrides`` is the one place that puts them in.
"""

from __future__ import annotations

from typing import Any


def overrides(*, model: str | None = None, base_url: str | None = None,
              endpoints: list[str] | None = None, host: str | None = None,
              api: str | None = None, local: bool | None = None, scorer: str | None = None,
              rerank_top: int | None = None, full: bool | None = None,
              threshold: float | None = None, timeout: float | None = None,
              cache: bool | None = None, top_k: int | None = None, chunks: bool | None = None,
              format: str | None = None, budget: str | None = None,
              cascade: bool | None = None,
              learned_order: bool | None = None,
              ask_judge_anyway: bool | None = None) -> dict[str, Any]:
    """The settings these values override, by settings key; None means "not given".

    ``local`` is ``--local`` (``auto_serve``), ``cache`` is ``--no-cache`` or ``cache=``
    (``score_cache``), ``endpoints`` is ``-e`` given more than once, ``budget`` is
    ``--budget`` ("2000" tokens, "20s" seconds, "off": no cap, which lifts a configured
    one: ``budget_tokens`` and ``budget_seconds``), ``learned_order`` is
    ``--learned-order/--fixed-order``, ``ask_judge_anyway`` is ``--ask-judge``. What is
    left out is decided by the settings layers (config files, environment, defaults).
    """
    given: dict[str, Any] = {
        "model": model, "base_url": base_url, "endpoints": endpoints, "host": host,
        "api": api, "auto_serve": local, "scorer": scorer, "rerank_top": rerank_top,
        "full": full, "threshold": threshold, "timeout": timeout, "score_cache": cache,
        "top_k": top_k, "chunks": chunks, "format": format, "cascade": cascade,
        "learned_order": learned_order, "ask_judge_anyway": ask_judge_anyway,
    }
    out = {key: value for key, value in given.items() if value is not None}
    if budget is not None:
        from slm_rerank.model.judge_budget import parse_budget

        parsed = parse_budget(budget)
        out["budget_tokens"], out["budget_seconds"] = parsed.tokens, parsed.seconds
    return out

