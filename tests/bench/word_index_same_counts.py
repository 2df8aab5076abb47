#!/usr/bin/env python3
"""Does the word index count what rg's matching pass counts, on real repositories? (issue 30)

    python tests/bench/word_index_same_counts.py --cases ../shared/bench/swe-dev.jsonl \
        [--split held-out] [--trees DIR] [--limit N]

For each materialized tree of the cases (each tree once), in this process: the ripgrep
source lists it, the word index is built (with a clock an hour ahead, so every file counts
as settled), and then, for the terms the search would give rg for each case's title and
whole text, the ripgrep source answers twice: from the index, and with the index set aside
(rg's matching pass). The files, per-file term counts and skipped files must be equal.
Prints one line per tree (files, build seconds, whether the index took the tree, how many
answers were the same, index and rg milliseconds per query, medians) and a summary; exits
1 if any answer differs.
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import sys
import time
from pathlib import Path

import slm_rerank_ripgrep
from slm_rerank_ripgrep import word_index

from slm_rerank.pipeline import query_terms
from slm_rerank.registrations import SourceHits, SourceQuery

sys.path.insert(0, str(Path(__file__).resolve().parent))


def answer(root: Path, terms: list[str], use_index: bool) -> tuple[SourceHits, float]:
    with contextlib.nullcontext() if use_index else word_index.set_aside():
        began = time.perf_counter()
        return slm_rerank_ripgrep.search(SourceQuery(root=root, terms=terms)), \
            time.perf_counter() - began


def main() -> int:
    from cases import MODES, in_split, load_cases, tree_ready

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cases", type=Path, required=True)
    parser.add_argument("--split", default="held-out")
    parser.add_argument("--trees", type=Path,
                        default=Path.home() / ".cache" / "slm-rerank-bench" / "trees")
    parser.add_argument("--limit", type=int, default=0, help="at most this many trees")
    opts = parser.parse_args()
    word_index.now_ns = lambda: time.time_ns() + 3600 * 10**9
    by_tree: dict[Path, list[str]] = {}
    for case in load_cases(opts.cases):
        tree = case.tree(opts.trees)
        if in_split(case, opts.split) and tree_ready(tree):
            by_tree.setdefault(tree, []).extend(getattr(case, mode) for mode in MODES)
    trees = sorted(by_tree)[:opts.limit or None]
    asked = same = from_index = 0
    index_ms: list[float] = []
    rg_ms: list[float] = []
    for tree in trees:
        word_index.forget()
        files = slm_rerank_ripgrep.search(SourceQuery(root=tree, terms=[])).files
        began = time.perf_counter()
        word_index.build(tree, files, time.monotonic() + 600)
        built = time.perf_counter() - began
        took = word_index.indexed(tree)
        agree = 0
        per_index: list[float] = []
        per_rg: list[float] = []
        for text in by_tree[tree]:
            terms = list(query_terms(text).literals())
            indexed, t_index = answer(tree, terms, True)
            by_rg, t_rg = answer(tree, terms, False)
            ok = (indexed.body_counts == by_rg.body_counts and indexed.skipped == by_rg.skipped
                  and sorted(indexed.files) == sorted(by_rg.files))
            agree += ok
            if not ok:
                wrong = sorted(p for p in set(indexed.body_counts) | set(by_rg.body_counts)
                               if indexed.body_counts.get(p) != by_rg.body_counts.get(p))
                pairs = [(indexed.body_counts.get(p), by_rg.body_counts.get(p)) for p in wrong[:3]]
                print(f"    DIFFERENT {tree.name}: {wrong[:3]} {pairs}")
            if took and word_index.indexed(tree) and word_index.plain_terms(terms):
                from_index += 1
                per_index.append(t_index * 1000)
                per_rg.append(t_rg * 1000)
        asked += len(by_tree[tree])
        same += agree
        index_ms += per_index
        rg_ms += per_rg
        timing = (f"index {statistics.median(per_index):.0f} ms, rg {statistics.median(per_rg):.0f}"
                  f" ms" if per_index else "rg only")
        print(f"{tree.name}: {len(files)} files, built in {built:.1f} s, "
              f"{'indexed' if took else 'not indexed: ' + word_index.summary()}; "
              f"{agree}/{len(by_tree[tree])} the same; {timing}")
    print(f"{len(trees)} trees, {asked} queries: {same} the same, {asked - same} different; "
          f"{from_index} answered from the index"
          + (f" (median {statistics.median(index_ms):.0f} ms against rg's "
             f"{statistics.median(rg_ms):.0f} ms; ratio of medians "
             f"{statistics.median(index_ms) / statistics.median(rg_ms):.2f})" if index_ms else ""))
    return 0 if same == asked else 1


if __name__ == "__main__":
    sys.exit(main())
