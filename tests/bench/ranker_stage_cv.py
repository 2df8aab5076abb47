#!/usr/bin/env python3
"""Does a changed lexical stage order better once the ranker is refitted to it?

``train_ranker.py`` caches each training row's candidates and features under
``--features``. Extract the rows again with a changed stage into another folder (the
changed code first on ``PYTHONPATH``, ``train_ranker.py --features OTHER``), then this
cross-validates the shipped feature set on both sets of rows (3 folds by repository, as
``train_ranker.py --cv``; the held-out rows are never scored) and compares them case by
case and query mode: the fixed order and the learned one, with the 95 % paired bootstrap
interval of each gain, over every training row, the benchmark's dev rows by mode and each
language's mined rows. A stage change alters the candidates themselves, so rows are paired
by case, not by candidate.

    python tests/bench/ranker_stage_cv.py --other ~/.cache/slm-rerank-bench/features-ws
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

import train_ranker as tr
from ranker_phrase_cv import training_rows

from slm_rerank.lexical.ranker import shipped_model

Scored = dict[tuple[str, str], tuple[dict[str, float], dict[str, float]]]


def scored(rows: list[tr.Row], features: list[str], l2: float) -> Scored:
    """Each row's (fixed, learned) metrics by (case, mode), cross-validated."""
    ordered = tr.scored_rows(rows)
    return {(r.case, r.mode): s for r, s in zip(ordered, tr.cv_scored(rows, features, l2),
                                                strict=True)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--other", type=Path, required=True,
                    help="the features folder the changed stage extracted")
    ap.add_argument("--base", type=Path, default=tr.CACHE / "features")
    ap.add_argument("--train-cap", type=int, default=40)
    ap.add_argument("--l2", type=float, default=0.01)
    args = ap.parse_args(argv)
    features = list(shipped_model().features)
    base_rows, _ = training_rows(args.train_cap, args.base)
    other_rows, _ = training_rows(args.train_cap, args.other)
    base, other = scored(base_rows, features, args.l2), scored(other_rows, features, args.l2)
    keys = sorted(set(base) & set(other))
    print(f"rows: {len(base)} base, {len(other)} changed, {len(keys)} in both", file=sys.stderr)
    lang = {(r.case, r.mode): ("dev" if r.split == "dev" else r.lang) for r in base_rows}
    slices: dict[str, Callable[[tuple[str, str]], bool]] = {
        "all training rows": lambda k: True,
        "benchmark dev, titles": lambda k: lang[k] == "dev" and k[1] == "title",
        "benchmark dev, whole issues": lambda k: lang[k] == "dev" and k[1] == "query"}
    for name in sorted({v for v in lang.values() if v != "dev"}):
        slices[f"mined {name}"] = lambda k, name=name: lang[k] == name
    for which, at in (("fixed order", 0), ("learned order", 1)):
        for name, keep in slices.items():
            pick = [k for k in keys if keep(k)]
            # gain_text compares the second of each pair: here base's and the changed
            # stage's fixed (or learned) metrics of the same case and mode
            gain = tr.gain_text([({}, other[k][at]) for k in pick],
                                [({}, base[k][at]) for k in pick])
            print(f"{which} | {name} ({len(pick)}): {gain}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
