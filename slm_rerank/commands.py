"""Click commands: search (the default), plugins, config, stats."""

from __future__ import annotations

import json
import os
import stat
import sys
from pathlib import Path

import click

from slm_rerank import __version__
from slm_rerank.config import (
    KEYS,
    ConfigError,
    cache_path,
    describe,
    load_settings,
    repo_config_path,
    repo_root,
    user_config_path,
    write_setting,
)
from slm_rerank.host import Host
from slm_rerank.registry import RegistrationError

#: How long an open pipe on stdin may stay silent before it is taken to hold no file list.
STDIN_WAIT_SECONDS = 2.0


class DefaultSearchGroup(click.Group):
    """`slm-rerank -q ...` means `slm-rerank search -q ...`."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if not args or (args[0] not in self.commands and args[0] not in ("--help", "-h",
                                                                          "--version")):
            args = ["search", *args]
        return super().parse_args(ctx, args)


def fail(message: str) -> None:
    """Print a one-line error and exit 1."""
    click.echo(f"slm-rerank: error: {message}", err=True)
    sys.exit(1)


@click.group(cls=DefaultSearchGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="slm-rerank")
def cli() -> None:
    """Find where in a codebase the answer to a question lives.

    \b
    slm-rerank -q "where are retries configured" [PATHS]...
    slm-rerank plugins --all
    slm-rerank config show
    """


def _read_query(query: str | None, query_file: str | None) -> str:
    if query is not None and query_file is not None:
        raise click.UsageError("give either -q/--query or --query-file, not both")
    if query_file is not None:
        if query_file == "-":
            return sys.stdin.read()
        try:
            return Path(query_file).read_text(encoding="utf-8", errors="replace")
        except OSError as exc:
            raise click.BadParameter(f"cannot read {query_file}: {exc.strerror}",
                                     param_hint="--query-file") from None
    if query is None:
        raise click.UsageError("no query: pass -q TEXT or --query-file PATH")
    return query


def _stdin_paths() -> list[str]:
    """File names piped on stdin (`git ls-files | slm-rerank -q ...`); `path:line` -> path."""
    try:
        mode = os.fstat(sys.stdin.fileno()).st_mode
    except (OSError, ValueError, AttributeError):
        return []
    if not (stat.S_ISFIFO(mode) or stat.S_ISREG(mode)):
        return []
    if stat.S_ISFIFO(mode):
        import select

        # A caller may leave stdin open and idle (an agent's shell, a service): never hang.
        readable, _, _ = select.select([sys.stdin], [], [], STDIN_WAIT_SECONDS)
        if not readable:
            click.echo(f"slm-rerank: stdin is an open pipe that sent nothing in "
                       f"{STDIN_WAIT_SECONDS:.0f} s; searching without a file list", err=True)
            return []
    paths = []
    for line in sys.stdin.read().splitlines():
        line = line.strip()
        if not line:
            continue
        head, sep, tail = line.partition(":")
        if sep and tail.split(":", 1)[0].isdigit() and not Path(line).exists():
            line = head
        paths.append(line)
    return paths


@cli.command()
@click.option("-q", "--query", help="The question, e.g. 'where are retries configured'.")
@click.option("--query-file", metavar="PATH", help="Read the query from a file ('-' for stdin).")
@click.argument("paths", nargs=-1)
@click.option("--root", type=click.Path(file_okay=False, path_type=Path),
              help="Repository to search (default: the one holding the current directory).")
@click.option("--fast", is_flag=True, help="Lexical ranking only; no model server is contacted.")
@click.option("-k", "--top-k", "top_k", type=click.IntRange(min=1), help="Number of results.")
@click.option("--chunks/--files", "chunks", default=None,
              help="List chunks instead of one result per file.")
@click.option("--format", "format_name", metavar="NAME", help="Output format (text, json, ...).")
@click.option("--caller", default=None, help="Who is asking, for the usage log (default: cli).")
@click.option("-v", "--verbose", is_flag=True, help="Explain skipped files and sources on stderr.")
def search(query: str | None, query_file: str | None, paths: tuple[str, ...], root: Path | None,
           fast: bool, top_k: int | None, chunks: bool | None, format_name: str | None,
           caller: str | None, verbose: bool) -> None:
    """Rank the places in a repository that answer QUERY (the default command)."""
    from slm_rerank.api import search as run
    from slm_rerank.pipeline import QueryError, SearchError

    text = _read_query(query, query_file)
    if not text.strip():
        raise click.UsageError("the query is empty")
    flags = {"top_k": top_k, "chunks": chunks, "format": format_name}
    try:
        host = Host.from_environment(start=root or Path.cwd(), flags=flags)
        settings = host.settings
        formatters = host.registry.formatters()
        if settings.format not in formatters:
            available = ", ".join(sorted(formatters)) or "none installed"
            raise click.UsageError(
                f"unknown format '{settings.format}' (from {settings.origins['format']}); "
                f"available: {available}"
            )
        report = run(
            text, root, paths=paths, fast=fast, host=host,
            piped_paths=[] if query_file == "-" else _stdin_paths(),
            caller=caller or os.environ.get("SLM_RERANK_CALLER", "cli"),
        )
    except QueryError as exc:
        raise click.UsageError(str(exc)) from None
    except (ConfigError, RegistrationError, SearchError) as exc:
        fail(str(exc))
        return
    for note in report.notes if verbose else []:
        click.echo(f"slm-rerank: {note}", err=True)
    if report.degraded:
        click.echo(f"slm-rerank: degraded: {report.degraded.reason}", err=True)
    output = formatters[settings.format].render(report, tty=sys.stdout.isatty())
    click.echo(output, nl=not output.endswith("\n") and bool(output))




@cli.command()
@click.option("--all", "show_all", is_flag=True, help="Include the built-in plugins.")
@click.option("--format", "format_name", type=click.Choice(["text", "json"]), default="text")
def plugins(show_all: bool, format_name: str) -> None:
    """List installed plugins: distribution, version, hooks and what each registers."""
    try:
        host = Host.from_environment()
    except ConfigError as exc:
        fail(str(exc))
        return
    try:
        names = host.registry.names_by_plugin()
    except RegistrationError as exc:
        fail(str(exc))
        return
    rows = []
    for info in sorted(host.infos.values(), key=lambda i: i.name):
        if info.builtin and not show_all:
            continue
        rows.append({
            "name": info.name, "distribution": info.distribution, "version": info.version,
            "builtin": info.builtin, "hooks": info.hooks,
            "registers": names.get(info.name, {}), "error": info.error,
        })
    if format_name == "json":
        click.echo(json.dumps(rows, indent=2))
        return
    if not rows:
        click.echo("no plugins installed beyond the built-ins (see --all)")
    for row in rows:
        status = f"  FAILED: {row['error']}" if row["error"] else ""
        click.echo(f"{row['name']}  {row['distribution']} {row['version']}{status}")
        for hook, registered in row["registers"].items():
            click.echo(f"    {hook}: {', '.join(registered)}")


@cli.group()
def config() -> None:
    """Show or change settings."""


@config.command("show")
@click.option("--format", "format_name", type=click.Choice(["text", "json"]), default="text")
def config_show(format_name: str) -> None:
    """Print every effective setting with where its value came from."""
    try:
        settings = load_settings()
    except ConfigError as exc:
        fail(str(exc))
        return
    values = {key: getattr(settings, key) for key in KEYS}
    if format_name == "json":
        doc = {k: {"value": v, "origin": settings.origins[k], "help": describe(k)}
               for k, v in values.items()}
        click.echo(json.dumps(doc, indent=2))
        return
    width = max(len(k) for k in KEYS)
    for key, value in values.items():
        shown = json.dumps(value)
        click.echo(f"{key:<{width}} = {shown:<24} # {settings.origins[key]}")


@config.command("set")
@click.argument("key")
@click.argument("value")
@click.option("--repo", "to_repo", is_flag=True,
              help="Write the repository's .slm-rerank.toml instead of the user config.")
def config_set(key: str, value: str, to_repo: bool) -> None:
    """Set KEY to VALUE in the user config (or, with --repo, the repository's file)."""
    if key not in KEYS:
        raise click.BadParameter(f"unknown key '{key}' (known keys: {', '.join(KEYS)})",
                                 param_hint="KEY")
    if to_repo:
        here = Path.cwd()
        path = repo_config_path(here) or (repo_root(here) or here) / ".slm-rerank.toml"
    else:
        path = user_config_path()
    try:
        stored = write_setting(path, key, value)
    except ConfigError as exc:
        fail(str(exc))
        return
    click.echo(f"{key} = {json.dumps(stored)}  # written to {path}")


@cli.command()
@click.option("--format", "format_name", type=click.Choice(["text", "json"]), default="text")
def stats(format_name: str) -> None:
    """Summarise the usage log: query count and median latency by caller."""
    from slm_rerank.usage import summarize

    try:
        folder = cache_path(load_settings())
    except ConfigError as exc:
        fail(str(exc))
        return
    summary = summarize(folder)
    if format_name == "json":
        click.echo(json.dumps({
            "queries": summary.queries,
            "by_caller": [vars(c) for c in summary.by_caller],
            "skipped_lines": summary.skipped_lines,
        }, indent=2))
        return
    click.echo(f"{summary.queries} queries logged in {folder / 'usage.jsonl'}")
    for c in summary.by_caller:
        click.echo(f"  {c.caller:<16} {c.queries:>6} queries  median {c.median_latency_ms:.0f} ms")
    if summary.skipped_lines:
        click.echo(f"  ({summary.skipped_lines} unreadable lines skipped)")
