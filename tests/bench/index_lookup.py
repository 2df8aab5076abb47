#!/usr/bin/env python3
"""How long the word index takes to find the words that hold a term it was not asked
before, and to build (issue 30).

    python tests/bench/index_lookup.py ROOT [--queries tests/bench/worker_memory_queries.txt]

Builds the ripgrep source's word index of ROOT in this process (as the warm worker's idle
work does, in one go: the files rg lists, then the three-letter pieces once the tree has
``word_index.PIECES_FROM`` words), then looks up each distinct word of three letters or
more of the queries (the terms a search counts in file bodies), the index's kept lookups
emptied before each. Prints the build's time, tracemalloc's figure for what the index
holds (a second build, under tracemalloc) against its own estimate, and the lookups'
median, maximum and sum. Run it with the install to measure on ``PATH`` (its ``rg``) and
its Python.
"""

from __future__ import annotations

import argparse
import gc
import statistics
import subprocess
import time
import tracemalloc
from pathlib import Path

from slm_rerank_ripgrep import word_index


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("root", type=Path)
    parser.add_argument("--queries", type=Path,
                        default=Path(__file__).with_name("worker_memory_queries.txt"))
    args = parser.parse_args()
    files = subprocess.run(["rg", "--files"], cwd=args.root, capture_output=True, text=True,
                           check=True).stdout.splitlines()
    began = time.perf_counter()
    word_index.build(args.root, files, time.monotonic() + 600)
    built = time.perf_counter() - began
    word_index.forget()
    gc.collect()
    tracemalloc.start()  # built again, for what it holds (tracemalloc slows it down)
    word_index.build(args.root, files, time.monotonic() + 600)
    gc.collect()
    held = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    tree = word_index.tree_of(args.root)
    assert tree is not None, word_index.summary()
    terms = list(dict.fromkeys(word.lower() for line in args.queries.read_text().splitlines()
                               for word in line.split() if len(word) >= 3 and word.isalnum()))
    took = []
    for term in terms:
        tree.holding.clear()
        tree.held = 0
        began = time.perf_counter()
        tree.spellings(term)
        took.append((time.perf_counter() - began) * 1000)
    print(f"{args.root}: {len(tree.files):,} files, {len(tree.vocab):,} words; built in "
          f"{built:.2f} s; holds {held / 2**20:.1f} MiB, estimates "
          f"{tree.size() / 2**20:.1f}; three-letter pieces: "
          f"{'yes' if getattr(tree, 'pieces', None) else 'no'}")
    print(f"{len(terms)} terms not asked before: p50 {statistics.median(took):.3f} ms, "
          f"max {max(took):.3f} ms, sum {sum(took):.1f} ms")


if __name__ == "__main__":
    main()
