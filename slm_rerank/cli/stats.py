"""`slm-rerank stats`: what the usage log says about who asks and how long answers take."""

from __future__ import annotations

import json
from typing import Any

import click

from slm_rerank.cli.terminal import emit, fail, text_or_json, visible
from slm_rerank.config import ConfigError, load_settings


@click.command()
@text_or_json
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
        lines.append(_rules_line(summary.hook))
    if summary.skipped_lines:
        lines.append(f"  ({summary.skipped_lines} unreadable lines skipped)")
    emit("".join(line + "\n" for line in lines))


def _hook_line(hook: Any) -> str:
    latency = (f"; p50 {hook.p50_ms:.0f} ms, p95 {hook.p95_ms:.0f} ms"
               if hook.p95_ms is not None else "")
    return (f"  prompt hook: {hook.queried} of {hook.prompts} prompts queried "
            f"({hook.share_queried:.0%}){latency}; {hook.timeouts} past the deadline, "
            f"{hook.errors} failed")


def _rules_line(hook: Any) -> str:
    """How many hook prompts were judged code questions, and by which rule, most first."""
    rules = sorted(hook.by_rule.items(), key=lambda item: (-item[1], item[0]))
    named = ", ".join(f"{visible(rule)} {count}" for rule, count in rules)
    return (f"  judged code questions: {hook.judged_code} of {hook.prompts}"
            + (f" ({named})" if named else ""))
