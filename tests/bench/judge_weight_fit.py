#!/usr/bin/env python3
"""The judge's coefficient in the fused score, learned from verdicts already asked for.

    python tests/bench/model_quality.py -e URL --split dev --sample 24 --rerank-top 4 \\
        --prompt-chars 800 --concurrency 1 --json dev.json
    python tests/bench/judge_weight_fit.py dev.json                 # choose on dev
    python tests/bench/judge_weight_fit.py held.json --weights 0.1,1,W  # report on held-out

A search fuses a judged chunk as ``w * (logit(p) - length penalty) + z + prior``
(``model/fusion.py``): ``z`` is the order's score standardised over the judged chunks (the
learned ranker's, by default), ``prior`` the file-kind prior. That is a linear model with
the judge's verdict as one more feature and ``w`` its coefficient. This script reads the
verdicts ``model_quality.py --json`` recorded (with each case's first chunks and their
scores), fuses them by the search's own ``fuse_scores`` at every weight of a grid, with
the priors a search adds, and prints Hit@1/5/10 and MRR@10 of each weight, for one-line
queries and whole issues apart: a profile has one weight for each
(``short_query_weight``, ``judge_weight``), chosen by ``intent.reads_as_issue`` as a
search chooses. No model is asked.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from cases import DEFAULT_CASES, load_cases
from metrics import mean

from slm_rerank.calibration.measure import first_gold_rank, paired_interval
from slm_rerank.lexical.scores import kind_prior
from slm_rerank.model.cascade import decisive_lead
from slm_rerank.model.fusion import fuse_scores
from slm_rerank.model.intent import reads_as_issue
from slm_rerank.pipeline import query_terms

GRID = "0,0.05,0.1,0.25,0.5,0.75,1,1.5,2"


def files(paths: list[str], k: int = 10) -> list[str]:
    return list(dict.fromkeys(paths))[:k]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("runs", type=Path, help="model_quality.py --json output")
    ap.add_argument("--cases", type=Path, default=DEFAULT_CASES)
    ap.add_argument("--weights", default=GRID)
    ap.add_argument("--exponent", type=float, default=0.12,
                    help="the profile's length_exponent (qwen: 0.12)")
    ap.add_argument("--cascade", action="store_true",
                    help="as the cascade would: a query whose first file leads by "
                         "DECISIVE_LEAD or more keeps the order without the judge (needs "
                         "rows with 'lead')")
    args = ap.parse_args()
    weights = [float(w) for w in args.weights.split(",")]
    cases = {c.id: c for c in load_cases(args.cases)}
    rows = json.loads(args.runs.read_text())
    # group -> order -> per-row first gold rank
    ranks: dict[str, dict[str, list[int | None]]] = {}
    judged_here: dict[str, int] = {}  # group -> queries the judge is asked about
    for row in rows:
        case = cases[row["id"]]
        text = case.text(row["mode"])
        group = "whole issue" if reads_as_issue(text) else "one-line"
        terms = query_terms(text)
        chunks = row["chunks"]
        lexical = [score for _, score in chunks]
        verdicts = {int(i): p for i, p in row["verdicts"].items()}
        lengths = {int(i): n for i, n in row["lengths"].items()}
        priors = {i: kind_prior(chunks[i][0], terms) for i in verdicts}
        orders = {"lexical (no judge)": files([path for path, _ in chunks])}
        decisive = args.cascade and decisive_lead(row["lead"]) is not None
        judged_here[group] = judged_here.get(group, 0) + (not decisive)
        for w in weights:
            fused = fuse_scores(lexical, {} if decisive else verdicts, w, lengths,
                                args.exponent, priors)
            orders[f"w={w:g}"] = files([chunks[f.index][0] for f in fused])
        for name, order in orders.items():
            ranks.setdefault(group, {}).setdefault(name, []).append(
                first_gold_rank(order, row["gold"]))
    for group, by_order in sorted(ranks.items()):
        base = [1 / r if r else 0.0 for r in by_order["lexical (no judge)"]]
        print(f"\n{group}: {len(base)} queries, {judged_here[group]} judged\n")
        print("| order | Hit@1 | Hit@5 | Hit@10 | MRR@10 | ΔMRR@10 (95 % CI) |")
        print("| --- | ---: | ---: | ---: | ---: | --- |")
        for name, found in by_order.items():
            rr = [1 / r if r else 0.0 for r in found]
            hit = [100 * mean(float(r is not None and r <= k) for r in found) for k in (1, 5, 10)]
            diff = [a - b for a, b in zip(rr, base, strict=True)]
            low, high = paired_interval(diff)
            delta = "" if name.startswith("lexical") else \
                f"{mean(diff):+.3f} ({low:+.3f} .. {high:+.3f})"
            print(f"| {name} | {hit[0]:.1f} | {hit[1]:.1f} | {hit[2]:.1f} | {mean(rr):.3f} "
                  f"| {delta} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
