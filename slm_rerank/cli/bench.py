"""`slm-rerank bench --cases FILE.jsonl`: the calibrate measurement on the user's own
labelled queries, in the tree as it is."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from slm_rerank.cli.calibrate import (
    MODEL_FLAGS,
    fast_option,
    measure,
    terminate_cleanly,
    weights_option,
)
from slm_rerank.cli.model_flags import model_options
from slm_rerank.cli.terminal import fail, text_or_json
from slm_rerank.errors import SlmRerankError


@click.command()
@click.argument("root", default=".",
                type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--cases", "cases_file", required=True, metavar="FILE.jsonl",
              type=click.Path(dir_okay=False, path_type=Path),
              help='One JSON object a line: {"query": ..., "gold_files": [...], '
                   '"gold_lines": {path: [[start, end]]} (optional), "id": ... (optional)}.')
@fast_option
@weights_option
@text_or_json
@model_options(only=MODEL_FLAGS)
def bench(root: Path, cases_file: Path, fast: bool, weights: list[float], format_name: str,
          **model_flags: Any) -> None:
    """Measure ranking on your own labelled queries, searched in ROOT (default: here).

    Prints Hit@1/5/10 and MRR@10 of the lexical order, the judge alone and the fused
    order at each weight (with --fast, the lexical order alone), with a 95 % interval on
    each one's difference from the lexical order, then each case's rank of its first gold
    file in each order ("miss": not ranked). Gold files are paths relative to ROOT; when
    no case can be measured it is an error.
    """
    from slm_rerank.calibration.labelled import load_cases
    from slm_rerank.calibration.run import same_tree

    with terminate_cleanly():
        try:
            cases = load_cases(cases_file)
            folder = root.resolve()
            measure(folder, cases, lambda cache: same_tree(folder), fast, weights, False,
                    format_name, model_flags,
                    [f"{folder}: {len(cases)} cases from {cases_file}"],
                    {"root": str(folder), "cases_file": str(cases_file)}, per_case=True)
        except SlmRerankError as exc:
            fail(str(exc))
