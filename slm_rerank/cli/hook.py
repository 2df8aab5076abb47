"""`slm-rerank hook claude-prompt`: the Claude Code prompt hook's command line.

What the hook does is ``slm_rerank.hook.claude`` (no click there); this only parses its two
flags and hands them on.
"""

from __future__ import annotations

import click

from slm_rerank.hook.claude import DEADLINE_ENV, DEFAULT_DEADLINE, main


@click.group()
def hook() -> None:
    """Hooks for coding agents (Claude Code)."""


@hook.command("claude-prompt")
# a string, read leniently: a typo in settings.json must not block the user's prompt
@click.option("--deadline", default=None, metavar="SECONDS",
              help=f"Give up and print nothing after this long (default: "
                   f"${DEADLINE_ENV}, else {DEFAULT_DEADLINE:g}).")
@click.option("--fast", "force_fast", is_flag=True,
              help="Lexical ranking only, even when a model server is configured.")
def claude_prompt(deadline: str | None, force_fast: bool) -> None:
    """Claude Code UserPromptSubmit hook: JSON on stdin, context for code questions.

    Prints file:line places as additionalContext when the prompt is a code question,
    nothing otherwise; always exits 0.
    """
    main(deadline, force_fast)
