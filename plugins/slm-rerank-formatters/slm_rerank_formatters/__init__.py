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


#: The score columns of a table, by ``Report.score_kind``: (heading, what it shows). A
#: heading names its scale, so a lexical 14.2 and a fused 0.91 are never read as one.
LEXICAL = "lexical (BM25)"
LEARNED = "learned (0-1)"
FUSED = "fused (0-1)"
JUDGE = "judge (0-1)"
#: What the columns mean, under a table: lines on a terminal, one paragraph in Markdown.
LEGENDS = {
    "lexical": (f"{LEXICAL}: the query's evidence in path and text, no upper bound; "
                "compare within one query",),
    "learned": (f"{LEARNED}: the learned ranker's estimate that the file is the answer, "
                "among the candidate files (the files' shares sum to 1)",
                f"{LEXICAL}: the query's evidence in path and text, no upper bound"),
    "fused": (f"{FUSED}: the judge's P(relevant) fused with the lexical score; {JUDGE}: "
              "its own P(relevant)",
              f"{LEXICAL}: the query's evidence, no upper bound; -: not judged (ranked "
              "below, lexically)"),
}
#: The comment line that heads piped text: its columns, and what the score is.
PIPED_HEADERS = {
    "lexical": "# location  score  symbol  (score: lexical, BM25-like, no upper bound)",
    "learned": ("# location  score  symbol  (score: learned ranker's estimate that the file "
                "is the answer, 0-1, summing to 1 over the candidate files)"),
    "fused": "# location  score  symbol  (score: fused P(relevant), 0-1; -: not judged)",
}


def _number(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def _score_columns(report: Report) -> list[tuple[str, Callable[[Citation], str]]]:
    """The score columns of ``report``'s table: the lexical score alone (the fixed order),
    the learned ranker's share and the lexical score, or (fused run) the fused score, the
    judge's P(relevant) and the lexical score."""
    if report.score_kind == "learned":
        return [(LEARNED, lambda c: _number(c.score)),
                (LEXICAL, lambda c: _number(c.lexical_score))]
    if report.score_kind != "fused":
        return [(LEXICAL, lambda c: _number(c.score))]
    return [(FUSED, lambda c: _number(report.shown_score(c))),
            (JUDGE, lambda c: _number(c.model_score)),
            (LEXICAL, lambda c: _number(c.lexical_score))]


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

    Both start with a header naming the columns and the score's scale (piped: one ``#``
    comment line); a terminal also gets a legend under the table. In a run that fused the
    model's verdicts a result the model did not judge shows ``-``, not a score.

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
        lines = [PIPED_HEADERS[report.score_kind]]
        for heading, members in groups:
            if heading is not None:
                lines.append(f"# slice: {visible(heading)}")
            lines += [f"{visible(c.location)}  {_number(report.shown_score(c))}  "
                      f"{visible(c.symbol or '')}".rstrip()
                      for c in (report.results[i] for i in members)]
        return "".join(line + "\n" for line in lines) + render_stubs(report, tty)
    scores = _score_columns(report)
    header = ("#", "location", *(name for name, _ in scores), "symbol")
    rows = {i: (str(i + 1), visible(c.location), *(show(c) for _, show in scores),
                visible(c.symbol or ""))
            for i, c in enumerate(report.results)}
    widths = [max(len(row[col]) for row in [header, *rows.values()])
              for col in range(len(header))]

    def line(r: tuple[str, ...]) -> str:
        cells = [f"{r[0]:>{widths[0]}}", f"{r[1]:<{widths[1]}}",
                 *(f"{r[k]:>{widths[k]}}" for k in range(2, len(r) - 1)), r[-1]]
        return "  ".join(cells).rstrip()

    lines = [line(header)]
    for heading, members in groups:
        if heading is not None:
            lines.append(f"slice: {visible(heading)}")
        lines += [line(rows[i]) for i in members]
    lines += LEGENDS[report.score_kind]
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
    scores = _score_columns(report)
    for heading, members in _groups(report):
        if heading == OUTSIDE:  # no folder: a code span would show it as one
            lines += ["### outside any slice", ""]
        elif heading is not None:
            lines += [f"### slice {_code(visible(heading))}", ""]  # no table: | stays
        lines += ["| # | location | " + " | ".join(name for name, _ in scores) + " | symbol |",
                  "| ---: | --- | " + " | ".join("---:" for _ in scores) + " | --- |"]
        for i in members:
            c = report.results[i]
            # The symbol in a code span too: a heading of a document (its "symbol") may
            # hold Markdown that would otherwise render as a link, an image or emphasis.
            symbol = _code(_cell(c.symbol)) if c.symbol else ""
            lines.append(f"| {i + 1} | {_code(_cell(c.location))} | "
                         + " | ".join(show(c) for _, show in scores) + f" | {symbol} |")
        lines.append("")
    lines += ["_" + "; ".join(LEGENDS[report.score_kind]) + "_", ""]
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
