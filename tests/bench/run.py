#!/usr/bin/env python3
"""Benchmark slm-rerank's fast mode against lexical baselines on SWE-bench issues.

For each case (an issue with the files its fix changed) and each query mode (`title`: the
issue's first line, `query`: the whole issue text), every system ranks the files of the
case's tree; the runner scores file-level Hit@1/5/10 and MRR@10, line-level overlap for
systems that cite lines, and latency, then prints markdown tables.

    python tests/bench/run.py --repo psf/requests --systems bm25-all,rg-count
    python tests/bench/run.py --out bench.md --json bench.json
    python tests/bench/run.py --split held-out --systems fast,bm25-src,bm25-all

`--split` takes a case's own `split` key when its cases file has one (mined cases are split
by repository), else the fixed hash split of its id (`cases.split_of`). When cases carry a
`lang` key, the report adds a table per language.

Needs the packages in tests/bench/requirements.txt; trees come from
shared/bench/materialize.py.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import platform
import signal
import sys
import time
from pathlib import Path

from cases import (
    MODES,
    SPLITS,
    Case,
    CaseResult,
    add_case_options,
    in_split,
    load_cases,
    score,
    tree_ready,
)
from report import languages, render, summarize
from systems import DEFAULT_SYSTEMS, SYSTEMS, Runner, resolve_command

REPO_ROOT = Path(__file__).resolve().parents[2]
DEFAULT_CMD = ".venv/bin/slm-rerank"


def _csv(allowed: tuple[str, ...]):
    def parse(value: str) -> list[str]:
        items = [item.strip() for item in value.split(",") if item.strip()]
        unknown = [item for item in items if item not in allowed]
        if unknown or not items:
            raise argparse.ArgumentTypeError(f"choose from {', '.join(allowed)}; got {value!r}")
        return items

    return parse


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    add_case_options(ap)
    ap.add_argument("--modes", type=_csv(MODES), default=list(MODES), help="title,query")
    ap.add_argument("--limit", type=int, help="first N cases (after --repo and --split)")
    ap.add_argument("--repo", help="only cases of this owner/name")
    ap.add_argument(
        "--per-repo",
        type=int,
        help="at most N cases of each repository, spread evenly over its cases in file order",
    )
    ap.add_argument(
        "--split",
        choices=SPLITS,
        default="all",
        help="only cases of this split: the case's own `split` key, else the hash split",
    )
    ap.add_argument(
        "--systems",
        type=_csv(SYSTEMS),
        default=list(DEFAULT_SYSTEMS),
        help=f"{','.join(SYSTEMS)} (default {','.join(DEFAULT_SYSTEMS)})",
    )
    ap.add_argument("--out", type=Path, help="write the markdown tables here")
    ap.add_argument("--json", type=Path, help="write raw per-case results here")
    ap.add_argument(
        "--cmd", default=DEFAULT_CMD, help="slm-rerank command (relative paths from the repo root)"
    )
    ap.add_argument("--timeout", type=float, default=600.0, help="seconds per tool run")
    return ap.parse_args(argv)


def select_cases(
    cases: list[Case],
    repo: str | None,
    limit: int | None,
    split: str = "all",
    per_repo: int | None = None,
) -> list[Case]:
    """Filter, cut, then order by tree so each tree is indexed once."""
    chosen = [c for c in cases if (repo is None or c.repo == repo) and in_split(c, split)]
    if per_repo is not None:
        chosen = spread_per_repo(chosen, per_repo)
    if limit is not None:
        chosen = chosen[:limit]
    return sorted(chosen, key=lambda c: (c.repo, c.base_commit, c.id))


def spread_per_repo(cases: list[Case], n: int) -> list[Case]:
    """At most ``n`` cases of each repository, spread evenly over its cases (file order
    kept), so a sample of a large cases file still has every repository."""
    by_repo: dict[str, list[Case]] = {}
    for case in cases:
        by_repo.setdefault(case.repo, []).append(case)
    keep: set[int] = set()
    for mine in by_repo.values():
        if len(mine) <= n:
            keep.update(id(c) for c in mine)
        else:
            keep.update(id(mine[i * len(mine) // n]) for i in range(max(n, 0)))
    return [c for c in cases if id(c) in keep]


def _rank_cell(result: CaseResult) -> str:
    if result.error:
        return "ERR"
    return "-" if result.gold_rank is None else str(result.gold_rank)


def _stop(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    # SIGINT (Ctrl-C, even in a background job, which starts with it ignored) and SIGTERM
    # end the run with the tables of the cases measured so far.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, _stop)
    cases = select_cases(
        load_cases(args.cases), args.repo, args.limit, args.split, args.per_repo
    )
    systems: list[str] = args.systems
    modes: list[str] = args.modes
    log = sys.stderr

    runner = Runner(timeout=args.timeout)
    notes: list[str] = []
    if "fast" in systems:
        runner.tool_argv = resolve_command(args.cmd, REPO_ROOT)
        if runner.tool_argv is None:
            note = f"`fast` left out: slm-rerank command not found ({args.cmd})"
            print(note, file=log)
            notes.append(note)
            systems = [s for s in systems if s != "fast"]
    if not systems:
        print("no system to run", file=log)
        return 2

    runnable: list[tuple[Case, Path]] = []
    skipped: list[str] = []
    for case in cases:
        tree = case.tree(args.trees)
        if tree_ready(tree):
            runnable.append((case, tree))
        else:
            state = "incomplete" if tree.exists() else "missing"
            print(f"skip {case.id}: tree {state} at {tree}", file=log)
            skipped.append(case.id)
    if skipped:
        notes.append(f"{len(skipped)} cases skipped, tree missing: {', '.join(skipped)}")

    results: list[CaseResult] = []
    started = time.perf_counter()
    measured = 0
    try:
        for number, (case, tree) in enumerate(runnable, start=1):
            cells = []
            mine: list[CaseResult] = []
            for mode in modes:
                ranks = []
                for system in systems:
                    result = score(case, mode, system, runner.rank(system, case, tree, mode))
                    mine.append(result)
                    ranks.append(f"{system}={_rank_cell(result)}")
                cells.append(f"{mode}: {' '.join(ranks)}")
            results += mine  # whole cases only: every system answered the same ones
            measured = number
            print(
                f"[{number}/{len(runnable)}] {case.id}  {' | '.join(cells)}", file=log, flush=True
            )
    except KeyboardInterrupt:
        note = f"interrupted (SIGINT/SIGTERM): {measured} of {len(runnable)} cases measured"
        print(note, file=log)
        notes.append(note)
    finally:
        runner.close()
    elapsed = time.perf_counter() - started

    preamble = [
        "# slm-rerank benchmark",
        "",
        f"Cases: {measured} of {len(cases)} selected from `{args.cases.name}`"
        + (f" (repo {args.repo})" if args.repo else "")
        + (f" (split {args.split})" if args.split != "all" else "")
        + f"; systems: {', '.join(systems)}; run took {elapsed:.0f} s"
        f" on {platform.machine()}, Python {platform.python_version()}.",
        *[f"- {note}" for note in notes],
    ]
    text = render(results, systems, modes, runner.builds, preamble)
    print(text)
    if args.out:
        args.out.write_text(text, encoding="utf-8")
    if args.json:
        payload = {
            "cases_file": str(args.cases),
            "trees": str(args.trees),
            "systems": systems,
            "modes": modes,
            "split": args.split,
            "command": runner.tool_argv,
            "skipped": skipped,
            "measured": measured,
            "elapsed_s": elapsed,
            "summaries": [
                dataclasses.asdict(summarize(results, s, m)) for m in modes for s in systems
            ],
            "languages": [
                {"lang": lang, **dataclasses.asdict(summarize(rows, s, m))}
                for lang, rows in languages(results)
                for m in modes
                for s in systems
            ],
            "index_builds": [dataclasses.asdict(b) for b in runner.builds],
            "results": [dataclasses.asdict(r) for r in results],
        }
        args.json.write_text(json.dumps(_finite(payload), indent=1) + "\n", encoding="utf-8")
    return 0


def _finite(value: object) -> object:
    """The value with NaN floats (empty aggregates) as null, so the JSON is standard."""
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, dict):
        return {key: _finite(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(item) for item in value]
    return value


if __name__ == "__main__":
    sys.exit(main())
