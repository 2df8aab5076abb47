#!/usr/bin/env python3
"""Start-up and memory, measured side by side in one run.

    python tests/bench/startup.py [--runs 20] [--tree DIR --query-file FILE]

Interleaves `python -c pass` and `slm-rerank --version` (so machine noise hits both alike)
and prints the medians and their ratio; with --tree, also the peak resident memory of one
warm `slm-rerank --fast` query there (max RSS of the child process).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

BIN = Path(sys.executable).parent


def wall(argv: list[str]) -> float:
    started = time.perf_counter()
    subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    return (time.perf_counter() - started) * 1000


def peak_rss_mb(argv: list[str]) -> float:
    """Max RSS of a child, read from wait4's rusage (so only that child counts)."""
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode:
        raise SystemExit(f"{argv} exited {proc.returncode}")
    return usage.ru_maxrss / 1024


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--tree", type=Path)
    ap.add_argument("--query-file", type=Path)
    args = ap.parse_args()
    bare = [sys.executable, "-c", "pass"]
    version = [str(BIN / "slm-rerank"), "--version"]
    times: dict[str, list[float]] = {"python -c pass": [], "slm-rerank --version": []}
    for _ in range(args.runs):
        times["python -c pass"].append(wall(bare))
        times["slm-rerank --version"].append(wall(version))
    medians = {name: statistics.median(v) for name, v in times.items()}
    print("| command | median ms |\n|:--|--:|")
    for name, value in medians.items():
        print(f"| `{name}` | {value:.1f} |")
    ratio = medians["slm-rerank --version"] / medians["python -c pass"]
    print(f"\nratio `slm-rerank --version` / `python -c pass`: {ratio:.2f}x "
          f"({args.runs} runs each)")
    if args.tree and args.query_file:
        query = [str(BIN / "slm-rerank"), "--query-file", str(args.query_file), "--fast",
                 "--root", str(args.tree), "--format", "json"]
        peak_rss_mb(query)  # warm the chunk cache first
        print(f"peak RSS of a warm --fast query on {args.tree.name}: "
              f"{peak_rss_mb(query):.0f} MB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
