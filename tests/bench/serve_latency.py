#!/usr/bin/env python3
"""Latency of `--local` (the managed llama-server with the bundled model) beside `--fast`.

    python tests/bench/serve_latency.py [--tree PATH] [--cases N]

Each query is one CLI process, as a user runs it. In one run, with a fresh cache folder:
`--fast` on every case; then the first `--local` query (no server running: start, model
load, rerank of the head); then warm `--local` queries on the other cases (server up, score
cache cold); then the same queries again (scores from the cache). The managed server is
stopped at the end. Uses ports 8033-8040: run it with no other model server there.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from cases import add_case_options, load_cases, tree_ready

CLI = Path(sys.executable).parent / "slm-rerank"


def timed(args: list[str], cwd: Path, env: dict[str, str]) -> tuple[float, str]:
    started = time.perf_counter()
    done = subprocess.run([str(CLI), *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=900)
    return time.perf_counter() - started, done.stderr


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    add_case_options(ap)
    ap.add_argument("--repo", default="mwaskom/seaborn", help="a mid-size benchmark repo")
    ap.add_argument("--n", type=int, default=4, help="queries (titles) per mode")
    args = ap.parse_args()
    cases = [c for c in load_cases(args.cases)
             if c.repo == args.repo and tree_ready(c.tree(args.trees))][: args.n + 1]
    if len(cases) < 2:
        sys.exit(f"no materialized cases of {args.repo} under {args.trees}")
    cache = Path(tempfile.mkdtemp(prefix="serve-latency-"))
    env = {**os.environ, "SLM_RERANK_CACHE_DIR": str(cache)}
    files = sum(1 for _ in cases[0].tree(args.trees).rglob("*") if _.is_file())
    rows: dict[str, list[float]] = {"fast": [], "cold": [], "warm": [], "cached": []}
    try:
        for case in cases[1:]:
            rows["fast"].append(timed(["--fast", "-q", case.title], case.tree(args.trees),
                                      env)[0])
        seconds, err = timed(["--local", "-q", cases[0].title], cases[0].tree(args.trees), env)
        if "started the bundled model" not in err:
            sys.exit(f"the first --local query did not start the server: {err}")
        rows["cold"].append(seconds)
        for case in cases[1:]:
            rows["warm"].append(timed(["--local", "-q", case.title], case.tree(args.trees),
                                      env)[0])
        for case in cases[1:]:
            rows["cached"].append(timed(["--local", "-q", case.title],
                                        case.tree(args.trees), env)[0])
    finally:
        subprocess.run([str(CLI), "serve", "stop"], env=env, capture_output=True)
    print(f"{args.repo} ({files} files), {len(cases) - 1} titles, head of 16, "
          f"{os.cpu_count()} cores\n")
    print("| query | runs | median s | max s |")
    print("|---|--:|--:|--:|")
    names = {"fast": "`--fast`", "cold": "`--local`, first (start + load + rerank)",
             "warm": "`--local`, server up, new query", "cached": "`--local`, repeated query "
             "(score cache)"}
    for key, values in rows.items():
        print(f"| {names[key]} | {len(values)} | {statistics.median(values):.2f} "
              f"| {max(values):.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
