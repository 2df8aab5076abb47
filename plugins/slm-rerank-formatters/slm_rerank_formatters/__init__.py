"""Output formatters: text, json, jsonl, markdown."""

from __future__ import annotations

import json
import re
from collections.abc import Callable

import slm_rerank
from slm_rerank.registrations import OutputFormatter
from slm_rerank.report import Citation, Report, visible


def _score(c: Citation) -> str:
    return f"{c.score:.3f}"


def render_text(report: Report, tty: bool = False) -> str:
    """An aligned table for people; plain `path:start-end  score  symbol` lines for pipes.

    Piped, names are written exactly as they are on disk, so a script can open them; on a
    terminal, control characters in them are escaped (see ``visible``).
    """
    if not report.results:
        return "no results\n" if tty else ""
    if not tty:
        return "".join(
            f"{c.location}  {_score(c)}  {c.symbol or ''}".rstrip() + "\n"
            for c in report.results
        )
    rows = [("#", "location", "score", "symbol")]
    rows += [(str(i), visible(c.location), _score(c), visible(c.symbol or ""))
             for i, c in enumerate(report.results, 1)]
    widths = [max(len(row[col]) for row in rows) for col in range(4)]
    lines = [
        f"{r[0]:>{widths[0]}}  {r[1]:<{widths[1]}}  {r[2]:>{widths[2]}}  {r[3]}".rstrip()
        for r in rows
    ]
    return "\n".join(lines) + "\n"


def render_json(report: Report, tty: bool = False) -> str:
    return json.dumps(report.to_dict(), indent=2, ensure_ascii=False) + "\n"


def render_jsonl(report: Report, tty: bool = False) -> str:
    doc = report.to_dict()
    return "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in doc["results"])


def _cell(text: str, tty: bool) -> str:
    text = text.replace("|", "\\|").replace("\n", " ")
    return visible(text) if tty else text


def _code(text: str) -> str:
    """``text`` as a Markdown code span, whatever backticks it holds (CommonMark 6.1).

    The fence is one backtick longer than the longest run inside; a space on each side keeps
    a backtick at either end from joining the fence (the renderer strips those two spaces).
    """
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if text.startswith(("`", " ")) or text.endswith(("`", " ")) else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def render_markdown(report: Report, tty: bool = False) -> str:
    if not report.results:
        return "_no results_\n"
    lines = ["| # | location | score | symbol |", "| ---: | --- | ---: | --- |"]
    for i, c in enumerate(report.results, 1):
        lines.append(f"| {i} | {_code(_cell(c.location, tty))} | {_score(c)} "
                     f"| {_cell(c.symbol or '', tty)} |")
    return "\n".join(lines) + "\n"


FORMATTERS: tuple[tuple[str, str, Callable[..., str]], ...] = (
    ("text", "aligned table on a terminal, plain lines when piped", render_text),
    ("json", "one JSON document (docs/output.md)", render_json),
    ("jsonl", "one JSON object per result", render_jsonl),
    ("markdown", "a Markdown table", render_markdown),
)


@slm_rerank.hookimpl
def register_output_formatters(register: Callable[[OutputFormatter], None]) -> None:
    for name, description, render in FORMATTERS:
        register(OutputFormatter(name=name, description=description, render=render))
