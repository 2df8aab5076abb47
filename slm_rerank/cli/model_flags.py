"""The command line of the model stage: the search flags, `endpoints` and `cache`."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from typing import Any

import click

from slm_rerank.cli.terminal import emit, fail
from slm_rerank.report import visible


def model_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """The search command's model-stage flags; each overrides the setting of its name."""
    options = [
        click.option("--model", metavar="NAME",
                     help="Model profile (gemma, qwen, lfm, rwkv, openai, ...); default: the "
                          "one that claims the server's model id."),
        click.option("-e", "--base-url", "base_url", metavar="URL", multiple=True,
                     callback=_base_urls,
                     help="Model server URL; repeat for several servers of one model "
                          "(least-loaded first); default: scan --host on ports 8033-8040."),
        click.option("--host", metavar="HOST", callback=_check_host,
                     help="Host to scan for a model server (default 127.0.0.1)."),
        click.option("--api", type=click.Choice(["llama.cpp", "openai-completions",
                                                 "openai-chat", "ollama"]),
                     help="How to ask the server (default: as probed; openai-chat sends "
                          "real chat messages)."),
        click.option("--local", "auto_serve", flag_value=True, default=None,
                     help="With no model server running, start the bundled one (slm-rerank "
                          "serve --background) and use it; it stops after serve_idle s."),
        click.option("--scorer", metavar="NAME", help="How chunks are judged (default yesno)."),
        click.option("--rerank-top", "rerank_top", type=click.IntRange(min=1),
                     help="Chunks of the lexical head the model judges (default 16)."),
        click.option("--full", is_flag=True, default=None,
                     help="Judge every kept chunk, not only the head."),
        click.option("--threshold", type=click.FloatRange(0.0, 1.0), callback=_finite,
                     help="Drop results whose fused score is below this (default 0.65)."),
        click.option("--timeout", type=click.FloatRange(min=0.1), callback=_finite,
                     help="Seconds the model may take; then what was scored is kept."),
        click.option("--no-cache", "score_cache", flag_value=False, default=None,
                     help="Do not read or write the score cache."),
        click.option("--expand", is_flag=True, default=None,
                     help="Ask the model for words the query lacks and search for them too "
                          "(half weight); contacts the server even with --fast."),
    ]
    for option in reversed(options):
        command = option(command)
    return command


def _finite(ctx: click.Context, param: click.Parameter, value: float | None
            ) -> float | None:
    # FloatRange lets nan through (every comparison with it is false) and inf past a
    # lower bound: both are a usage error, not a setting for the config checks to refuse.
    if value is not None and not math.isfinite(value):
        raise click.BadParameter(f"{value} is not a finite number", ctx, param)
    return value


def _base_urls(ctx: click.Context, param: click.Parameter, values: tuple[str, ...]
               ) -> str | None:
    """One -e is the ``base_url`` setting; several are the ``endpoints`` list.

    The list goes into the command's parameters as ``endpoints``, the setting it overrides.
    """
    if len(values) < 2:
        return values[0] if values else None
    from slm_rerank.errors import ConfigError
    from slm_rerank.model.discovery import check_base_url

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


def register(cli: click.Group) -> None:
    """Add `endpoints` and `cache` to the command group."""

    @cli.command()
    @click.option("--host", metavar="HOST", callback=_check_host,
                  help="Host to scan (default 127.0.0.1).")
    @click.option("-e", "--base-url", "base_urls", metavar="URL", multiple=True,
                  help="Probe this URL only; repeat for several.")
    @click.option("--format", "format_name", type=click.Choice(["text", "json"]),
                  default="text")
    def endpoints(host: str | None, base_urls: tuple[str, ...], format_name: str) -> None:
        """List the model servers that answer, and why each other port does not."""
        from slm_rerank.config import load_settings
        from slm_rerank.errors import ConfigError, SlmRerankError
        from slm_rerank.host import Host
        from slm_rerank.model import discovery
        from slm_rerank.model.profiles import choose_profile

        try:
            settings = load_settings(flags={"host": host})
            # every -e given (the last alone was probed), else base_url from env or config
            urls = list(base_urls) or ([settings.base_url] if settings.base_url else [])
            scan_host = settings.host or discovery.DEFAULT_HOST
            import asyncio  # not at the top: every search registers these commands

            from slm_rerank.cache_folder import cache_path

            # the managed server may listen off the scanned ports (serve --port 8235)
            managed = None if urls else discovery.managed_url(cache_path(settings), scan_host)
            probes = asyncio.run(_probe(discovery, urls, scan_host, managed))
            profiles = Host(settings).registry.profiles()
            rows = []
            for p in probes:
                choice, reason = None, p.reason
                if p.endpoint is not None:
                    # One server whose model id two profiles claim equally must not hide
                    # the others: its row says so.
                    try:
                        choice = choose_profile(profiles, model_id=p.endpoint.model_id,
                                                requested=settings.model)
                    except ConfigError as exc:
                        reason = str(exc)
                rows.append({
                    "url": p.url, "kind": p.endpoint.kind if p.endpoint else None,
                    "model_id": p.endpoint.model_id if p.endpoint else None,
                    "slots": p.endpoint.slots if p.endpoint else None,
                    "profile": choice.profile.name if choice else None,
                    "reason": reason,
                })
        except SlmRerankError as exc:
            fail(str(exc))
            return
        if format_name == "json":
            emit(json.dumps(rows, indent=2) + "\n")
            return
        lines = []
        for row in rows:
            if row["kind"]:
                profile = row["profile"] or f"none ({row['reason']})"
                lines.append(f"{row['url']}  {row['kind']}  {row['model_id']}  "
                             f"profile {profile}  {row['slots']} slots"
                             + ("  (managed: slm-rerank serve status)"
                                if row["url"] == managed else ""))
            else:
                lines.append(f"{row['url']}  -  {row['reason']}")
        if not any(row["kind"] for row in rows):
            lines.append("no model server answers; start the bundled one (slm-rerank serve "
                         "--help) or your own and pass -e URL, or use --fast")
        # a model id and a reason are the server's words: one line each, nothing raw
        emit("".join(visible(line) + "\n" for line in lines))

    @cli.group()
    def cache() -> None:
        """Inspect or clear the model score cache."""

    @cache.command("stats")
    @click.option("--format", "format_name", type=click.Choice(["text", "json"]),
                  default="text")
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


async def _probe(discovery: Any, urls: list[str], host: str, managed: str | None
                 ) -> list[Any]:
    from slm_rerank.model.client import ModelClient

    async with ModelClient(timeout=5.0) as client:
        if urls:
            checked = [discovery.check_base_url(url, "-e") for url in urls]
            return await discovery.probe_all(client, checked, timeout=5.0)
        return await discovery.scan(host, also=[managed] if managed else [])


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
