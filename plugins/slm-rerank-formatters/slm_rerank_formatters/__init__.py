"""Output formatters: text, json, jsonl, markdown."""

from __future__ import annotations

import json
import re
from collections.abc import Callable

import slm_rerank
from slm_rerank.registrations import OutputFormatter
from slm_rerank.report import Citation, Report, visible

#: The heading of the results outside every slice (``--by-slice``).
OUTSIDE = "(outside any slice)"


def _score(c: Citation) -> str:
    return f"{c.score:.3f}"


def _groups(report: Report) -> list[tuple[str | None, list[int]]]:
    """(heading, result indices): the slices with ``--by-slice``, else one untitled group."""
    if report.slices is None:
        return [(None, list(range(len(report.results))))]
    return [(OUTSIDE if g.name is None else g.name, list(g.members)) for g in report.slices]


def _stub_heading(rank: int, c: Citation, location: str | None = None) -> str:
    """``location`` replaces ``c.location`` (Markdown passes it as a code span)."""
    s = c.stub
    method = "cited lines with context" if s.method == "context" else s.method
    return (f"{rank}. {location or c.location}  stub: {s.kept_lines} of {s.total_lines} "
            f"lines kept, {s.folded_lines} folded ({method})")


def render_stubs(report: Report, tty: bool) -> str:
    """Each result's ghost stub (``--stub``/``--slice``) under a heading; empty without."""
    out = []
    for rank, c in enumerate(report.results, 1):
        if c.stub is None:
            continue
        out.append(f"\n--- {visible(_stub_heading(rank, c)) if tty else _stub_heading(rank, c)}")
        if c.stub.note:
            out.append(f"    note: {visible(c.stub.note) if tty else c.stub.note}")
        text = c.stub.text.rstrip("\n")
        if text:
            out.append(visible(text, keep_lines=True) if tty else text)
    return "".join(line + "\n" for line in out)


def render_text(report: Report, tty: bool = False) -> str:
    """An aligned table for people; plain `path:start-end  score  symbol` lines for pipes.

    Piped, names are written exactly as they are on disk, so a script can open them; on a
    terminal, control characters in them are escaped (see ``visible``). With ``--by-slice``
    each slice's results follow a ``# slice: NAME`` line (best slice first, results keep
    their rank numbers); ghost stubs follow the table.
    """
    if not report.results:
        return "no results\n" if tty else ""
    groups = _groups(report)
    if not tty:
        lines = []
        for heading, members in groups:
            if heading is not None:
                lines.append(f"# slice: {heading}")
            lines += [f"{c.location}  {_score(c)}  {c.symbol or ''}".rstrip()
                      for c in (report.results[i] for i in members)]
        return "".join(line + "\n" for line in lines) + render_stubs(report, tty)
    header = ("#", "location", "score", "symbol")
    rows = {i: (str(i + 1), visible(c.location), _score(c), visible(c.symbol or ""))
            for i, c in enumerate(report.results)}
    widths = [max(len(row[col]) for row in [header, *rows.values()]) for col in range(4)]

    def line(r: tuple[str, str, str, str]) -> str:
        return (f"{r[0]:>{widths[0]}}  {r[1]:<{widths[1]}}  {r[2]:>{widths[2]}}  "
                f"{r[3]}").rstrip()

    lines = [line(header)]
    for heading, members in groups:
        if heading is not None:
            lines.append(f"slice: {visible(heading)}")
        lines += [line(rows[i]) for i in members]
    return "\n".join(lines) + "\n" + render_stubs(report, tty)


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
    lines = []
    for heading, members in _groups(report):
        if heading == OUTSIDE:  # no folder: a code span would show it as one
            lines += ["### outside any slice", ""]
        elif heading is not None:
            lines += [f"### slice {_code(_cell(heading, tty))}", ""]
        lines += ["| # | location | score | symbol |", "| ---: | --- | ---: | --- |"]
        for i in members:
            c = report.results[i]
            lines.append(f"| {i + 1} | {_code(_cell(c.location, tty))} | {_score(c)} "
                         f"| {_cell(c.symbol or '', tty)} |")
        lines.append("")
    for rank, c in enumerate(report.results, 1):
        if c.stub is None:
            continue
        # A code span, as in the table: bare, `__init__.py` would render as bold "init".
        # No `\|` inside: outside a table a renderer shows the backslash.
        location = _code(visible(c.location) if tty else c.location.replace("\n", " "))
        lines.append(_stub_heading(rank, c, location).replace("\n", " "))
        if c.stub.note:
            lines.append(f"> {_cell(c.stub.note, tty)}")
        text = c.stub.text.rstrip("\n")
        body = visible(text, keep_lines=True) if tty else text
        fence = "`" * max(3, 1 + max((len(r) for r in re.findall(r"`+", body)), default=0))
        lines += ["", fence, body, fence, ""]
    return "\n".join(lines).rstrip("\n") + "\n"


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
