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
    """Each result's ghost stub (``--stub``/``--slice``) under a heading; empty without.

    The code keeps its tabs and newlines; any other control character in it is escaped, as
    in names: the file's text is the repository's, and must not drive what reads it.
    """
    out = []
    for rank, c in enumerate(report.results, 1):
        if c.stub is None:
            continue
        out.append(f"\n--- {visible(_stub_heading(rank, c))}")
        if c.stub.note:
            out.append(f"    note: {visible(c.stub.note)}")
        text = c.stub.text.rstrip("\n")
        if text:
            out.append(visible(text, keep_lines=True))
    return "".join(line + "\n" for line in out)


def render_text(report: Report, tty: bool = False) -> str:
    """An aligned table for people; plain `path:start-end  score  symbol` lines for pipes.

    Control characters in names and symbols are escaped on a terminal and in a pipe alike
    (see ``visible``): a name holding a newline must not make a line of its own for the
    script or agent reading it (``json`` keeps names exact). With ``--by-slice``
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
                lines.append(f"# slice: {visible(heading)}")
            lines += [f"{visible(c.location)}  {_score(c)}  {visible(c.symbol or '')}".rstrip()
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


def _json(value: object, indent: int | None = None) -> str:
    """JSON that keeps non-ASCII names readable, with what JSON leaves raw (C1, U+2028, ...)
    escaped too: the values stay exact, and ``cat`` of the output cannot drive a terminal."""
    return visible(json.dumps(value, indent=indent, ensure_ascii=False), json=True)


def render_json(report: Report, tty: bool = False) -> str:
    return _json(report.to_dict(), indent=2) + "\n"


def render_jsonl(report: Report, tty: bool = False) -> str:
    doc = report.to_dict()
    return "".join(_json(row) + "\n" for row in doc["results"])


def _cell(text: str) -> str:
    """``text`` for a table cell: control characters escaped, ``|`` as ``\\|``."""
    return visible(text).replace("|", "\\|")


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
            lines += [f"### slice {_code(visible(heading))}", ""]  # no table: | stays
        lines += ["| # | location | score | symbol |", "| ---: | --- | ---: | --- |"]
        for i in members:
            c = report.results[i]
            # The symbol in a code span too: a heading of a document (its "symbol") may
            # hold Markdown that would otherwise render as a link, an image or emphasis.
            symbol = _code(_cell(c.symbol)) if c.symbol else ""
            lines.append(f"| {i + 1} | {_code(_cell(c.location))} | {_score(c)} "
                         f"| {symbol} |")
        lines.append("")
    for rank, c in enumerate(report.results, 1):
        if c.stub is None:
            continue
        # A code span, as in the table: bare, `__init__.py` would render as bold "init".
        # No `\|` inside: outside a table a renderer shows the backslash.
        lines.append(_stub_heading(rank, c, _code(visible(c.location))))
        if c.stub.note:
            lines.append(f"> {_code(visible(c.stub.note))}")
        text = c.stub.text.rstrip("\n")
        body = visible(text, keep_lines=True)
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
