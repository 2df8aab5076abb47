"""Grounded code review for slm-rerank: ``slm-rerank review``, findings that cannot be invented.

A model proposes findings about the chunks a search retrieves; each one is reported only
if its quoted evidence is on disk in the chunk it cites and the code names of its claim
occur there (``gates.py``), and, best effort, a yes/no judge finds it supported and not
contradicted. Everything else is dropped with a stable reason (``findings.Reason``).
"""

from __future__ import annotations

import click

import slm_rerank

__version__ = "0.1.0"


@slm_rerank.hookimpl
def register_commands(cli: click.Group) -> None:
    """``slm-rerank review``."""
    from slm_rerank_review.cli import make_group

    cli.add_command(make_group())
