#!/usr/bin/env python3
"""The shipped learned ranker against the baselines of a ``run.py --json`` result, on the
same cases: per language and overall, Hit@1 and MRR@10.

    python tests/bench/run.py --cases ~/.cache/slm-rerank-bench/training/cases.jsonl \\
        --split held-out --per-repo 8 --systems fast,bm25-src,bm25-code --json base.json
    python tests/bench/ranker_vs_bm25.py base.json

The learned order is computed in process (``train_ranker.rows_of``: the lexical stage with
each case's history at its base commit, as a user's checkout at that commit has it) and
ordered by the model ``slm_rerank/lexical/ranker.json`` holds.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from pathlib import Path

from train_ranker import CACHE, REPO_ROOT, load, metrics, order, rows_of

from slm_rerank.calibration.measure import paired_interval
from slm_rerank.host import Host
from slm_rerank.lexical.ranker import load_model

#: the baseline the issue's target is a margin over (BM25 over the source files)
MARGIN_OVER = "bm25-code"


def margin(ours: dict[str, float], theirs: dict[str, float]) -> str:
    """The mean per-case MRR@10 gain of ``ours`` over ``theirs`` on the cases both
    answered, and its 95 % paired bootstrap interval."""
    both = sorted(set(ours) & set(theirs))
    if not both:
        return "n/a"
    diff = [ours[c] - theirs[c] for c in both]
    low, high = paired_interval(diff)
    return f"{sum(diff) / len(diff):+.3f} ({low:+.3f} .. {high:+.3f})"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("baseline", type=Path, help="run.py --json output")
    ap.add_argument("--cases", type=Path, default=CACHE / "training" / "cases.jsonl")
    ap.add_argument("--trees", type=Path, default=CACHE / "trees")
    ap.add_argument("--features", type=Path, default=CACHE / "features")
    ap.add_argument("--mirrors", type=Path, default=REPO_ROOT.parent / ".mirror")
    ap.add_argument("--model", type=Path,
                    default=REPO_ROOT / "slm_rerank" / "lexical" / "ranker.json")
    args = ap.parse_args(argv)
    base = json.loads(args.baseline.read_text())
    results = base["results"]
    wanted = {r["case_id"] for r in results}
    cases = [c for c in load(args.cases) if c["id"] in wanted]
    host = Host.from_environment(start=Path("/"))
    model = load_model(args.model)
    rows = rows_of(cases, args.trees, args.features, host, "compared", args.mirrors)
    # (language, mode, system) -> per-case metrics; and each case's MRR@10 by system
    table: dict[tuple[str, str, str], list[dict[str, float]]] = defaultdict(list)
    rr: dict[tuple[str, str, str], dict[str, float]] = defaultdict(dict)
    measured = {(r.case, r.mode) for r in rows}
    for r in rows:
        for system, m in (("fixed (in process)", metrics(order(r, None), r.gold)),
                          ("learned", metrics(order(r, model), r.gold))):
            for lang in (r.lang, "all"):
                table[(lang, r.mode, system)].append(m)
                rr[(lang, r.mode, system)][r.case] = m["mrr10"]
    for r in results:
        if (r["case_id"], r["mode"]) not in measured or r.get("error"):
            continue
        m = {"hit1": float(r["hit1"]), "mrr10": float(r["rr10"])}
        for lang in (r["lang"], "all"):
            table[(lang, r["mode"], r["system"])].append(m)
            rr[(lang, r["mode"], r["system"])][r["case_id"]] = m["mrr10"]
    systems = sorted({key[2] for key in table}, key=lambda s: (s != "learned", s))
    print("| language | mode | cases | " + " | ".join(
        f"{s} Hit@1 / MRR@10" for s in systems) + f" | learned − {MARGIN_OVER}, MRR@10 |")
    print("| --- | --- | ---: |" + " --- |" * (len(systems) + 1))
    for lang in sorted({k[0] for k in table}, key=lambda x: (x == "all", x)):
        for mode in ("title", "query"):
            cells = []
            count = len(table.get((lang, mode, "learned"), []))
            if not count:
                continue
            for s in systems:
                got = table.get((lang, mode, s), [])
                if not got:
                    cells.append("n/a")
                    continue
                hit = 100 * sum(m["hit1"] for m in got) / len(got)
                mrr = sum(m["mrr10"] for m in got) / len(got)
                cells.append(f"{hit:.1f} / {mrr:.3f}")
            print(f"| {lang} | {mode} | {count} | " + " | ".join(cells) + " | "
                  + margin(rr[(lang, mode, "learned")], rr.get((lang, mode, MARGIN_OVER), {}))
                  + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
