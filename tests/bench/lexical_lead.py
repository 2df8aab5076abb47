#!/usr/bin/env python3
"""How often the lexical order's first file is right, by how far it leads: no model.

    python tests/bench/lexical_lead.py [--split dev] [--modes query] [--json leads.json]

For each case and query mode it ranks the tree lexically (what ``--fast`` does) and reads
``lexical.rank.lead``: the first file's best chunk score over the next file's. It prints
the lexical Hit@1 of the cases whose lead is at least each threshold and of those below
it: where the lexical stage is sure and right, a judge can only spend time; where it is
unsure, the judge has room to lift. The cascade's ``DECISIVE_LEAD`` is chosen on the dev
split with this and the judge's own runs, and reported on the held-out split.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from cases import SPLITS, add_case_options, case_split, in_split, load_cases, tree_ready
from metrics import first_gold_rank

from slm_rerank.cache_folder import cache_path
from slm_rerank.host import Host
from slm_rerank.lexical.rank import lead
from slm_rerank.pipeline import SearchRequest, fuse, gather, query_terms, rank, select

THRESHOLDS = (1.05, 1.1, 1.2, 1.3, 1.5, 2.0)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    add_case_options(ap)
    ap.add_argument("--split", choices=SPLITS, default="all")
    ap.add_argument("--modes", default="title,query")
    ap.add_argument("--json", type=Path, help="write each case's lead and rank here")
    args = ap.parse_args()
    host = Host.from_environment(flags={"top_k": 10})
    cache = cache_path(host.settings)
    started = time.perf_counter()
    rows: list[dict[str, object]] = []
    for case in load_cases(args.cases):
        tree = case.tree(args.trees)
        if not tree_ready(tree) or not in_split(case, args.split):
            continue
        for mode in args.modes.split(","):
            request = SearchRequest(query=case.text(mode), root=tree.resolve(),
                                    cache_dir=cache)
            notes: list[str] = []
            ranked = rank(request, host, gather(request, host, query_terms(request.query),
                                                notes), notes)
            paths = [f.item.path for f in select(fuse(ranked), 10, chunks=False)]
            rows.append({"id": case.id, "mode": mode, "split": case_split(case),
                         "lead": lead(ranked),
                         "rank": first_gold_rank(paths, case.gold_files)})
    for mode in args.modes.split(","):
        mine = [r for r in rows if r["mode"] == mode]
        print(f"{mode}: {len(mine)} cases, lexical Hit@1 "
              f"{100 * sum(r['rank'] == 1 for r in mine) / max(len(mine), 1):.1f}")
        print("| lead at least | cases | Hit@1 there | cases below | Hit@1 below |")
        print("| ---: | ---: | ---: | ---: | ---: |")
        for t in THRESHOLDS:
            sure = [r for r in mine if r["lead"] is not None and r["lead"] >= t]
            unsure = [r for r in mine if r not in sure]
            print(f"| {t:g} | {len(sure)} | {_hit1(sure)} | {len(unsure)} | {_hit1(unsure)} |")
    print(f"{time.perf_counter() - started:.0f} s")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    return 0


def _hit1(rows: list[dict[str, object]]) -> str:
    return f"{100 * sum(r['rank'] == 1 for r in rows) / len(rows):.1f}" if rows else "-"


if __name__ == "__main__":
    sys.exit(main())
