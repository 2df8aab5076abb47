#!/usr/bin/env python3
"""How far `--dirty` moves files, on the benchmark cases: the size of `dirty_bonus`.

    python tests/bench/dirty_lift.py [--sample 60] [--bonus 0.5]

Two simulated working trees per case and mode (the cases' trees are clean checkouts, so
which files are "uncommitted" is set here, in process, instead of asking git):

- **relevant**: the case's gold files are the changed ones, as when you ask about the code
  you are editing. Reported: how often a gold file is in the model's head (the first
  `rerank_top` = 16 chunks, file-diverse, as `pipeline.head` picks them) and in the top 5
  files, without and with the bonus.
- **unrelated**: one non-gold file with weak evidence (lexical rank 30-60) is the changed
  one. Reported: how often it reaches the head and the top 5 with the bonus, and how often
  a gold file drops out of the top 5 because of it.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

from cases import MODES, add_case_options, load_cases, tree_ready

from slm_rerank import pipeline
from slm_rerank.cache_folder import cache_path
from slm_rerank.context import dirty
from slm_rerank.host import Host
from slm_rerank.pipeline import SearchRequest

HEAD = 16


def ranked_files(request: SearchRequest, host: Host, changed: set[str]) -> tuple[list[str],
                                                                               list[str]]:
    """(the head's files, the file order) for one search with ``changed`` as dirty."""
    dirty.find_dirty = lambda root: dirty.DirtyFiles({p: "modified" for p in changed})
    notes: list[str] = []
    terms = pipeline.query_terms(request.query)
    gathered = pipeline.gather(request, host, terms, notes)
    if request.dirty:
        pipeline.prefer_dirty(request, host, gathered, notes, [])
    ranked = pipeline.rank(request, host, gathered, notes)
    head = {ranked.chunks[i].path for i in pipeline.head(ranked, HEAD)}
    order = [f.item.path for f in pipeline.select(pipeline.fuse(ranked), 10**6, False)]
    return sorted(head), order


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    add_case_options(ap)
    ap.add_argument("--sample", type=int, default=60)
    ap.add_argument("--bonus", type=float, default=None, help="dirty_bonus (default: setting)")
    ap.add_argument("--seed", type=int, default=9)
    args = ap.parse_args()
    host = Host.from_environment(flags={"top_k": 10, "dirty_bonus": args.bonus})
    cache = cache_path(host.settings)
    rng = random.Random(args.seed)
    cases = [c for c in load_cases(args.cases) if tree_ready(c.tree(args.trees))]
    cases = sorted(rng.sample(cases, min(args.sample, len(cases))), key=lambda c: c.id)
    started = time.perf_counter()
    rows = {mode: {"n": 0, "head0": 0, "head1": 0, "top5_0": 0, "top5_1": 0, "u_n": 0,
                   "u_head": 0, "u_top5": 0, "u_lost": 0} for mode in MODES}
    for case in cases:
        for mode in MODES:
            row = rows[mode]
            query, root = case.text(mode), case.tree(args.trees).resolve()

            def make(on: bool, query: str = query, root: Path = root) -> SearchRequest:
                return SearchRequest(query=query, root=root, cache_dir=cache,
                                     dirty=on)
            gold = set(case.gold_files)
            head0, order0 = ranked_files(make(False), host, set())
            head1, order1 = ranked_files(make(True), host, gold)
            row["n"] += 1
            row["head0"] += bool(gold & set(head0))
            row["head1"] += bool(gold & set(head1))
            row["top5_0"] += bool(gold & set(order0[:5]))
            row["top5_1"] += bool(gold & set(order1[:5]))
            weak = [p for p in order0[30:60] if p not in gold]
            if not weak:
                continue
            other = rng.choice(weak)
            head2, order2 = ranked_files(make(True), host, {other})
            row["u_n"] += 1
            row["u_head"] += other in head2
            row["u_top5"] += other in order2[:5]
            row["u_lost"] += bool(gold & set(order0[:5])) and not (gold & set(order2[:5]))
    bonus = host.settings.dirty_bonus
    print(f"dirty_bonus = {bonus:g} (score x{1 + bonus:g}), {len(cases)} cases, seed "
          f"{args.seed}, {time.perf_counter() - started:.0f} s\n")
    print("| mode | cases | gold in head, clean | gold dirty: in head | gold in top 5, clean "
          "| gold dirty: in top 5 | unrelated dirty file: into head | into top 5 "
          "| gold pushed out of top 5 |")
    print("|---|--:|--:|--:|--:|--:|--:|--:|--:|")
    for mode, r in rows.items():
        def pct(k: str, n: str = "n", r: dict[str, int] = r) -> str:
            return f"{100 * r[k] / max(1, r[n]):.1f}"
        print(f"| {'title' if mode == 'title' else 'whole issue'} | {r['n']} | {pct('head0')} "
              f"| {pct('head1')} | {pct('top5_0')} | {pct('top5_1')} "
              f"| {pct('u_head', 'u_n')} | {pct('u_top5', 'u_n')} | {pct('u_lost', 'u_n')} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
