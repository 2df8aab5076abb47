"""The model flags (``-e``, ``--host``, ``--model``, ...) and their checks, declared once.

search, ``serve-api``, ``mcp`` and ``endpoints`` each take the flags of this table they need
(``@model_options(only=...)``); a flag's destination is its name in
``slm_rerank.overrides.overrides``, which says which setting it overrides.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import fields
from typing import Any

import click

from slm_rerank.config_keys import CASCADE_RULE, SCAN_HOST, SCAN_PORTS_SHOWN, Settings
from slm_rerank.registrations import SERVER_KINDS

Decorator = Callable[[Callable[..., Any]], Callable[..., Any]]


def _default(key: str) -> Any:
    """The built-in default of setting ``key``, for a flag's help."""
    [found] = [f.default for f in fields(Settings) if f.name == key]
    return found


def _flags() -> dict[str, Decorator]:
    """Every model flag, in the order --help lists them, by its name in ``overrides``."""
    return {
        "model": click.option(
            "--model", metavar="NAME",
            help="Model profile (gemma, qwen, lfm, rwkv, openai, ...); default: the one that "
                 "claims the server's model id."),
        "base_url": click.option(
            "-e", "--base-url", "base_url", metavar="URL", multiple=True, callback=_base_urls,
            help="Model server URL; repeat for several servers of one model (least-loaded "
                 "first); default: SLM_ENDPOINT, the config, then a scan of --host on ports "
                 f"{SCAN_PORTS_SHOWN}."),
        "host": click.option(
            "--host", metavar="HOST", callback=_check_host,
            help=f"Host to scan for a model server (default {SCAN_HOST})."),
        "api": click.option(
            "--api", type=click.Choice(SERVER_KINDS),
            help="How to ask the server (default: as probed; openai-chat sends real chat "
                 "messages)."),
        "local": click.option(
            "--local", "local", flag_value=True, default=None,
            help="With no model server running, start the managed one (slm-rerank serve "
                 "--background) when one is needed: the model serve_model names, bundled "
                 "or judge; it stops after serve_idle s."),
        "scorer": click.option(
            "--scorer", metavar="NAME",
            help="How each chunk or document is judged (default: the scorer setting, "
                 f"{_default('scorer')})."),
        "rerank_top": click.option(
            "--rerank-top", "rerank_top", type=click.IntRange(min=1),
            help=f"Chunks of the lexical head the model judges (default "
                 f"{_default('rerank_top')})."),
        "full": click.option(
            "--full", is_flag=True, default=None,
            help="Judge every kept chunk, not only the head."),
        "threshold": click.option(
            "--threshold", type=click.FloatRange(0.0, 1.0), callback=_finite,
            help="Drop judged results whose P(relevant), the judge's own score, is below "
                 "this (default: unset, nothing is dropped)."),
        "timeout": click.option(
            "--timeout", type=click.FloatRange(min=0.1), callback=_finite,
            help="Seconds the model may take for one search or request; then what was "
                 "scored is kept."),
        "budget": click.option(
            "--budget", metavar="TOKENS|Ns", callback=_budget,
            help="Cap one query's model work: prompt tokens the server reads (--budget "
                 "2000) or seconds (--budget 20s); the passages past it keep their lexical "
                 "order. off: no cap."),
        "cascade": click.option(
            "--cascade/--no-cascade", default=None,
            help=f"{CASCADE_RULE[0].upper()}{CASCADE_RULE[1:]}."),
        "cache": click.option(
            "--no-cache", "cache", flag_value=False, default=None,
            help="Do not read or write the score cache."),
        "expand": click.option(
            "--expand", is_flag=True, default=None,
            help="Ask the model for words the query lacks and search for them too (half "
                 "weight); contacts the server even with --fast."),
    }


def model_options(command: Callable[..., Any] | None = None, *,
                  only: Iterable[str] | None = None) -> Any:
    """Add the model flags to a click command: all of them (``@model_options``, the search)
    or the ones named (``@model_options(only=("base_url", "host"))``).

    Each flag's value reaches the command under its name in ``MODEL_FLAGS``; ``-e`` given
    more than once also sets ``endpoints``, so a command takes them as ``**flags`` and hands
    them to ``overrides(**flags)``.
    """
    table = _flags()
    names = tuple(only) if only is not None else MODEL_FLAGS
    unknown = [name for name in names if name not in table]
    if unknown:
        raise ValueError(f"no model flag {', '.join(unknown)}; known: {', '.join(table)}")

    def decorate(function: Callable[..., Any]) -> Callable[..., Any]:
        for name in reversed([n for n in table if n in names]):
            function = table[name](function)
        return function

    return decorate(command) if command is not None else decorate


def _finite(ctx: click.Context, param: click.Parameter, value: float | None
            ) -> float | None:
    # FloatRange lets nan through (every comparison with it is false) and inf past a
    # lower bound: both are a usage error, not a setting for the config checks to refuse.
    if value is not None and not math.isfinite(value):
        raise click.BadParameter(f"{value} is not a finite number", ctx, param)
    return value


def _budget(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    if value is None:
        return None
    from slm_rerank.errors import ConfigError
    from slm_rerank.model.judge_budget import parse_budget

    try:
        parse_budget(value)
    except ConfigError as exc:
        raise click.BadParameter(str(exc), ctx, param) from None
    return value


def _base_urls(ctx: click.Context, param: click.Parameter, values: tuple[str, ...]
               ) -> str | None:
    """One -e is the ``base_url`` setting; several are the ``endpoints`` list.

    The list goes into the command's parameters as ``endpoints``, the setting it overrides.
    """
    if not values:
        return None
    from slm_rerank.errors import ConfigError
    from slm_rerank.model.discovery import check_base_url

    if len(values) == 1:
        # checked now, as a bad --host is: found by the model stage, it was an exit 1
        try:
            check_base_url(values[0])
        except ConfigError as exc:
            raise click.BadParameter(str(exc), ctx, param) from None
        return values[0]

    urls: list[str] = []
    for value in values:
        try:
            url = check_base_url(value)
        except ConfigError as exc:
            raise click.BadParameter(str(exc), ctx, param) from None
        if url in urls:
            raise click.BadParameter(f"{url} is given twice; give each server once",
                                     ctx, param)
        urls.append(url)
    ctx.params["endpoints"] = urls
    return None


def _check_host(ctx: click.Context, param: click.Parameter, value: str | None
                ) -> str | None:
    if value is None:  # click calls this for every search: no httpx for --fast
        return None
    from slm_rerank.errors import ConfigError
    from slm_rerank.model.discovery import check_host

    try:
        return check_host(value)
    except ConfigError as exc:
        raise click.BadParameter(str(exc), ctx, param) from None


#: the flags a search takes: all of them, in the order --help lists them
MODEL_FLAGS = tuple(_flags())
