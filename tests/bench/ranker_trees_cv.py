#!/usr/bin/env python3
"""Would small gradient-boosted trees order the candidates better than the shipped linear
ranker? Both are cross-validated on the same training rows, in the same three folds by
repository, and compared row by row (issue 29: "a linear or pairwise model, or small
gradient-boosted trees: choose by measurement").

The rows are ``train_ranker.py``'s (its feature cache: run it first to extract them). The
trees are LightGBM's LambdaRank over the same groups the linear fit sees (each case's first
``GROUP_SIZE`` candidates in lexical order, gold = 1) and score every candidate of a held-out
row; a row whose query asks for tests or docs keeps the fixed order under both, as a search
does. LightGBM is a benchmark requirement only (``tests/bench/requirements.txt``): the tool
itself never imports it.

    python tests/bench/ranker_trees_cv.py --train-cap 40 --without digit_name
    python tests/bench/ranker_trees_cv.py --setting 200:7:0.05 --setting 400:7:0.03:q
"""

from __future__ import annotations

import argparse
import math
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from train_ranker import (
    CACHE,
    SHARED,
    Row,
    capped,
    folds_by_repo,
    load,
    mean,
    metrics,
    order,
    rows_of,
)

from slm_rerank.calibration.learning import GROUP_SIZE, fit
from slm_rerank.calibration.measure import paired_interval
from slm_rerank.host import Host
from slm_rerank.lexical.features import FEATURES
from slm_rerank.lexical.filetypes import path_kind

KEYS = ("hit1", "hit5", "hit10", "mrr10")


@dataclass(frozen=True)
class Setting:
    """One way to grow the trees: ``ROUNDS:LEAVES:RATE``, ``:q`` to add the query's features."""

    rounds: int
    leaves: int
    rate: float
    query_features: bool

    @classmethod
    def parse(cls, text: str) -> Setting:
        parts = text.split(":")
        if len(parts) not in (3, 4) or parts[3:] not in ([], ["q"]):
            raise argparse.ArgumentTypeError(f"setting {text!r}: want ROUNDS:LEAVES:RATE[:q]")
        return cls(int(parts[0]), int(parts[1]), float(parts[2]), parts[3:] == ["q"])

    def __str__(self) -> str:
        return (f"trees: {self.rounds} rounds, {self.leaves} leaves, rate {self.rate}"
                + (", query features" if self.query_features else ""))


def matrix(row: Row, index: list[int], query_features: bool) -> np.ndarray:
    """A row's candidates as a matrix of the chosen features (plus, when asked, two of the
    query's own: whole text or title, and how many candidates it has)."""
    values = np.asarray(row.values, dtype=float)[:, index]
    if not query_features:
        return values
    extra = np.tile([float(row.mode == "query"), math.log1p(len(row.values))],
                    (len(row.values), 1))
    return np.hstack([values, extra])


def tree_order(row: Row, model: object, index: list[int], query_features: bool) -> list[str]:
    if row.asks_kind or len(row.values) < 2:
        return row.paths
    scores = model.predict(matrix(row, index, query_features))  # type: ignore[attr-defined]
    return [row.paths[i] for i in sorted(range(len(row.paths)), key=lambda i: (-scores[i], i))]


def miss_of(ranked: list[str], gold: list[str]) -> tuple[str, str, str]:
    """Where the first gold file lands (a band of ranks), and, when it is 2nd to 5th, the
    kind of the file put first and where that file is against the gold one."""
    golden = set(gold)
    first = next((k for k, p in enumerate(ranked, 1) if p in golden), None)
    if first is None:
        return "not a candidate", "", ""
    band = {1: "1", 2: "2"}.get(first) or ("3-5" if first <= 5 else "6-10" if first <= 10
                                           else "below 10")
    if not 2 <= first <= 5:
        return band, "", ""
    top, found = ranked[0].rpartition("/")[0], ranked[first - 1].rpartition("/")[0]
    place = ("same folder" if top == found else "a parent or child folder"
             if top.startswith(found) or found.startswith(top) else "elsewhere")
    return band, path_kind(ranked[0]), place


def fit_trees(train: list[Row], index: list[int], setting: Setting, min_leaf: int) -> object:
    import lightgbm

    useful = [r for r in train if len(r.values) > 1 and set(r.gold) & set(r.paths[:GROUP_SIZE])]
    xs, ys, sizes = [], [], []
    for r in useful:
        head = Row(r.case, r.repo, r.lang, r.split, r.mode, r.date, r.paths[:GROUP_SIZE],
                   r.values[:GROUP_SIZE], r.gold, r.asks_kind)
        xs.append(matrix(head, index, setting.query_features))
        gold = set(r.gold)
        ys += [int(p in gold) for p in head.paths]
        sizes.append(len(head.paths))
    params = {"objective": "lambdarank", "learning_rate": setting.rate,
              "num_leaves": setting.leaves, "min_data_in_leaf": min_leaf,
              "lambdarank_truncation_level": 10, "seed": 7, "deterministic": True,
              "force_row_wise": True, "num_threads": 1, "verbose": -1}
    data = lightgbm.Dataset(np.vstack(xs), label=np.asarray(ys), group=sizes)
    model = lightgbm.train(params, data, num_boost_round=setting.rounds)
    return model


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--swe-cases", type=Path, default=SHARED / "swe-dev.jsonl")
    ap.add_argument("--mined-cases", type=Path, default=CACHE / "training" / "cases.jsonl")
    ap.add_argument("--trees", type=Path, default=CACHE / "trees")
    ap.add_argument("--features", type=Path, default=CACHE / "features")
    ap.add_argument("--train-cap", type=int, default=12)
    ap.add_argument("--without", default="", help="features left out (comma-separated)")
    ap.add_argument("--l2", type=float, default=0.01, help="the linear model's L2")
    ap.add_argument("--setting", dest="settings", type=Setting.parse, action="append",
                    help="ROUNDS:LEAVES:RATE[:q] (repeat to try several against the same "
                    "linear fits; :q adds two features of the query: mode, candidates); "
                    "default 200:7:0.05")
    ap.add_argument("--min-leaf", type=int, default=20)
    ap.add_argument("--misses", action="store_true",
                    help="also say where the linear order leaves the first gold file, and what "
                    "it puts first when that file is 2nd to 5th")
    args = ap.parse_args(argv)

    left_out = {f.strip() for f in args.without.split(",") if f.strip()}
    features = [f for f in FEATURES if f not in left_out]
    index = [list(FEATURES).index(f) for f in features]
    host = Host.from_environment(start=Path("/"))
    swe = load(args.swe_cases)
    mined = capped(load(args.mined_cases), args.train_cap, 0) if args.mined_cases.exists() else []
    rows = rows_of(swe, args.trees, args.features, host, "benchmark", Path("/nonexistent"),
                   cached_only=True)
    rows += rows_of(mined, args.trees, args.features, host, "mined", Path("/nonexistent"),
                    cached_only=True)
    train = [r for r in rows if r.split in ("dev", "train")]
    if not train:
        print(f"no cached training rows under {args.features}: run train_ranker.py first",
              file=sys.stderr)
        return 2
    print(f"{len(train)} training rows, {len(features)} features", file=sys.stderr)

    settings = args.settings or [Setting(200, 7, 0.05, False)]
    # per row: fixed, linear, then each setting's trees
    scored: list[list[dict[str, float]]] = []
    folds = folds_by_repo(train, 3)
    misses: Counter[tuple[str, str, str]] = Counter()
    for i, held in enumerate(folds):
        rest = [r for j, f in enumerate(folds) if j != i for r in f]
        linear = fit([r.group() for r in rest], name="cv", features=features, l2=args.l2)
        grown = [fit_trees(rest, index, setting, args.min_leaf) for setting in settings]
        scored += [[metrics(order(r, None), r.gold), metrics(order(r, linear), r.gold)]
                   + [metrics(tree_order(r, model, index, setting.query_features), r.gold)
                      for model, setting in zip(grown, settings, strict=True)]
                   for r in held]
        misses.update(miss_of(order(r, linear), r.gold) for r in held)
        print(f"  fold {i + 1}: {len(held)} rows", file=sys.stderr)

    print("| order | rows | Hit@1 | Hit@5 | Hit@10 | MRR@10 | against linear: Hit@1 (95 % CI) "
          "| MRR@10 (95 % CI) |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | --- | --- |")
    names = ["fixed", f"linear (L2 {args.l2})"] + [str(s) for s in settings]
    for w, name in enumerate(names):
        cells = [f"{mean([s[w][k] for s in scored]):.3f}" if k == "mrr10"
                 else f"{mean([s[w][k] for s in scored]) * 100:.1f}" for k in KEYS]
        versus = ["", ""]
        if w >= 2:
            for n, (key, f, fmt) in enumerate((("hit1", 100, ".1f"), ("mrr10", 1, ".3f"))):
                diff = [s[w][key] - s[1][key] for s in scored]
                low, high = paired_interval(diff)
                versus[n] = (f"{mean(diff) * f:+{fmt}} ({low * f:+{fmt}} .. "
                             f"{high * f:+{fmt}})")
        print(f"| {name} | {len(scored)} | " + " | ".join(cells + versus) + " |")
    if args.misses:
        print("\nlinear order, first gold file at: " + ", ".join(
            f"{band} {sum(n for m, n in misses.items() if m[0] == band)}"
            for band in ("1", "2", "3-5", "6-10", "below 10", "not a candidate")))
        for part, label in ((1, "kind of the file put first"), (2, "where it is")):
            counts: Counter[str] = Counter()
            for m, n in misses.items():
                if m[part]:
                    counts[m[part]] += n
            print(f"when it is 2nd to 5th, {label}: " + ", ".join(
                f"{k} {n}" for k, n in counts.most_common()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
