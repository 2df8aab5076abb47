"""The `slm-rerank` command line."""

from __future__ import annotations

import sys


def main() -> None:
    """Entry point: answers --version before importing anything heavy."""
    if sys.argv[1:] == ["--version"]:
        from slm_rerank import __version__

        print(f"slm-rerank {__version__}")
        return
    from slm_rerank.commands import cli

    cli(prog_name="slm-rerank")
