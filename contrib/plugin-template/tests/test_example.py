from __future__ import annotations

import slm_rerank_example

from slm_rerank.report import Citation, Report
from slm_rerank.testing import OutputFormatterContract


class TestPathsFormat(OutputFormatterContract):
    plugin = slm_rerank_example
    distribution = "slm-rerank-example"
    names = {"paths"}


def test_each_path_once_in_rank_order() -> None:
    report = Report(query="q", root="/r", mode="fast", results=[
        Citation("b.py", 1, 5, None, 2.0, 2.0),
        Citation("a.py", 1, 5, None, 1.0, 1.0),
        Citation("b.py", 9, 12, None, 0.5, 0.5),
    ])
    assert slm_rerank_example.render_paths(report) == "b.py\na.py\n"
