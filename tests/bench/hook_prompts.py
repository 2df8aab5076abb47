#!/usr/bin/env python3
"""The prompt hook's classifier on labelled prompts, and the hook's latency on sympy.

    python tests/bench/hook_prompts.py [--split dev|held-out|all] [--show] [--latency N]

``hook_prompts.jsonl`` (beside this file) holds one prompt a line: ``repo`` (a benchmark
repository), ``prompt``, ``label`` (code, process or chat), ``kind`` (plain: a coding
request without an identifier; named: one with a path, a symbol or error text; vcs, run,
social, session, general) and ``split``. The split was fixed by the prompt's sha256 before
any rule was written (two fifths held out); tune on ``--split dev`` only and report both.

For each repository the classifier runs as the hook runs it: the shape rules, then, for a
prompt they leave open, the repository's vocabulary (``slm_rerank.vocabulary``) of that
repository's benchmark tree (~/.cache/slm-rerank-bench/trees/OWNER+NAME@*, the first by
name). It prints precision and recall of "code" per split, and per kind the share judged
code (the recall of code kinds, the false-positive rate of the others).

``--latency N`` then builds sympy's vocabulary in process (timed, with a warm check after
it), and pipes N prompts of the set (all when 0; default 60), each into a fresh
``slm-rerank hook claude-prompt --fast`` with the sympy tree as cwd and a cache folder of
its own: a first pass with the chunk cache empty, a second over the same prompts with it
warm. It prints the wall p50/p95 of each pass, for all prompts and for those that got
context, and the hook's own vocabulary-check times from the usage log.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import resource
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO_ROOT))

from slm_rerank.prompt_classifier import by_vocabulary, classify  # noqa: E402
from slm_rerank.vocabulary import load  # noqa: E402

PROMPTS = Path(__file__).resolve().parent / "hook_prompts.jsonl"
TREES = Path.home() / ".cache" / "slm-rerank-bench" / "trees"
CLI = REPO_ROOT / ".venv" / "bin" / "slm-rerank"
LATENCY_REPO = "sympy/sympy"


def tree_of(repo: str) -> Path:
    owner, name = repo.split("/")
    found = sorted(TREES.glob(f"{owner}+{name}@*"))
    if not found:
        raise SystemExit(f"no benchmark tree for {repo} under {TREES}: run make bench-trees")
    return found[0]


def judge(rows: list[dict[str, Any]], cache: Path, alone: bool = False
          ) -> list[tuple[dict[str, Any], Any]]:
    """Each row with the classifier's decision; ``alone``: the repository rule's alone."""
    vocabularies: dict[str, Any] = {}
    judged = []
    for row in rows:
        decision = classify(row["prompt"])
        if alone or not decision.final:
            if row["repo"] not in vocabularies:
                vocabularies[row["repo"]] = load(tree_of(row["repo"]), cache, 60.0).vocabulary
            decision = by_vocabulary(row["prompt"], vocabularies[row["repo"]])
        judged.append((row, decision))
    return judged


def precision_recall(judged: list[tuple[dict[str, Any], Any]]) -> tuple[float, float, int]:
    said = [(d.code, r["label"] == "code") for r, d in judged]
    true_pos = sum(p and a for p, a in said)
    predicted = sum(p for p, _ in said)
    actual = sum(a for _, a in said)
    return (true_pos / predicted if predicted else 1.0, true_pos / actual if actual else 1.0,
            len(said))


def report(judged: list[tuple[dict[str, Any], Any]], splits: list[str], show: bool) -> None:
    print("| split | prompts | precision | recall |")
    print("| --- | ---: | ---: | ---: |")
    for split in splits:
        part = [(r, d) for r, d in judged if split == "all" or r["split"] == split]
        precision, recall, n = precision_recall(part)
        print(f"| {split} | {n} | {precision:.2f} | {recall:.2f} |")
    print()
    print("| kind | label | " + " | ".join(f"{s}: judged code" for s in splits) + " |")
    print("| --- | --- |" + " ---: |" * len(splits))
    kinds: dict[tuple[str, str], None] = {}
    for row, _ in judged:
        kinds[(row["kind"], row["label"])] = None
    for kind, label in kinds:
        cells = []
        for split in splits:
            part = [d.code for r, d in judged
                    if r["kind"] == kind and (split == "all" or r["split"] == split)]
            cells.append(f"{sum(part)}/{len(part)}" if part else "-")
        print(f"| {kind} | {label} | " + " | ".join(cells) + " |")
    rules: dict[str, int] = defaultdict(int)
    for _, decision in judged:
        if decision.code:
            rules[decision.reason] += 1
    print()
    print("judged code, by rule: " + ", ".join(f"{k} {v}" for k, v in sorted(rules.items())))
    if show:
        print()
        for row, decision in judged:
            if decision.code != (row["label"] == "code"):
                print(f"  {row['split']:8} {row['label']:7} {row['kind']:8} said "
                      f"{'code' if decision.code else 'not'} ({decision.reason}; "
                      f"{decision.evidence}) {row['repo']}: {row['prompt']}")


def nearest_rank(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[max(0, math.ceil(share * len(ordered)) - 1)]


def latency(rows: list[dict[str, Any]], count: int, deadline: float) -> None:
    """The hook's wall time on sympy, a fresh process per prompt: a first pass with the
    caches empty (each search slices its files for the first time), then a second pass
    over the same prompts with the caches warm (as a repository is after a while of use)."""
    tree = tree_of(LATENCY_REPO)
    prompts = [r["prompt"] for r in rows][: count or None]
    cpu: list[float] = []
    with tempfile.TemporaryDirectory() as cache:
        env = {"SLM_RERANK_CACHE_DIR": cache, "PATH": str(CLI.parent) + ":/usr/bin:/bin",
               "HOME": str(Path.home())}

        def once(prompt: str) -> tuple[float, bool]:
            data = json.dumps({"prompt": prompt, "cwd": str(tree),
                               "hook_event_name": "UserPromptSubmit"}).encode()
            started = time.perf_counter()
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            done = subprocess.run([str(CLI), "hook", "claude-prompt", "--fast",
                                   "--deadline", str(deadline)], input=data,
                                  capture_output=True, env=env, timeout=120, cwd=tree)
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            # CPU time (the hook's and its rg's): what a shared machine's load cannot inflate
            cpu.append((after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
                       * 1000)
            return (time.perf_counter() - started) * 1000, bool(done.stdout.strip())

        # the vocabulary first, in process and timed: a first build on a loaded machine can
        # take more than the hook's share of its deadline, and would be timed over prompts
        started = time.perf_counter()
        load(tree, Path(cache), 600.0)
        built = (time.perf_counter() - started) * 1000
        started = time.perf_counter()
        load(tree, Path(cache), 600.0)
        warm = (time.perf_counter() - started) * 1000
        passes = [[once(p) for p in prompts] for _ in ("cold", "warm")]
        checks = [float(m.group(2)) for line in (Path(cache) / "usage.jsonl").open()
                  for m in [re.search(r"vocabulary (cached|built) in (\d+) ms", line)] if m]
    print()
    print(f"hook latency, --fast, cwd {tree.name}, a fresh process per prompt "
          f"({len(prompts)} prompts):")
    names = ("first pass, caches empty", "second pass, caches warm")
    print(f"  vocabulary, in process: first build {built:.0f} ms, warm check {warm:.0f} ms")
    for name, walls in zip(names, passes, strict=True):
        every = [w for w, _ in walls]
        gave = [w for w, answered in walls if answered]
        print(f"  {name}: all p50 {nearest_rank(every, 0.5):.0f} ms, p95 "
              f"{nearest_rank(every, 0.95):.0f} ms; the {len(gave)} that gave context p50 "
              f"{nearest_rank(gave, 0.5):.0f} ms, p95 {nearest_rank(gave, 0.95):.0f} ms"
              if gave else f"  {name}: none gave context")
    half = len(cpu) // 2
    for name, part in (("first pass", cpu[:half]), ("second pass", cpu[half:])):
        if part:
            print(f"  CPU time per hook run, {name}: p50 {nearest_rank(part, 0.5):.0f} ms, "
                  f"p95 {nearest_rank(part, 0.95):.0f} ms")
    if checks:
        print(f"  the vocabulary check in the hook (warm): {len(checks)} runs, p50 "
              f"{nearest_rank(checks, 0.5):.0f} ms, p95 {nearest_rank(checks, 0.95):.0f} ms, "
              f"max {max(checks):.0f} ms")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--split", choices=("dev", "held-out", "all"), default=None,
                        help="report this split only (default: dev, held-out and all)")
    parser.add_argument("--show", action="store_true", help="list the misjudged prompts")
    parser.add_argument("--latency", type=int, default=60, metavar="N",
                        help="prompts timed through the hook on sympy (0: all; -1: none)")
    parser.add_argument("--deadline", type=float, default=5.0, metavar="SECONDS",
                        help="the hook's --deadline while timed (default 5, its own)")
    args = parser.parse_args()
    rows = [json.loads(line) for line in PROMPTS.read_text().splitlines() if line.strip()]
    splits = [args.split] if args.split else ["dev", "held-out", "all"]
    if args.split and args.split != "all":
        rows = [r for r in rows if r["split"] == args.split]
    with tempfile.TemporaryDirectory() as cache:
        judged = judge(rows, Path(cache))
        alone = judge(rows, Path(cache), alone=True)
    report(judged, splits, args.show)
    # How much the shape rules carry: the repository rule alone, on every prompt
    for label in ("code", "process", "chat"):
        part = [d.code for r, d in alone if r["label"] == label]
        print(f"repository rule alone, {label} prompts judged code: {sum(part)}/{len(part)}")
    if args.latency >= 0:
        latency(rows, args.latency, args.deadline)
    return 0


if __name__ == "__main__":
    sys.exit(main())
