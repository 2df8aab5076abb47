"""`slm-rerank search` (the default command): the query, the files in scope, the results."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import click

from slm_rerank import piped
from slm_rerank.cli.model_flags import model_options
from slm_rerank.cli.terminal import emit, fail, warn
from slm_rerank.config import Settings
from slm_rerank.errors import ConfigError, ScopeError, SlmRerankError
from slm_rerank.host import CHOICE_KEYS, Host
from slm_rerank.overrides import overrides
from slm_rerank.query_limit import MAX_QUERY_BYTES, QUERY_LIMIT, too_long
from slm_rerank.report import Report

#: How long an open pipe on stdin may stay silent before it is taken to have said all it will.
STDIN_WAIT_SECONDS = piped.STDIN_WAIT_SECONDS


def _read_query_file(query_file: str) -> str:
    """At most MAX_QUERY_BYTES from ``query_file`` ('-': stdin), decoded with replacement."""
    from slm_rerank import safefile

    try:
        if query_file == "-" and piped.given is not None:
            data = piped.given.data  # read already, by the warm process's client
        elif query_file == "-":
            data = sys.stdin.buffer.read(MAX_QUERY_BYTES + 1)
        else:  # a FIFO nobody writes: an error after PIPE_SECONDS, not a hang
            data = safefile.read_named(Path(query_file), MAX_QUERY_BYTES + 1)
    except (safefile.NotRegularFile, safefile.PipeTimeout) as exc:
        raise click.BadParameter(f"{exc}; give a file holding the query",
                                 param_hint="--query-file") from None
    except OSError as exc:
        raise click.BadParameter(f"cannot read {query_file}: {exc.strerror}",
                                 param_hint="--query-file") from None
    if len(data) > MAX_QUERY_BYTES:
        where = "the query on stdin" if query_file == "-" else query_file
        raise click.BadParameter(too_long(where), param_hint="--query-file")
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
        raise click.BadParameter(too_long("the query"), param_hint="-q/--query")
    # Bytes argv could not decode mean nothing as words: replace them, as in a query file.
    return raw.decode("utf-8", errors="replace")


def _lines(data: bytes) -> str:
    count = len(data.splitlines())
    return f"{count} line" if count == 1 else f"{count} lines"


def _after_silence(given: piped.Given) -> bytes:
    """The file names read from stdin (``piped``): all of them when the pipe closed (or
    stdin is a file); when an open pipe went silent for STDIN_WAIT_SECONDS, what arrived up
    to its last complete line, and one warning says so."""
    data = given.data
    if not given.silent:
        return data
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
    given = piped.given  # read already, by the warm process's client
    if given is None:
        try:
            fd = sys.stdin.fileno()
        except (OSError, ValueError, AttributeError):
            return []
        given = piped.read_names(fd)
        if given is None:
            return []
    data = _after_silence(given)
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


@click.command()
@click.option("-q", "--query",
              help=f"The question, e.g. 'where are retries configured' (at most {QUERY_LIMIT}).")
@click.option("--query-file", metavar="PATH",
              help=f"Read the query from a file ('-' for stdin; at most {QUERY_LIMIT}).")
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
@click.option("--skeleton", is_flag=True,
              help="After the results, the skeleton of each file alone (every body folded).")
@click.option("--by-slice", is_flag=True,
              help="Group the results by architectural slice (packages/x, services/x, ...).")
@click.option("--dirty", is_flag=True,
              help="Lift files with uncommitted changes (modified, staged, untracked).")
@click.option("--learned-order/--fixed-order", "learned_order", default=None,
              help="Order the candidate files by the learned ranker (default), or by the "
                   "fixed lexical factors (learned_order).")
@click.option("--ask-judge", "ask_judge", is_flag=True, default=None,
              help="Ask the judge even where calibrate --write measured that it adds nothing "
                   "in this repository (ask_judge_anyway).")
@model_options
def search(query: str | None, query_file: str | None, paths: tuple[str, ...], root: Path | None,
           fast: bool, top_k: int | None, chunks: bool | None, format_name: str | None,
           caller: str | None, verbose: bool, stub: bool, skeleton: bool,
           by_slice: bool, dirty: bool, learned_order: bool | None, ask_judge: bool | None,
           **model_flags: Any) -> None:
    """Rank the places in a repository that answer QUERY (the default command)."""
    from slm_rerank.api import search as run
    from slm_rerank.pipeline import QueryError

    if stub and skeleton:
        raise click.UsageError("give either --stub (skeleton and cited code) or --skeleton "
                               "(skeleton alone), not both")
    text = _read_query(query, query_file)
    if not text.strip():
        raise click.UsageError("the query is empty")
    expand = bool(model_flags.pop("expand", None))  # a request, not a setting
    flags = overrides(top_k=top_k, chunks=chunks, format=format_name,
                      learned_order=learned_order, ask_judge_anyway=ask_judge, **model_flags)
    try:
        host = Host.from_environment(start=root or Path.cwd(), flags=flags)
        settings = host.settings
        formatters = host.registry.formatters()
        host.refuse_repo_choices()  # a repository's unknown format warns, then text applies
        _check_flag_choices(host)
        if settings.format not in formatters:
            _no_formatter(settings, sorted(formatters))
        report = run(
            text, root, paths=paths, fast=fast, host=host,
            piped_paths=[] if query_file == "-" else _stdin_paths(),
            caller=caller or os.environ.get("SLM_RERANK_CALLER", "cli"), explain=verbose,
            expand=expand, stubs="stub" if stub else "skeleton" if skeleton else None,
            dirty=dirty, by_slice=by_slice, root_name="--root",
        )
    except (QueryError, ScopeError) as exc:  # the query or a path the user typed
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
    if verbose:
        _say_why(report)


def _say_why(report: Report) -> None:
    """``-v``: under the results, one line per result naming the features that placed it
    (the learned order only; stderr, like the notes)."""
    from slm_rerank.lexical.why import why_line

    for c in report.results:
        if c.why is not None:
            warn(why_line(c.path, c.why))


def _check_flag_choices(host: Host) -> None:
    """A flag that names no installed plugin (``--model``, ``--scorer``) is a usage error,
    like any other bad flag; the same name from a config file stays a config error."""
    for key in CHOICE_KEYS:
        origin = host.settings.origins.get(key, "default")
        if origin.startswith("flag: ") and key != "format":  # _no_formatter says more
            try:
                host.check_choice(key, getattr(host.settings, key), origin)
            except ConfigError as exc:
                raise click.UsageError(str(exc)) from None


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
