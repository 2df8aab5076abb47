"""The `slm-rerank` command line."""

from __future__ import annotations

import sys

#: typing.TYPE_CHECKING without importing typing: this module is the console script's
#: entry, before a warm process answers (about 4 ms of each command's start)
TYPE_CHECKING = False
if TYPE_CHECKING:
    import click


def main() -> None:
    """Entry point: answers --version before importing anything heavy."""
    if sys.stdout is None:  # started with fd 1 closed (`>&-`): no result could be written
        print("slm-rerank: error: standard output is closed; redirect it to a file or "
              "/dev/null instead of closing it", file=sys.stderr)
        sys.exit(1)
    if sys.argv[1:] == ["--version"]:
        from slm_rerank import __version__

        print(f"slm-rerank {__version__}")
        return
    # A --fast search or the prompt hook: a warm process answers it, when one runs, before
    # click or the host is imported (standard library only until then).
    from slm_rerank.warm_process.client import start, try_warm, wants_notes

    code, start_at = try_warm(sys.argv[1:])
    if code is not None:
        sys.exit(code)
    try:
        run(sys.argv[1:])
    finally:
        if start_at is not None:
            from slm_rerank.warm_process.switch import user_switch

            if user_switch().on:  # the user's config and environment only
                start(start_at, wants_notes(sys.argv[1:]))


def run(args: list[str]) -> None:
    """The command ``args`` in this process (the warm process runs this too)."""
    import click

    from slm_rerank.plugin_listing import cache_listing
    from slm_rerank.report import cut_arguments, visible

    cache_listing()  # a process per query: the entry-point list is kept between starts

    prog = "slm-rerank"
    if args[:2] == ["hook", "claude-prompt"]:
        # The prompt hook runs before every prompt the user sends: it imports its own command
        # alone, not every command's module (a third of its start-up).
        from slm_rerank.cli.hook import hook as cli

        args, prog = args[1:], "slm-rerank hook"
    else:
        from slm_rerank.cli.commands import cli
    try:
        cli.main(args=args, prog_name=prog, standalone_mode=False)
    except click.exceptions.NoArgsIsHelpError as exc:
        # click's message is the whole --help text, which the one-line form below would
        # print with its newlines escaped: say what is missing instead
        print(f"slm-rerank: error: {_missing_command(exc.ctx)} (see "
              f"'{exc.ctx.command_path} --help')", file=sys.stderr)
        sys.exit(exc.exit_code)
    except click.UsageError as exc:
        # One line that names the culprit, instead of click's usage block.
        where = exc.ctx.command_path if exc.ctx is not None else "slm-rerank"
        # a 100 KB argument is quoted by its first characters, not echoed whole
        said = cut_arguments(exc.format_message(), args)
        print(f"slm-rerank: error: {visible(said)} (see '{where} --help')", file=sys.stderr)
        sys.exit(exc.exit_code)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except click.Abort:
        print("slm-rerank: aborted", file=sys.stderr)
        sys.exit(1)


def _missing_command(ctx: click.Context) -> str:
    """What a group (or a command) run without its arguments lacks, in one line."""
    import click

    command = ctx.command
    if isinstance(command, click.Group):
        names = ", ".join(command.list_commands(ctx))
        return f"'{ctx.command_path}' needs a command: {names}"
    return f"'{ctx.command_path}' needs arguments"
