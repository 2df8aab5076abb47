#!/usr/bin/env python3
"""Do two versions of the code give the same `--fast` answers? (issue 30)

    git worktree add /tmp/base <commit>           # the code to compare against
    python tests/bench/same_answers.py --before /tmp/base [--n 40] [--split held-out]

Runs each case's title and whole issue text (``--modes``) through the fast search of this
checkout and of ``--before`` (each in its own process, the older one importing the host and
the ripgrep plugin from that checkout, as ``fast_speed.py`` does), on the case's tree, and
compares what they return: every result's path, lines, symbol and scores (to 1e-9), and the
notes. Prints each difference and a summary; exits 1 when any answer differs.

Each worker keeps its own chunk cache in a temporary folder, run twice per query (cold,
then warm), so a cache that answers differently from a fresh slicing shows up too.
``--dump FILE`` keeps this checkout's answers as JSON.

    python tests/bench/same_answers.py --before /tmp/base --root TREE [--rounds 2]

asks ``fast_same_answers.QUERIES`` (20 questions about sympy) of one tree instead of the
cases, ``--rounds`` times over in the same two workers: from the second round on, every
file a query reads was read by an earlier one, as in a long-lived process (the MCP server,
a script calling the API).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from cases import add_case_options, spread_sample

TOLERANCE = 1e-9


def worker() -> int:
    """Answer queries read from stdin (one JSON object a line) with the fast search."""
    import slm_rerank
    from slm_rerank.api import search

    print(json.dumps({"code": str(Path(slm_rerank.__file__).parent.parent)}), flush=True)
    for line in sys.stdin:
        asked = json.loads(line)
        answers = []
        for _ in range(2):  # cold chunk cache, then warm
            report = search(asked["query"], asked["root"], fast=True, caller="bench")
            answers.append({
                "results": [[c.path, c.start_line, c.end_line, c.symbol, c.score,
                             c.lexical_score, c.matched_terms] for c in report.results],
                "notes": [n for n in report.notes if "ms" not in n],
            })
        print(json.dumps(answers), flush=True)
    return 0


class Worker:
    def __init__(self, code: Path | None, cache: Path) -> None:
        env = dict(os.environ, SLM_RERANK_CACHE_DIR=str(cache))
        if code is not None:
            # Before the editable install's finders: that checkout's host and ripgrep plugin.
            env["PYTHONPATH"] = os.pathsep.join(
                [str(code), str(code / "plugins" / "slm-rerank-ripgrep")])
        self.proc = subprocess.Popen([sys.executable, __file__, "--worker"], env=env,
                                     cwd=Path(__file__).parent, stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True)
        self.code = json.loads(self.proc.stdout.readline())["code"]  # type: ignore[union-attr]

    def ask(self, query: str, root: Path) -> list[dict[str, Any]]:
        self.proc.stdin.write(json.dumps({"query": query, "root": str(root)}) + "\n")  # type: ignore[union-attr]
        self.proc.stdin.flush()  # type: ignore[union-attr]
        line = self.proc.stdout.readline()  # type: ignore[union-attr]
        if not line:
            raise SystemExit(f"the worker of {self.code} died on {query[:60]!r} in {root}")
        return json.loads(line)  # type: ignore[no-any-return]

    def close(self) -> None:
        self.proc.stdin.close()  # type: ignore[union-attr]
        self.proc.wait()


def _same_value(a: Any, b: Any) -> bool:
    if isinstance(a, float) or isinstance(b, float):
        return isinstance(a, (int, float)) and isinstance(b, (int, float)) and (
            math.isclose(a, b, rel_tol=TOLERANCE, abs_tol=TOLERANCE))
    return bool(a == b)


def differences(before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    """What differs between two answers to one query, one line each."""
    found = []
    if len(before["results"]) != len(after["results"]):
        found.append(f"{len(before['results'])} results before, {len(after['results'])} now")
    for rank, (a, b) in enumerate(zip(before["results"], after["results"], strict=False), 1):
        if not all(map(_same_value, a, b)):
            found.append(f"#{rank}: {a} before, {b} now")
    if before["notes"] != after["notes"]:
        found.append(f"notes: {sorted(set(before['notes']) ^ set(after['notes']))[:4]}")
    return found


def main() -> int:
    ap = add_case_options(argparse.ArgumentParser(description=__doc__.splitlines()[0]))
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--before", type=Path, help="a checkout of the code to compare against")
    ap.add_argument("--n", type=int, default=40, help="cases (spread over the file)")
    ap.add_argument("--split", default="held-out", choices=("dev", "held-out", "all"))
    ap.add_argument("--modes", nargs="+", default=["title", "query"])
    ap.add_argument("--dump", type=Path, help="write this checkout's answers here (JSON)")
    ap.add_argument("--root", type=Path,
                    help="ask fast_same_answers.QUERIES of this tree instead of the cases")
    ap.add_argument("--rounds", type=int, default=1,
                    help="with --root: ask the queries this many times over")
    args = ap.parse_args()
    if args.worker:
        return worker()
    if args.root is not None:
        return ask_of_tree(args.root.resolve(), args.before, args.rounds)
    cases = spread_sample(args.cases, args.trees, args.n, args.split)
    with tempfile.TemporaryDirectory(prefix="same-answers-") as tmp:
        now = Worker(None, Path(tmp) / "now")
        before = Worker(args.before.resolve(), Path(tmp) / "before") if args.before else None
        print(f"now: {now.code}" + (f"; before: {before.code}" if before else ""), flush=True)
        dumped: dict[str, Any] = {}
        asked = differing = 0
        for case in cases:
            for mode in args.modes:
                root = case.tree(args.trees)
                answers = now.ask(case.text(mode), root)
                dumped[f"{case.id}/{mode}"] = answers
                asked += 1
                found = differences(answers[0], answers[1])  # cold against warm cache
                found = [f"warm cache: {line}" for line in found]
                if before is not None:
                    old = before.ask(case.text(mode), root)
                    found += differences(old[0], answers[0])
                print(f"{asked:3d} {case.id} {mode}: {len(answers[0]['results'])} results, "
                      f"{'differ' if found else 'the same'}", flush=True)
                if found:
                    differing += 1
                    print(f"DIFFERS {case.id} {mode}:")
                    for line in found:
                        print(f"    {line}")
        now.close()
        if before is not None:
            before.close()
    if args.dump:
        args.dump.write_text(json.dumps(dumped, indent=1))
    print(f"{asked} queries ({len(cases)} cases x {len(args.modes)} modes): "
          f"{asked - differing} the same, {differing} differ")
    return 1 if differing else 0


def ask_of_tree(root: Path, before_code: Path | None, rounds: int) -> int:
    """``--root``: the sympy questions, ``rounds`` times over, of one tree."""
    from fast_same_answers import QUERIES

    asked = differing = 0
    with tempfile.TemporaryDirectory(prefix="same-answers-") as tmp:
        now = Worker(None, Path(tmp) / "now")
        before = Worker(before_code.resolve(), Path(tmp) / "before") if before_code else None
        print(f"now: {now.code}" + (f"; before: {before.code}" if before else ""), flush=True)
        for round_ in range(1, rounds + 1):
            for query in QUERIES:
                answers = now.ask(query, root)
                asked += 1
                found = [f"warm cache: {line}" for line in differences(answers[0], answers[1])]
                if before is not None:
                    found += differences(before.ask(query, root)[0], answers[0])
                print(f"{asked:3d} round {round_} {query!r}: {len(answers[0]['results'])} "
                      f"results, {'differ' if found else 'the same'}", flush=True)
                if found:
                    differing += 1
                    for line in found:
                        print(f"    {line}")
        now.close()
        if before is not None:
            before.close()
    print(f"{asked} queries ({len(QUERIES)} x {rounds} rounds): {asked - differing} the "
          f"same, {differing} differ")
    return 1 if differing else 0


if __name__ == "__main__":
    raise SystemExit(main())
