#!/usr/bin/env python3
"""The warm worker's command, stage by stage, for two checkouts in turn (paired).

    python tests/bench/ranking_paired.py ROOT --before CHECKOUT [--after .] [--pairs 6]
        [--runs 15] [--query TEXT | --rotate]

Runs ``warm_call_parts.WORKER`` (the worker's command as the warm process runs it, with a
timer around each stage, the word index built after each search) in a fresh process for
``--before`` and ``--after`` alternately (which goes first alternates too), ``--pairs``
times, each ``--runs`` commands after three warm-ups, and prints per pair each side's
medians of the matching pass (``pipeline.gather``), chunk scoring (``rank_chunks``), the
learned order (``put_in_order``) and the whole command, then the after/before ratios pair
by pair and their median. ``--rotate`` asks ``fast_same_answers.QUERIES`` (20 questions
about sympy) in turn instead of one query: after the three warm-ups each command asks a
question its process has not been asked (but the fourth to sixth's files may be read).
Run it from outside the checkouts (``cd /tmp``) so that each side imports its own code.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

from fast_same_answers import QUERIES  # noqa: E402
from warm_call_parts import QUERY, WORKER  # noqa: E402

STAGES = (("gather", "matching pass"), ("rank_chunks", "chunk scoring"),
          ("put_in_order", "learned order"), ("command", "the command"))

#: the worker asking a list of queries in turn (``query`` given as a JSON list)
ROTATING = WORKER.replace(
    'args = ["-q", query, "--fast"]',
    'asked = json.loads(query) if query.startswith("[") else [query]\nturn = [0]').replace(
    '    request = client.Request("search", list(args), False, started=time.monotonic())',
    '    args = ["-q", asked[turn[0] % len(asked)], "--fast"]\n    turn[0] += 1\n'
    '    request = client.Request("search", list(args), False, started=time.monotonic())')


def side(checkout: Path, root: Path, query: str, runs: int, scratch: Path) -> dict[str, float]:
    """Each stage's median (seconds) over ``runs`` commands in one fresh worker process."""
    out = scratch / "parts.json"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env.update({"PYTHONPATH": str(checkout), "XDG_CONFIG_HOME": str(scratch / "cfg"),
                "XDG_CACHE_HOME": str(scratch / "cache"),
                "SLM_RERANK_CACHE_DIR": str(scratch / "cache" / checkout.name)})
    subprocess.run([sys.executable, "-c", ROTATING, str(root), query, str(runs), str(out),
                    "0", "1"], env=env, cwd=root, check=True, stdout=subprocess.DEVNULL)
    rows = json.loads(out.read_text())
    return {key: statistics.median(r.get(key, 0.0) for r in rows) for key, _ in STAGES}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("root", type=Path)
    ap.add_argument("--before", type=Path, required=True)
    ap.add_argument("--after", type=Path, default=BENCH.parents[1])
    ap.add_argument("--pairs", type=int, default=6)
    ap.add_argument("--runs", type=int, default=15)
    ap.add_argument("--query", default=QUERY)
    ap.add_argument("--rotate", action="store_true", help="ask the 20 sympy questions in turn")
    args = ap.parse_args()
    query = json.dumps(list(QUERIES)) if args.rotate else args.query
    sides = {"before": args.before.resolve(), "after": args.after.resolve()}
    print(f"root {args.root}, {args.pairs} pairs of {args.runs} commands each, "
          f"{'the 20 questions in turn' if args.rotate else repr(args.query)}")
    print()
    print("| pair | side | load | " + " | ".join(f"{label} ms" for _, label in STAGES) + " |")
    print("| --- | --- | ---: |" + " ---: |" * len(STAGES))
    ratios: dict[str, list[float]] = {key: [] for key, _ in STAGES}
    with tempfile.TemporaryDirectory(prefix="rankpair-") as scratch:
        for pair in range(args.pairs):
            order = ["before", "after"] if pair % 2 == 0 else ["after", "before"]
            got = {}
            for name in order:
                load = os.getloadavg()[0]
                got[name] = side(sides[name], args.root.resolve(), query, args.runs,
                                 Path(scratch))
                print(f"| {pair + 1} | {name} | {load:.1f} | "
                      + " | ".join(f"{got[name][key] * 1000:.1f}" for key, _ in STAGES)
                      + " |", flush=True)
            for key, _ in STAGES:
                ratios[key].append(got["after"][key] / got["before"][key])
    print()
    print("| after/before | " + " | ".join(label for _, label in STAGES) + " |")
    print("| --- |" + " ---: |" * len(STAGES))
    for pair in range(args.pairs):
        print(f"| pair {pair + 1} | "
              + " | ".join(f"{ratios[key][pair]:.2f}" for key, _ in STAGES) + " |")
    print("| **median** | " + " | ".join(f"**{statistics.median(ratios[key]):.2f}**"
                                         for key, _ in STAGES) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
