#!/usr/bin/env python3
"""When should the learned order stand aside for a query about tests or docs?

A search keeps the fixed lexical order when the query is about tests or docs: the models
learned from fixes, whose answers are source files. Until 2026-12-03 "about" meant that a
word of the first line names tests or docs (``QueryTerms.about_tests``/``about_docs``), so
a bug report such as "ValueError when collecting tests" or "docstring default arg is
broken" kept the fixed order. ``asks_tests``/``asks_docs`` is the judge's narrower reading
(``model/intent.py`` had it): the first line asks for them as the thing to find.

This compares the two rules by cross-validation by repository over the training rows of
``train_ranker.py`` (the shipped feature set; the fit does not depend on the rule, only
which rows keep the fixed order does), row by row, with the 95 % paired bootstrap interval.
The held-out rows are not scored here.

    python tests/bench/ranker_asks_cv.py
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from dataclasses import replace

import train_ranker as tr
from ranker_phrase_cv import training_rows

from slm_rerank.lexical.ranker import shipped_model
from slm_rerank.pipeline import query_terms


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--train-cap", type=int, default=40)
    ap.add_argument("--l2", type=float, default=0.01)
    args = ap.parse_args(argv)
    rows, cases = training_rows(args.train_cap)
    named, asked = [], []
    for r in rows:
        case = cases[r.case]
        terms = query_terms(case["title"] if r.mode == "title" else case["query"])
        named.append(replace(r, asks_kind=terms.about_tests or terms.about_docs))
        asked.append(replace(r, asks_kind=terms.asks_tests or terms.asks_docs))
    features = list(shipped_model().features)
    before = tr.cv_scored(named, features, args.l2)
    after = tr.cv_scored(asked, features, args.l2)
    ordered = tr.scored_rows(asked)
    was = tr.scored_rows(named)
    slices: dict[str, Callable[[int], bool]] = {
        "all training rows": lambda i: True,
        "benchmark dev, titles": lambda i: ordered[i].split == "dev"
        and ordered[i].mode == "title",
        "benchmark dev, whole issues": lambda i: ordered[i].split == "dev"
        and ordered[i].mode == "query",
        "mined rows": lambda i: ordered[i].split == "train",
        "rows the rules tell apart": lambda i: ordered[i].asks_kind != was[i].asks_kind,
    }
    print(f"rows named tests or docs: {sum(r.asks_kind for r in was)}; asked for them: "
          f"{sum(r.asks_kind for r in ordered)}")
    for name, keep in slices.items():
        pick = [i for i in range(len(ordered)) if keep(i)]
        if pick:
            gain = tr.gain_text([after[i] for i in pick], [before[i] for i in pick])
            print(f"named -> asked | {name} ({len(pick)}): {gain}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
