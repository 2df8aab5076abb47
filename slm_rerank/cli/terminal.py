"""Writing to the terminal: one-line messages on stderr, output on stdout, exactly."""

from __future__ import annotations

import os
import sys

import click

from slm_rerank.report import cut_arguments, visible

__all__ = ["emit", "fail", "one_line", "quiet_stdout", "text_or_json", "visible", "warn"]

#: ``--format text|json`` of the commands whose output is a table or its JSON document
#: (the search's ``--format NAME`` picks an installed formatter instead).
text_or_json = click.option("--format", "format_name", type=click.Choice(["text", "json"]),
                            default="text")


def one_line(message: str) -> str:
    """``message`` as one readable line: escaped (``visible``), and each run of over
    ``report.LONG_RUN`` characters without a space cut to its first characters and its
    length (``cut_arguments``), so a 100 KB argument an error quotes is not echoed whole."""
    return visible(cut_arguments(message, ()))


def warn(message: str) -> None:
    """One line on stderr, prefixed with the program name.

    A newline or escape sequence in ``message`` (a file name, a server's error text) is
    shown as ``\\xNN``: it must not split the line or drive the terminal; a very long
    word in it is cut (``one_line``).
    """
    click.echo(f"slm-rerank: {one_line(message)}", err=True)


def fail(message: str) -> None:
    """Print a one-line error and exit 1."""
    warn(f"error: {message}")
    sys.exit(1)


def quiet_stdout() -> None:
    """Point fd 1 at /dev/null, so the interpreter's last flush of stdout cannot fail again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):
        pass  # not a real file descriptor (a test runner's capture): nothing is left to flush


def emit(text: str) -> None:
    """Write ``text`` to stdout exactly as given.

    Not click.echo: off a terminal it strips ANSI sequences, silently changing what a
    formatter wrote (the formatters escape them visibly, ``report.visible``). Undecodable
    text (lone surrogates from argv) is written as ``\\udcXX`` instead of raising. A reader
    that stops early (``| head``) ends the run quietly with exit 0, as rg and other filters
    do: the search succeeded and the consumer had what it wanted, and ``set -o pipefail``
    scripts must not fail for it. Any other write fault (``>/dev/full``) is a one-line error
    and exit 1.
    """
    stream = sys.stdout
    binary = getattr(stream, "buffer", None)
    try:
        if binary is None:
            stream.write(text)
            stream.flush()
        else:
            stream.flush()
            binary.write(text.encode(stream.encoding or "utf-8", errors="backslashreplace"))
            binary.flush()
    except BrokenPipeError:
        quiet_stdout()
        sys.exit(0)
    except OSError as exc:
        quiet_stdout()
        fail(f"cannot write to standard output: {exc.strerror or exc}")
