"""The `slm-rerank` command line."""

from __future__ import annotations

import sys


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
    import click

    from slm_rerank.cli.commands import cli
    from slm_rerank.cli.terminal import visible

    try:
        cli.main(args=sys.argv[1:], prog_name="slm-rerank", standalone_mode=False)
    except click.UsageError as exc:
        # One line that names the culprit, instead of click's usage block.
        where = exc.ctx.command_path if exc.ctx is not None else "slm-rerank"
        print(f"slm-rerank: error: {visible(exc.format_message())} (see '{where} --help')",
              file=sys.stderr)
        sys.exit(exc.exit_code)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except click.Abort:
        print("slm-rerank: aborted", file=sys.stderr)
        sys.exit(1)
