#!/usr/bin/env python3
"""The word index of one tree built alone, as the warm worker builds it (windows of 5 s
until done), in this process: its estimate, the CPU it took and the process's peak
resident size; with ``--trace``, what tracemalloc saw held at the end and at the peak
(tracemalloc slows the build several times: its CPU is then no measure). Run it with the
``python`` of the install to measure, ``rg`` on ``PATH`` (issue 30).

    python tests/bench/index_build_memory.py ROOT [--trace]
"""

from __future__ import annotations

import argparse
import gc
import resource
import subprocess
import time
import tracemalloc
from pathlib import Path

from slm_rerank_ripgrep import word_index

from slm_rerank.plugin_kit import Unfinished


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("root", type=Path)
    parser.add_argument("--trace", action="store_true")
    args = parser.parse_args()
    listed = subprocess.run(["rg", "--files"], cwd=args.root, capture_output=True,
                            text=True, check=True).stdout
    files = [name for name in listed.split("\n") if name]
    if args.trace:
        tracemalloc.start()
    cpu = time.process_time()
    task = word_index.Build(args.root, files)
    windows = 1
    while isinstance(said := task(time.monotonic() + word_index.BUILD_SECONDS), Unfinished):
        windows += 1
    cpu = time.process_time() - cpu
    del task
    gc.collect()
    tree = word_index.tree_of(args.root)
    assert tree is not None, said
    print(f"{said}; {windows} windows, CPU {cpu:.2f} s, estimate {tree.size() / 2**20:.1f} MiB")
    if args.trace:
        held, peak = tracemalloc.get_traced_memory()
        print(f"tracemalloc: held {held / 2**20:.1f} MiB, peak {peak / 2**20:.1f} MiB")
    print(f"the process's peak resident size: "
          f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.1f} MiB")


if __name__ == "__main__":
    main()
