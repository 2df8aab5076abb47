#!/usr/bin/env python3
"""Quality only, fast: `run_search` in one process over every case, file-level Hit@k.

    python tests/bench/quick.py [--repo owner/name] [--json ranks.json]

For trying a ranking change in a minute instead of a full `run.py` (no baselines, no
latency, no subprocess per query). Uses SLM_RERANK_CACHE_DIR or the user cache as usual.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from cases import MODES, add_case_options, load_cases, tree_ready
from metrics import first_gold_rank, hit_at, mean, reciprocal_rank

from slm_rerank.cache_folder import cache_path
from slm_rerank.host import Host
from slm_rerank.pipeline import SearchRequest, run_search


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    add_case_options(ap)
    ap.add_argument("--repo")
    ap.add_argument("--json", type=Path, help="write each case's gold rank per mode here")
    args = ap.parse_args()
    host = Host.from_environment(flags={"top_k": 10})
    cache = cache_path(host.settings)
    started = time.perf_counter()
    ranks: dict[str, list[dict[str, object]]] = {mode: [] for mode in MODES}
    cases = load_cases(args.cases)
    gold = {c.id: c.gold_files for c in cases}
    for case in cases:
        tree = case.tree(args.trees)
        if (args.repo and case.repo != args.repo) or not tree_ready(tree):
            continue
        for mode in MODES:
            report = run_search(SearchRequest(query=case.text(mode), root=tree.resolve(),
                                              cache_dir=cache), host)
            paths = [c.path for c in report.results]
            ranks[mode].append({"id": case.id, "paths": paths,
                                "rank": first_gold_rank(paths, case.gold_files)})
    for mode, rows in ranks.items():
        hits = {k: 100 * mean(float(hit_at(r["paths"], gold[r["id"]], k)) for r in rows)
                for k in (1, 5, 10)}
        mrr = mean(reciprocal_rank(r["paths"], gold[r["id"]]) for r in rows)
        print(f"{mode}: n={len(rows)} Hit@1 {hits[1]:.1f} Hit@5 {hits[5]:.1f} "
              f"Hit@10 {hits[10]:.1f} MRR@10 {mrr:.3f}")
    print(f"{time.perf_counter() - started:.0f} s")
    if args.json:
        args.json.write_text(json.dumps(ranks, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
