#!/usr/bin/env python3
"""Speed of the lexical stage (`--fast`) against one bare ripgrep, side by side (issue 9).

    python tests/bench/fast_speed.py [--before /tmp/before] [--repeat 7] [--cases-per-mode 8]

The yardstick is one bare `rg --count-matches -i -F -e t1 -e t2 ... .` over the same terms
the pipeline searches (``terms.extract(query).literals()``) in the same tree: what any
lexical search must pay. For each query the script runs, interleaved and repeated, that rg
and the in-process pipeline (``run_search`` with ``fast=True``, in a warm worker process,
timed by its report's ``total_ms`` and by a perf_counter around the call), and prints
medians and the ratio pipeline / rg. Machines are shared and noisy: compare ratios within
one run, not absolute times across runs.

``--before DIR`` adds a second worker that imports the host and the ripgrep plugin from
DIR (a checkout of an older commit, e.g. ``git worktree add /tmp/before <commit>``), timed
in the same interleaved rounds, so that before and after are compared in one run.

Sections: (1) title and whole-issue queries of several cases on the largest tree; (2) CLI
wall p50 (``slm-rerank --fast -q``, a fresh process per query) over a sample of benchmark
cases; (3) growth with repository size (three trees, the same queries); (4) growth with
query length (2..40 terms) on the largest tree.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from cases import Case, add_case_options, load_cases, tree_ready

REPO_ROOT = Path(__file__).resolve().parents[2]
BIN = REPO_ROOT / ".venv" / "bin"
#: The largest benchmark tree by bytes searched (42 MB in 1,957 files). pylint 1f8c4d9eb185
#: has more files (3,701) but a tenth of the bytes; rg's cost follows bytes, the pipeline's
#: follows matching files, and sympy has more of both than any other tree.
LARGEST = "sympy+sympy@39de9a2698ad"
#: Three trees of clearly different size for the growth table (1.2, 5.1 and 42 MB).
SIZES = ("psf+requests@22623bd8c265", "pylint-dev+pylint@1f8c4d9eb185", LARGEST)
LENGTHS = (2, 5, 10, 20, 40)


# --- the worker: one warm process per version of the code ---------------------------------


def worker() -> int:
    """Answer one JSON request a line: run the fast pipeline, say how long it took."""
    import slm_rerank
    from slm_rerank.cache_folder import cache_path
    from slm_rerank.host import Host
    from slm_rerank.pipeline import SearchRequest, run_search

    host = Host.from_environment(flags={"top_k": 10})
    cache = cache_path(host.settings)
    print(json.dumps({"code": str(Path(slm_rerank.__file__).parent.parent)}), flush=True)
    for line in sys.stdin:
        asked = json.loads(line)
        started = time.perf_counter()
        report = run_search(SearchRequest(query=asked["query"], root=Path(asked["root"]),
                                          fast=True, cache_dir=cache), host)
        wall = (time.perf_counter() - started) * 1000
        print(json.dumps({"wall_ms": wall, "timings": report.timings,
                          "top": [c.path for c in report.results]}), flush=True)
    return 0


class Worker:
    def __init__(self, name: str, code: Path | None) -> None:
        env = dict(os.environ)
        if code is not None:
            # Before the editable install's finders: this checkout's host and ripgrep plugin.
            env["PYTHONPATH"] = os.pathsep.join(
                [str(code), str(code / "plugins" / "slm-rerank-ripgrep")])
        self.name = name
        self.proc = subprocess.Popen([sys.executable, __file__, "--worker"], env=env,
                                     cwd=Path(__file__).parent, stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True)
        self.code = json.loads(self.proc.stdout.readline())["code"]  # type: ignore[union-attr]

    def run(self, query: str, root: Path) -> dict[str, Any]:
        self.proc.stdin.write(json.dumps({"query": query, "root": str(root)}) + "\n")  # type: ignore[union-attr]
        self.proc.stdin.flush()  # type: ignore[union-attr]
        return json.loads(self.proc.stdout.readline())  # type: ignore[union-attr]

    def close(self) -> None:
        self.proc.stdin.close()  # type: ignore[union-attr]
        self.proc.wait()


# --- measuring ----------------------------------------------------------------------------


def rg_argv(query: str) -> list[str]:
    from slm_rerank.lexical.terms import extract

    literals = extract(query).literals()
    rg = str(BIN / "rg") if (BIN / "rg").exists() else "rg"
    return [rg, "--count-matches", "-i", "-F", *[a for t in literals for a in ("-e", t)], "."]


def bare_rg(query: str, root: Path) -> float:
    started = time.perf_counter()
    subprocess.run(rg_argv(query), cwd=root, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)
    return (time.perf_counter() - started) * 1000


def side_by_side(query: str, root: Path, workers: list[Worker], repeat: int
                 ) -> dict[str, dict[str, float]]:
    """Medians over ``repeat`` interleaved rounds of rg and each worker (after a warm-up)."""
    for w in workers:
        w.run(query, root)  # warm: the page cache, the chunk cache, the worker's imports
    bare_rg(query, root)
    rg: list[float] = []
    runs: dict[str, list[dict[str, Any]]] = {w.name: [] for w in workers}
    for _ in range(repeat):
        rg.append(bare_rg(query, root))
        for w in workers:
            runs[w.name].append(w.run(query, root))
    out = {"rg": {"ms": statistics.median(rg)}}
    for name, done in runs.items():
        med = {key: statistics.median(r["timings"][key] for r in done)
               for key in ("sources_ms", "rank_ms", "total_ms")}
        med["wall_ms"] = statistics.median(r["wall_ms"] for r in done)
        out[name] = med
    tops = {json.dumps(done[0]["top"]) for done in runs.values()}
    if len(tops) > 1:
        print(f"  ! the versions rank {query[:40]!r} differently", file=sys.stderr)
    return out


def table(rows: list[list[str]], header: list[str]) -> str:
    lines = ["| " + " | ".join(header) + " |", "| " + " | ".join("---" for _ in header) + " |"]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


def cli_wall(case_queries: list[tuple[str, Path]], code: Path | None, repeat: int
             ) -> list[float]:
    env = dict(os.environ)
    if code is not None:
        env["PYTHONPATH"] = os.pathsep.join(
            [str(code), str(code / "plugins" / "slm-rerank-ripgrep")])
    walls = []
    for query, root in case_queries:
        times = []
        for _ in range(repeat):
            started = time.perf_counter()
            subprocess.run([str(BIN / "slm-rerank"), "--fast", "-q", query], cwd=root, env=env,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            times.append((time.perf_counter() - started) * 1000)
        walls.append(statistics.median(times))
    return walls


def tree_stats(root: Path) -> tuple[int, float]:
    listed = subprocess.run([str(BIN / "rg"), "--files", "--null"], cwd=root,
                            capture_output=True).stdout.split(b"\0")
    files = [f for f in listed if f]
    size = sum((root / os.fsdecode(f)).stat().st_size for f in files)
    return len(files), size / 1e6


# --- the report ---------------------------------------------------------------------------


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    add_case_options(ap)
    ap.add_argument("--before", type=Path, help="a checkout of the code to compare against")
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--cases-per-mode", type=int, default=8)
    ap.add_argument("--cli-cases", type=int, default=20)
    args = ap.parse_args()
    if args.worker:
        return worker()

    cases = [c for c in load_cases(args.cases) if tree_ready(c.tree(args.trees))]
    largest = args.trees / LARGEST
    workers = [Worker("now", None)]
    if args.before:
        workers.append(Worker("before", args.before.resolve()))
    for w in workers:
        print(f"worker {w.name}: code from {w.code}")
    names = [w.name for w in workers]
    started = time.perf_counter()

    # (1) Side by side on the largest tree: the cases of its repository, title and issue.
    files, mb = tree_stats(largest)
    print(f"\n## 1. Pipeline against one bare rg on {LARGEST} ({files} files, {mb:.0f} MB), "
          f"median of {args.repeat} interleaved rounds per query\n")
    own = sorted((c for c in cases if c.repo == "sympy/sympy"), key=lambda c: c.id)
    step = max(1, len(own) // args.cases_per_mode)
    chosen: list[Case] = own[::step][:args.cases_per_mode]
    rows = []
    summary: dict[str, dict[str, list[float]]] = {}
    for mode in ("title", "query"):
        for case in chosen:
            query = case.text(mode)
            got = side_by_side(query, largest, workers, args.repeat)
            terms = (len(rg_argv(query)) - 5) // 2
            row = [mode, case.id, str(terms), f"{got['rg']['ms']:.0f}"]
            for name in names:
                m = got[name]
                ratio = m["total_ms"] / got["rg"]["ms"]
                summary.setdefault(f"{mode} {name}", {}).setdefault("ratio", []).append(ratio)
                summary[f"{mode} {name}"].setdefault("wall", []).append(
                    m["wall_ms"] / got["rg"]["ms"])
                row += [f"{m['sources_ms']:.0f}", f"{m['rank_ms']:.0f}", f"{m['total_ms']:.0f}",
                        f"{ratio:.2f}"]
            rows.append(row)
            print("  " + " ".join(row), file=sys.stderr)
    header = ["mode", "case", "terms", "rg ms"]
    for name in names:
        header += [f"{name} sources", f"{name} rank", f"{name} total", f"{name} / rg"]
    print(table(rows, header))
    print()
    print(table([[key, f"{statistics.median(v['ratio']):.2f}", f"{max(v['ratio']):.2f}",
                  f"{statistics.median(v['wall']):.2f}"]
                 for key, v in summary.items()],
                ["mode, code", "median total_ms / rg", "worst total_ms / rg",
                 "median perf_counter / rg"]))

    # (2) CLI wall p50 over a sample of cases, title and whole issue.
    step = max(1, len(cases) // args.cli_cases)
    sample = cases[::step][:args.cli_cases]
    print(f"\n## 2. CLI wall (`slm-rerank --fast -q`, fresh process), p50 over {len(sample)} "
          "cases (median of 3 runs each)\n")
    rows = []
    for mode in ("title", "query"):
        queries = [(c.text(mode), c.tree(args.trees)) for c in sample]
        rg = [statistics.median(bare_rg(q, r) for _ in range(3)) for q, r in queries]
        row = [mode, f"{statistics.median(rg):.0f}"]
        for w in workers:
            walls = cli_wall(queries, args.before.resolve() if w.name == "before" else None, 3)
            row += [f"{statistics.median(walls):.0f}", f"{max(walls):.0f}"]
        rows.append(row)
    header = ["mode", "bare rg p50 ms"]
    for name in names:
        header += [f"{name} CLI p50 ms", f"{name} CLI max ms"]
    print(table(rows, header))

    # (3) Growth with repository size: the same queries over three trees.
    print("\n## 3. Growth with repository size (the same queries; medians)\n")
    probe = max(chosen, key=lambda c: len(c.query))  # the longest issue: 40 terms and more
    rows = []
    for tree in SIZES:
        root = args.trees / tree
        files, mb = tree_stats(root)
        for mode in ("title", "query"):
            got = side_by_side(probe.text(mode), root, workers, args.repeat)
            row = [tree, str(files), f"{mb:.1f}", mode, f"{got['rg']['ms']:.0f}"]
            for name in names:
                row += [f"{got[name]['total_ms']:.0f}",
                        f"{got[name]['total_ms'] / got['rg']['ms']:.2f}"]
            rows.append(row)
    header = ["tree", "files", "MB", "query", "rg ms"]
    for name in names:
        header += [f"{name} total ms", f"{name} / rg"]
    print(f"queries: case {probe.id}\n")
    print(table(rows, header))

    # (4) Growth with query length on the largest tree.
    print(f"\n## 4. Growth with query length on {LARGEST} (medians)\n")
    from slm_rerank.lexical.terms import extract

    words = [t.root for t in extract(probe.query, max_terms=60).terms]
    rows = []
    for n in LENGTHS:
        query = " ".join(words[:n])
        got = side_by_side(query, largest, workers, args.repeat)
        terms = (len(rg_argv(query)) - 5) // 2
        row = [str(n), str(terms), f"{got['rg']['ms']:.0f}"]
        for name in names:
            row += [f"{got[name]['sources_ms']:.0f}", f"{got[name]['rank_ms']:.0f}",
                    f"{got[name]['total_ms']:.0f}",
                    f"{got[name]['total_ms'] / got['rg']['ms']:.2f}"]
        rows.append(row)
    header = ["words", "literals searched", "rg ms"]
    for name in names:
        header += [f"{name} sources", f"{name} rank", f"{name} total", f"{name} / rg"]
    print(f"words: the first n terms of case {probe.id}'s issue, joined by spaces\n")
    print(table(rows, header))
    for w in workers:
        w.close()
    print(f"\n{time.perf_counter() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
