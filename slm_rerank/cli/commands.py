"""Click commands: search (the default), plugins, config, stats."""

from __future__ import annotations

import json
import os
import stat
import sys
from pathlib import Path
from typing import Any

import click

from slm_rerank import __version__
from slm_rerank.cli import model_flags as model_commands
from slm_rerank.cli.model_flags import model_options
from slm_rerank.cli.new_plugin import new_plugin
from slm_rerank.cli.terminal import emit, fail, visible, warn
from slm_rerank.config import (
    KEYS,
    ConfigError,
    Settings,
    describe,
    load_settings,
    parse_text,
    repo_config_path,
    repo_root,
    user_config_path,
    write_setting,
)
from slm_rerank.errors import SlmRerankError
from slm_rerank.host import CHOICE_KEYS, Host
from slm_rerank.plugins import RegistrationError

#: How long an open pipe on stdin may stay silent before it is taken to have said all it will.
STDIN_WAIT_SECONDS = 2.0
#: The longest query accepted from -q, --query-file or stdin: a whole issue fits many times
#: over, and a runaway source (``--query-file /dev/zero``) stops here instead of filling memory.
MAX_QUERY_BYTES = 1_000_000
_QUERY_LIMIT = f"{MAX_QUERY_BYTES // 1_000_000} MB"


class DefaultSearchGroup(click.Group):
    """`slm-rerank -q ...` means `slm-rerank search -q ...`."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if not args or (args[0] not in self.commands and args[0] not in ("--help", "-h",
                                                                          "--version")):
            args = ["search", *args]
        return super().parse_args(ctx, args)


@click.group(cls=DefaultSearchGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="slm-rerank")
def cli() -> None:
    """Find where in a codebase the answer to a question lives.

    \b
    slm-rerank -q "where are retries configured" [PATHS]...
    slm-rerank plugins --all
    slm-rerank config show
    """


def _too_long(where: str) -> str:
    return (f"{where} is longer than the query limit of {_QUERY_LIMIT} "
            f"({MAX_QUERY_BYTES} bytes); shorten it (the title and the traceback are enough)")


def _read_query_file(query_file: str) -> str:
    """At most MAX_QUERY_BYTES from ``query_file`` ('-': stdin), decoded with replacement."""
    try:
        if query_file == "-":
            data = sys.stdin.buffer.read(MAX_QUERY_BYTES + 1)
        else:
            with open(query_file, "rb") as handle:
                data = handle.read(MAX_QUERY_BYTES + 1)
    except OSError as exc:
        raise click.BadParameter(f"cannot read {query_file}: {exc.strerror}",
                                 param_hint="--query-file") from None
    if len(data) > MAX_QUERY_BYTES:
        where = "the query on stdin" if query_file == "-" else query_file
        raise click.BadParameter(_too_long(where), param_hint="--query-file")
    return data.decode("utf-8", errors="replace")


def _read_query(query: str | None, query_file: str | None) -> str:
    if query is not None and query_file is not None:
        raise click.UsageError("give either -q/--query or --query-file, not both")
    if query_file is not None:
        return _read_query_file(query_file)
    if query is None:
        raise click.UsageError("no query: pass -q TEXT or --query-file PATH")
    raw = query.encode("utf-8", errors="surrogateescape")
    if len(raw) > MAX_QUERY_BYTES:
        raise click.BadParameter(_too_long("the query"), param_hint="-q/--query")
    # Bytes argv could not decode mean nothing as words: replace them, as in a query file.
    return raw.decode("utf-8", errors="replace")


def _lines(data: bytes) -> str:
    count = len(data.splitlines())
    return f"{count} line" if count == 1 else f"{count} lines"


def _read_pipe(fd: int) -> bytes:
    """Everything an open pipe sends until EOF, or until it stays silent STDIN_WAIT_SECONDS.

    A caller may leave stdin open (an agent's shell, a service), idle or after a few lines:
    never hang on it. Each read waits at most STDIN_WAIT_SECONDS; on a silence what arrived is
    used, up to its last complete line, and one warning says so.
    """
    import select

    chunks: list[bytes] = []
    while True:
        readable, _, _ = select.select([fd], [], [], STDIN_WAIT_SECONDS)
        if not readable:
            break
        chunk = os.read(fd, 1 << 16)
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)
    data = b"".join(chunks)
    if not data:
        warn(f"stdin is an open pipe that sent nothing in {STDIN_WAIT_SECONDS:.0f} s; "
             f"searching without a file list")
        return data
    # A name cut off mid-write could widen the search ("src/app.py" arriving as "src").
    complete, _, partial = data.rpartition(b"\n")
    dropped = f"; dropped the unfinished last line {os.fsdecode(partial)!r}" if partial else ""
    warn(f"stdin is an open pipe that went silent for {STDIN_WAIT_SECONDS:.0f} s without "
         f"closing; using the {_lines(complete)} it sent{dropped}")
    return complete


def _stdin_paths() -> list[str]:
    """File names piped on stdin (`git ls-files | slm-rerank -q ...`); `path:line` -> path."""
    try:
        fd = sys.stdin.fileno()
        mode = os.fstat(fd).st_mode
    except (OSError, ValueError, AttributeError):
        return []
    if stat.S_ISFIFO(mode):
        data = _read_pipe(fd)
    elif stat.S_ISREG(mode):
        data = sys.stdin.buffer.read()
    else:
        return []
    paths = []
    # Names are bytes on disk: decode them as the file system does, so any name round-trips.
    for line in os.fsdecode(data).splitlines():
        line = line.strip()
        if not line:
            continue
        head, sep, tail = line.partition(":")
        if sep and tail.split(":", 1)[0].isdigit() and not _exists(line):
            line = head
        paths.append(line)
    return paths


def _exists(name: str) -> bool:
    """Whether a piped name is a file; a name the OS cannot even look up is not."""
    try:
        return Path(name).exists()
    except (OSError, ValueError):
        return False


@cli.command()
@click.option("-q", "--query",
              help=f"The question, e.g. 'where are retries configured' (at most {_QUERY_LIMIT}).")
@click.option("--query-file", metavar="PATH",
              help=f"Read the query from a file ('-' for stdin; at most {_QUERY_LIMIT}).")
@click.argument("paths", nargs=-1)
@click.option("--root", type=click.Path(exists=True, file_okay=False, path_type=Path),
              help="Repository to search (default: the one holding the current directory).")
@click.option("--fast", is_flag=True, help="Lexical ranking only; no model server is contacted.")
@click.option("-k", "--top-k", "top_k", type=click.IntRange(min=1), help="Number of results.")
@click.option("--chunks/--files", "chunks", default=None,
              help="List chunks instead of one result per file.")
@click.option("--format", "format_name", metavar="NAME", help="Output format (text, json, ...).")
@click.option("--caller", default=None, help="Who is asking, for the usage log (default: cli).")
@click.option("-v", "--verbose", is_flag=True, help="Explain skipped files and sources on stderr.")
@click.option("--stub", is_flag=True,
              help="After the results, a skeleton of each file with the cited code in full.")
@click.option("--slice", "skeleton", is_flag=True,
              help="After the results, the skeleton of each file alone (every body folded).")
@click.option("--by-slice", is_flag=True,
              help="Group the results by architectural slice (packages/x, services/x, ...).")
@click.option("--dirty", is_flag=True,
              help="Lift files with uncommitted changes (modified, staged, untracked).")
@model_options
def search(query: str | None, query_file: str | None, paths: tuple[str, ...], root: Path | None,
           fast: bool, top_k: int | None, chunks: bool | None, format_name: str | None,
           caller: str | None, verbose: bool, stub: bool, skeleton: bool, by_slice: bool,
           dirty: bool, **model_flags: Any) -> None:
    """Rank the places in a repository that answer QUERY (the default command)."""
    from slm_rerank.api import search as run
    from slm_rerank.pipeline import QueryError

    if stub and skeleton:
        raise click.UsageError("give either --stub (skeleton and cited code) or --slice "
                               "(skeleton alone), not both")
    text = _read_query(query, query_file)
    if not text.strip():
        raise click.UsageError("the query is empty")
    expand = bool(model_flags.pop("expand", None))  # a request, not a setting
    flags = {"top_k": top_k, "chunks": chunks, "format": format_name, **model_flags}
    try:
        host = Host.from_environment(start=root or Path.cwd(), flags=flags)
        settings = host.settings
        formatters = host.registry.formatters()
        if settings.format not in formatters:
            _no_formatter(settings, sorted(formatters))
        report = run(
            text, root, paths=paths, fast=fast, host=host,
            piped_paths=[] if query_file == "-" else _stdin_paths(),
            caller=caller or os.environ.get("SLM_RERANK_CALLER", "cli"), explain=verbose,
            expand=expand, stubs="stub" if stub else "slice" if skeleton else None,
            dirty=dirty, by_slice=by_slice, root_name="--root",
        )
    except QueryError as exc:
        raise click.UsageError(str(exc)) from None
    except SlmRerankError as exc:  # config, plugins, sources, a server's broken answer
        fail(str(exc))
        return
    for note in report.notes if verbose else []:
        warn(note)
    for message in report.warnings:
        warn(message)
    if report.degraded:
        warn(f"degraded: {report.degraded.reason}")
    if report.shortfall:
        short = report.shortfall
        warn(f"{short.shown} of {short.asked} results: {short.reason}")
    output = formatters[settings.format].render(report, tty=sys.stdout.isatty())
    emit(output if output.endswith("\n") or not output else output + "\n")


#: The plugin that ships text, json, jsonl and markdown: its entry-point and distribution name.
_BUILTIN_FORMATTERS = ("formatters", "slm-rerank-formatters")


def _no_formatter(settings: Settings, available: list[str]) -> None:
    """Stop with the reason ``settings.format`` has no formatter, and what to change."""
    disabled = [name for name in settings.disabled_plugins if name in _BUILTIN_FORMATTERS]
    if disabled:
        fix = (f"remove '{disabled[0]}' from disabled_plugins "
               f"(set in {settings.origins['disabled_plugins']})")
        if available:
            fix += f" or pick an installed format: {', '.join(available)}"
        fail(f"no output formatter for format '{settings.format}': the built-in formatters "
             f"plugin (slm-rerank-formatters) is disabled; {fix}")
    if not available:
        fail(f"no output formatter is installed (format '{settings.format}'); install the "
             f"built-in ones with 'pip install slm-rerank-formatters'")
    raise click.UsageError(
        f"unknown format '{settings.format}' (from {settings.origins['format']}); "
        f"available: {', '.join(available)}"
    )


@cli.group(invoke_without_command=True)
@click.option("--all", "show_all", is_flag=True,
              help="Include the built-ins: the plugins a bare install of slm-rerank brings.")
@click.option("--format", "format_name", type=click.Choice(["text", "json"]), default="text")
@click.pass_context
def plugins(ctx: click.Context, show_all: bool, format_name: str) -> None:
    """List installed plugins: distribution, version, hooks and what each registers.

    Without --all, the plugins installed beside the host: a model family installed with
    `pip install slm-rerank slm-rerank-gemma` is listed, the sources, formats, judge and
    generic profile slm-rerank itself depends on are not. `plugins new` writes a new one.
    """
    if ctx.invoked_subcommand is not None:
        return
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
        emit(json.dumps(rows, indent=2) + "\n")
        return
    lines = [] if rows else ["no plugins installed beyond the built-ins slm-rerank depends "
                             "on (see --all)"]
    for row in rows:
        status = f"  FAILED: {visible(row['error'])}" if row["error"] else ""
        lines.append(f"{row['name']}  {row['distribution']} {row['version']}{status}")
        for hook, registered in row["registers"].items():
            lines.append(f"    {hook}: {', '.join(registered)}")
    emit("".join(line + "\n" for line in lines))


plugins.add_command(new_plugin)


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
    if values["api_key"]:
        values["api_key"] = "(set, not shown)"  # a secret does not belong on a screen
    refused = settings.repo_refusals  # a repository's value ignored or lowered, and why
    if format_name == "json":
        doc = {k: {"value": v, "origin": settings.origins[k], "help": describe(k),
                   **({"refused": refused[k]} if k in refused else {})}
               for k, v in values.items()}
        emit(json.dumps(doc, indent=2) + "\n")
        return
    width = max(len(k) for k in KEYS)
    emit("".join(f"{key:<{width}} = {json.dumps(value):<24} # {visible(settings.origins[key])}"
                 f"{'; ' + visible(refused[key]) if key in refused else ''}\n"
                 for key, value in values.items()))


@config.command("set", context_settings={"ignore_unknown_options": True})
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
        where = f"config set {key}"
        if key in CHOICE_KEYS:
            # checked against the installed plugins, as it will be when it is read
            Host(load_settings()).check_choice(key, parse_text(key, value, where), where)
        elif key in ("base_url", "endpoints", "plugins"):
            _check_as_read(key, parse_text(key, value, where), where)
        stored = write_setting(path, key, value, repo=to_repo)
    except SlmRerankError as exc:
        fail(str(exc))
        return
    emit(f"{key} = {json.dumps(stored)}  # written to {path}\n")
    if to_repo:
        # read back as a search here will: a value above the user's for a key a repository
        # may only lower is ignored, and that is worth hearing now, not at every search
        try:
            load_settings(start=path.parent)  # warns (once) of what it ignores
        except SlmRerankError:
            pass  # another layer is broken: a search will say so itself


def _check_as_read(key: str, value: Any, where: str) -> None:
    """Raise the ConfigError a search would raise on reading ``value`` for ``key``.

    Server URLs are checked only when the model stage reads them (a --fast search must not
    import the HTTP stack) and [plugins.NAME] options only against the registry, so without
    this a bad URL or option was written and every later search failed on it.
    """
    if key == "plugins":
        settings = Settings(plugins=value)
        settings.origins = {f"plugins.{name}.{option}": where
                            for name, table in value.items() for option in table}
        try:
            disabled = load_settings().disabled_plugins
        except ConfigError:
            disabled = []  # the file being repaired may be the broken one
        settings.disabled_plugins = disabled
        for name in value:
            Host(settings).options_for(name)
        return
    from slm_rerank.model import discovery
    from slm_rerank.model.endpoints import pinned_urls

    if key == "base_url":
        if value:
            discovery.check_base_url(value, where)
    elif isinstance(value, dict):
        for name, url in value.items():
            discovery.check_base_url(url, f"{where}: [endpoints] {name}")
    else:
        settings = Settings(endpoints=value)
        settings.origins = {"endpoints": where}
        pinned_urls(settings)


@cli.command()
@click.option("--format", "format_name", type=click.Choice(["text", "json"]), default="text")
def stats(format_name: str) -> None:
    """Summarise the usage log: query count and median latency by caller."""
    from slm_rerank.cache_folder import cache_path
    from slm_rerank.usage import summarize

    try:
        folder = cache_path(load_settings())
        summary = summarize(folder)  # ConfigError: the log is a symlink or a FIFO
    except ConfigError as exc:
        fail(str(exc))
        return
    if format_name == "json":
        # Strict JSON: summarize() skips non-finite latencies, so NaN can never be asked for.
        emit(json.dumps({
            "queries": summary.queries,
            "by_caller": [vars(c) for c in summary.by_caller],
            "skipped_lines": summary.skipped_lines,
            "hook": {**vars(summary.hook), "share_queried": summary.hook.share_queried},
        }, indent=2, allow_nan=False) + "\n")
        return
    lines = [f"{summary.queries} queries logged in {folder / 'usage.jsonl'}"]
    lines += [f"  {visible(c.caller):<16} {c.queries:>6} queries  "
              f"median {c.median_latency_ms:.0f} ms" for c in summary.by_caller]
    if summary.hook.prompts:
        lines.append(_hook_line(summary.hook))
    if summary.skipped_lines:
        lines.append(f"  ({summary.skipped_lines} unreadable lines skipped)")
    emit("".join(line + "\n" for line in lines))


def _hook_line(hook: Any) -> str:
    latency = (f"; p50 {hook.p50_ms:.0f} ms, p95 {hook.p95_ms:.0f} ms"
               if hook.p95_ms is not None else "")
    return (f"  prompt hook: {hook.queried} of {hook.prompts} prompts queried "
            f"({hook.share_queried:.0%}){latency}; {hook.timeouts} past the deadline, "
            f"{hook.errors} failed")


model_commands.register(cli)
from slm_rerank.servers.mcp import register as register_mcp  # noqa: E402, I001
register_mcp(cli)
from slm_rerank import claude_hook as hook_command  # noqa: E402, I001
hook_command.register(cli)
from slm_rerank.cli import serve as serve_commands  # noqa: E402, I001
serve_commands.register(cli)
from slm_rerank.servers import rerank_api as rerank_server  # noqa: E402, I001
rerank_server.register(cli)
