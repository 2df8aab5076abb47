"""An slm-rerank plugin: the `paths` output format, one path per line."""

from __future__ import annotations

from collections.abc import Callable

import slm_rerank
from slm_rerank.registrations import OutputFormatter
from slm_rerank.report import Report, visible


def render_paths(report: Report, tty: bool = False) -> str:
    """One path per line, each file once, best first."""
    paths = dict.fromkeys(c.path for c in report.results)
    # A name is the repository's: escaped, so one holding a newline or ESC stays one line
    # and cannot drive the terminal (docs/output.md, "File names with unusual characters").
    return "".join(f"{visible(path)}\n" for path in paths)


@slm_rerank.hookimpl
def register_output_formatters(register: Callable[[OutputFormatter], None]) -> None:
    register(OutputFormatter(name="paths", description="one path per line, for xargs",
                             render=render_paths))
