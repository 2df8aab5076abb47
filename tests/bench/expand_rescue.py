#!/usr/bin/env python3
"""What ``--expand`` does on the cases the lexical stage does not locate, against a real
model server.

    python tests/bench/expand_rescue.py -e http://127.0.0.1:8039 --sample 60 --limit 20

For each sampled case and query mode it runs ``--fast`` twice, without and with the
``llm`` expander (plugin slm-rerank-expand: the model is asked once per query for words
the query lacks). A case is "not located" when no gold file is in the first five files
without expansion: those are the cases expansion exists for. It reports, over them, how
many expansion rescued (a gold file enters the top 5) and, over the located cases, how
many it hurt (a gold file in the top 5 drops out), how many top 5s changed, and the
median seconds of the expanded search.
"""

from __future__ import annotations

import argparse
import sys
import time

from cases import MODES, add_case_options, spread_sample
from metrics import hit_at

from slm_rerank.cache_folder import cache_path, ensure_writable
from slm_rerank.host import Host
from slm_rerank.pipeline import SearchRequest, run_search


def files(report: object) -> list[str]:
    out: list[str] = []
    for c in report.results:  # type: ignore[attr-defined]
        if c.path not in out:
            out.append(c.path)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    add_case_options(ap)
    ap.add_argument("-e", "--endpoint", required=True, help="model server URL")
    ap.add_argument("--sample", type=int, default=60, help="cases, spread evenly")
    ap.add_argument("--limit", type=int, default=20,
                    help="stop after this many not-located queries per mode")
    ap.add_argument("--modes", default=",".join(MODES))
    args = ap.parse_args()
    host = Host.from_environment(flags={"base_url": args.endpoint, "timeout": 120.0,
                                        "top_k": 10})
    cache = ensure_writable(cache_path(host.settings))
    sample = spread_sample(args.cases, args.trees, args.sample)
    for mode in args.modes.split(","):
        missed = rescued = hurt = located = changed = 0
        seconds: list[float] = []
        for case in sample:
            if missed >= args.limit:
                break
            root = case.tree(args.trees).resolve()
            base = SearchRequest(query=case.text(mode), root=root, fast=True,
                                 cache_dir=cache)
            plain = files(run_search(base, host))
            started = time.perf_counter()
            wider = SearchRequest(query=case.text(mode), root=root, fast=True,
                                  cache_dir=cache, expanders=["llm"])
            report = run_search(wider, host)
            seconds.append(time.perf_counter() - started)
            grown = files(report)
            added = [n for n in report.notes if n.startswith(("expander", "query expansion"))]
            was, now = hit_at(plain, case.gold_files, 5), hit_at(grown, case.gold_files, 5)
            changed += grown[:5] != plain[:5]
            if was:
                located += 1
                hurt += not now
            else:
                missed += 1
                rescued += now
            print(f"{mode} {case.id}: {'hit' if was else 'miss'} -> {'hit' if now else 'miss'}"
                  f" {added[:1]}", file=sys.stderr)
        seconds.sort()
        print(f"| {mode} | {located + missed} | {missed} | {rescued} | {located} | {hurt} | "
              f"{changed} | {seconds[len(seconds) // 2]:.1f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
