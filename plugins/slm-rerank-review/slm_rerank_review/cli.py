"""``slm-rerank review`` (and the ``slm-rerank-review`` script): a group whose default is
the review itself, so ``slm-rerank review src -q "..."`` reviews and a subcommand added to
``SUBCOMMANDS`` (the trust benchmark, ``review bench``) is reached by its name."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import IO, Any

import click

from slm_rerank.errors import SlmRerankError
from slm_rerank.report import cut_arguments, visible
from slm_rerank_review.generation import MAX_TOKENS, MAX_TOKENS_RANGE

#: the subcommands of `slm-rerank review` besides the review itself (`run`, the default)
SUBCOMMANDS: list[click.Command] = []
#: what a query may be at most, as the search's own front doors hold it
MAX_QUERY_CHARS = 1_000_000
FORMATS = ("text", "json", "sarif")
#: where the review's arguments are kept for its error messages (``click.Context.meta``)
_ARGS_KEY = "slm_rerank_review.args"


class ReviewError(click.ClickException):
    """A review's error, printed as the host prints one: one line, ``PROG: error: ...``."""

    def show(self, file: IO[Any] | None = None) -> None:
        click.echo(f"slm-rerank review: error: {visible(self.format_message())}",
                   file=file, err=file is None)


class ReviewGroup(click.Group):
    """A first word that is no subcommand is the review's own argument: ``run`` is implied.

    Every error of the review or a subcommand is one line in the host's style, quoting at
    most a short prefix of a long argument (``cut_arguments``).
    """

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if not args or (args[0] not in self.commands and args[0] not in ("-h", "--help")):
            args = ["run", *args]
        ctx.meta[_ARGS_KEY] = list(args)
        return super().parse_args(ctx, args)

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except click.UsageError as exc:  # the host's CLI prints it: "slm-rerank: error: ..."
            exc.message = cut_arguments(exc.message, ctx.meta.get(_ARGS_KEY, ()))
            raise
        except click.ClickException as exc:
            raise ReviewError(cut_arguments(exc.message, ctx.meta.get(_ARGS_KEY, ()))) from None


@click.command("run")
@click.argument("paths", nargs=-1, metavar="[PATHS_OR_GLOBS]...")
@click.option("-q", "--query", default=None,
              help="What to look for (default: find real defects). With --diff, the changed "
              "chunks it retrieves are reviewed first.")
@click.option("--root", type=click.Path(exists=True, file_okay=False, path_type=Path),
              help="The folder the paths are in (default: the working directory).")
@click.option("--top", type=click.IntRange(min=1, max=100), default=5, show_default=True,
              help="Chunks the model is asked about.")
@click.option("--diff", "diff", is_flag=False, flag_value="", default=None, metavar="[REV]",
              help="Review only lines changed since REV (alone: the uncommitted work).")
@click.option("--no-support", is_flag=True, help="Skip the support judge.")
@click.option("--no-contradiction", is_flag=True, help="Skip the contradiction veto.")
@click.option("--json", "as_json", is_flag=True, help="Reported and dropped findings as JSON.")
@click.option("--format", "format_name", type=click.Choice(FORMATS), default=None,
              help="Output format (text, json, sarif).")
@click.option("--fast", is_flag=True, help="Retrieve lexically (no model in the search).")
@click.option("-e", "--base-url", "base_url", metavar="URL", help="The model server.")
@click.option("--model", metavar="PROFILE", help="The model profile.")
@click.option("--timeout", type=click.FloatRange(min=0.1), metavar="SECONDS",
              help="The whole review's deadline (default: the timeout setting).")
@click.option("--local", is_flag=True, default=None,
              help="Start the bundled model server when none is given or found.")
@click.option("--max-tokens", type=click.IntRange(*MAX_TOKENS_RANGE), default=MAX_TOKENS,
              show_default=True, help="Tokens the model may write per chunk.")
@click.option("-v", "--verbose", is_flag=True, help="Notes and dropped candidates on stderr.")
def run(paths: tuple[str, ...], query: str | None, root: Path | None, top: int, diff: str | None,
        no_support: bool, no_contradiction: bool, as_json: bool, format_name: str | None,
        fast: bool, base_url: str | None, model: str | None, timeout: float | None,
        local: bool | None, max_tokens: int, verbose: bool) -> None:
    """Review code: a model proposes findings; each is reported only with its quoted
    evidence on disk in the chunk it cites and every code name of its claim there."""
    from slm_rerank_review.output import render_json, render_text
    from slm_rerank_review.review import DEFAULT_QUERY, ReviewRequest, run_review
    from slm_rerank_review.sarif import render_sarif

    query_given = query is not None
    query = DEFAULT_QUERY if query is None else query
    if not query.strip():
        raise click.UsageError("the query is empty")
    if len(query) > MAX_QUERY_CHARS:
        raise click.UsageError(f"the query is over {MAX_QUERY_CHARS} characters")
    if as_json and format_name not in (None, "json"):
        raise click.UsageError("give either --json or --format, not both")
    shape = "json" if as_json else format_name or "text"
    request = ReviewRequest(
        query=query, query_given=query_given, root=(root or Path.cwd()).resolve(),
        paths=paths, top=top, fast=fast,
        support=not no_support, contradiction=not no_contradiction, diff=diff is not None,
        rev=diff or None, base_url=base_url, model=model, timeout=timeout, local=local,
        max_tokens=max_tokens)
    try:
        report = run_review(request)
    except SlmRerankError as exc:  # a bad setting, a pinned URL that is no server, --diff
        raise ReviewError(str(exc)) from None
    _stderr(report, verbose)
    if shape == "json":
        click.echo(render_json(report), nl=False)
    elif shape == "sarif":
        click.echo(render_sarif(report), nl=False)
    else:
        click.echo(render_text(report, verbose=verbose), nl=False)


def _stderr(report: Any, verbose: bool) -> None:
    for note in report.notes if verbose else []:
        click.echo(f"slm-rerank review: {visible(note)}", err=True)
    for message in report.warnings:
        click.echo(f"slm-rerank review: warning: {visible(message)}", err=True)
    for reason in report.degraded:
        click.echo(f"slm-rerank review: degraded: {visible(reason)}", err=True)


def make_group() -> click.Group:
    """`review` with `run` as its default and every subcommand of ``SUBCOMMANDS``."""
    group = ReviewGroup("review", help="Grounded code review: findings that cannot be "
                        "invented. `review [PATHS]... -q TEXT` is `review run` (see "
                        "`review run --help` for its options).",
                        context_settings={"help_option_names": ["-h", "--help"]})
    from slm_rerank_review.bench_command import bench  # the trust benchmark

    group.add_command(run)
    for command in (bench, *SUBCOMMANDS):
        group.add_command(command)
    return group


def main() -> None:
    """The ``slm-rerank-review`` script: ``slm-rerank review`` on its own."""
    group = make_group()
    try:
        group.main(args=sys.argv[1:], prog_name="slm-rerank-review", standalone_mode=False)
    except click.UsageError as exc:
        print(f"slm-rerank-review: error: {visible(exc.format_message())}", file=sys.stderr)
        sys.exit(exc.exit_code)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except click.Abort:
        print("slm-rerank-review: aborted", file=sys.stderr)
        sys.exit(1)
