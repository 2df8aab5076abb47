#!/usr/bin/env python3
"""What ghost stubs save: stub and skeleton size against the whole files, on real searches.

    python tests/bench/stub_savings.py [--sample 60] [--top 3] [--seed 0] [--mode title]

For a sample of benchmark cases, searches the case's tree (``slm_rerank.search``, ``--fast``,
top 5) and stubs each distinct file among the first ``--top`` results, citing the lines
those results cite in it; ``--slice`` is the skeleton (no body kept). Prints a markdown
table: characters and estimated tokens of whole files, stubs and skeletons, and, for the
stubbed files that the fix changed (gold files), how often the stub still shows the changed
lines (``case.gold_lines``, those that are not blank). Tokens are counted with a simple
regex tokenizer (a word, or one punctuation character), not a model's tokenizer. Queries
are not logged to usage.jsonl.
"""

from __future__ import annotations

import argparse
import dataclasses
import random
import re
import shlex
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from statistics import median

from cases import add_case_options, load_cases, tree_ready

import slm_rerank
from slm_rerank.config import load_settings
from slm_rerank.context.stubs import MAX_LINES, Stub, stub_file
from slm_rerank.host import Host

_TOKEN = re.compile(r"\w+|[^\w\s]")
_KEPT = re.compile(r"^ *(\d+)[ >] ", re.MULTILINE)


def tokens(text: str) -> int:
    return len(_TOKEN.findall(text))


def kept_numbers(stub: Stub) -> set[int]:
    return {int(n) for n in _KEPT.findall(stub.text)}


@dataclass
class Totals:
    files: int = 0
    chars: Counter[str] = field(default_factory=Counter)
    tokens: Counter[str] = field(default_factory=Counter)
    lines: Counter[str] = field(default_factory=Counter)
    methods: Counter[str] = field(default_factory=Counter)
    notes: Counter[str] = field(default_factory=Counter)
    gold_files: int = 0
    gold_all: Counter[str] = field(default_factory=Counter)  # every changed line shown
    gold_any: Counter[str] = field(default_factory=Counter)  # at least one shown
    gold_cited: int = 0  # some changed line lies in a cited range
    seconds: float = 0.0
    stubs: int = 0
    ratios: dict[str, list[float]] = field(default_factory=lambda: {"stub": [], "skeleton": []})


def measure(case, tree: Path, mode: str, top: int, host: Host, totals: Totals,  # type: ignore[no-untyped-def]
            max_lines: int) -> None:
    report = slm_rerank.search(case.text(mode), root=tree, fast=True, top_k=5, host=host,
                               caller="bench")
    cited: dict[str, list[tuple[int, int]]] = {}
    for c in report.results[:top]:
        cited.setdefault(c.path, []).append((c.start_line, c.end_line))
    for rel, ranges in cited.items():
        whole = (tree / rel).read_text(encoding="utf-8", errors="replace")
        started = time.perf_counter()
        stubs = {kind: stub_file(tree, rel, ranges, skeleton=kind == "skeleton",
                                 max_lines=max_lines)
                 for kind in ("stub", "skeleton")}
        totals.seconds += time.perf_counter() - started
        totals.stubs += 2
        totals.files += 1
        totals.chars["whole"] += len(whole)
        totals.tokens["whole"] += tokens(whole)
        totals.lines["whole"] += stubs["stub"].total_lines
        for kind, stub in stubs.items():
            totals.chars[kind] += len(stub.text)
            totals.tokens[kind] += tokens(stub.text)
            totals.lines[kind] += stub.kept_lines
            totals.ratios[kind].append(tokens(stub.text) / max(tokens(whole), 1))
            if stub.note:
                for part in stub.note.split("; "):
                    totals.notes[f"{kind}: {re.sub(r'[0-9]+', 'N', part)}"] += 1
        totals.methods[stubs["stub"].method] += 1
        gold = case.gold_lines.get(rel)
        if not gold:
            continue
        # A blank line shown says nothing about the change, and an insertion's gold line is
        # often the blank line it went after: only lines with text count.
        source = whole.split("\n")
        changed = {n for start, end in gold for n in range(start, end + 1)
                   if n <= len(source) and source[n - 1].strip()}
        if not changed:
            continue
        totals.gold_files += 1
        if any(s <= n <= e for n in changed for s, e in ranges):
            totals.gold_cited += 1
        for kind, stub in stubs.items():
            shown = changed & kept_numbers(stub)
            totals.gold_all[kind] += shown == changed
            totals.gold_any[kind] += bool(shown)


def table(t: Totals, cases: int, top: int) -> str:
    def pct(part: float, whole: float) -> str:
        return f"{100 * part / whole:.1f} %" if whole else "n/a"

    rows = [
        "| | whole files | stub (`--stub`) | skeleton (`--slice`) |",
        "| --- | ---: | ---: | ---: |",
        f"| characters | {t.chars['whole']:,} | {t.chars['stub']:,} | {t.chars['skeleton']:,} |",
        f"| tokens (regex estimate) | {t.tokens['whole']:,} | {t.tokens['stub']:,} | "
        f"{t.tokens['skeleton']:,} |",
        f"| source lines shown | {t.lines['whole']:,} | {t.lines['stub']:,} | "
        f"{t.lines['skeleton']:,} |",
        f"| size vs whole files (characters) | 100 % | {pct(t.chars['stub'], t.chars['whole'])} | "
        f"{pct(t.chars['skeleton'], t.chars['whole'])} |",
        f"| size vs whole files (tokens) | 100 % | {pct(t.tokens['stub'], t.tokens['whole'])} | "
        f"{pct(t.tokens['skeleton'], t.tokens['whole'])} |",
        f"| median file, tokens | 100 % | {100 * median(t.ratios['stub'] or [0]):.1f} % | "
        f"{100 * median(t.ratios['skeleton'] or [0]):.1f} % |",
        f"| gold files: all changed lines shown ({t.gold_files} files) | 100 % | "
        f"{pct(t.gold_all['stub'], t.gold_files)} | {pct(t.gold_all['skeleton'], t.gold_files)} |",
        f"| gold files: some changed line shown | 100 % | "
        f"{pct(t.gold_any['stub'], t.gold_files)} | {pct(t.gold_any['skeleton'], t.gold_files)} |",
    ]
    methods = ", ".join(f"{m} {n}" for m, n in t.methods.most_common())
    notes = "; ".join(f"{k} ({n})" for k, n in t.notes.most_common()) or "none"
    return "\n".join(rows) + (
        f"\n\n{cases} cases, {t.files} files (distinct files of the top {top} results); "
        f"methods: {methods}; notes: {notes}. Gold files among them: {t.gold_files}, "
        f"{t.gold_cited} with a changed line inside a cited range. Stubbing took "
        f"{1000 * t.seconds / max(t.stubs, 1):.1f} ms a stub.")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    add_case_options(ap)
    ap.add_argument("--sample", type=int, default=60, help="cases to sample (0: all)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--top", type=int, default=3, help="results whose files are stubbed")
    ap.add_argument("--mode", choices=("title", "query"), default="title")
    ap.add_argument("--max-lines", type=int, default=MAX_LINES,
                    help="the stubs' cap on lines shown (a huge number: no cap)")
    args = ap.parse_args()
    ready = [c for c in load_cases(args.cases) if tree_ready(c.tree(args.trees))]
    sample = ready if not args.sample or args.sample >= len(ready) else sorted(
        random.Random(args.seed).sample(ready, args.sample), key=lambda c: c.id)
    host = Host(dataclasses.replace(load_settings(), usage_log=False))
    totals = Totals()
    for case in sample:
        measure(case, case.tree(args.trees).resolve(), args.mode, args.top, host, totals,
                args.max_lines)
    print(f"`{shlex.join(['python', 'tests/bench/stub_savings.py', *sys.argv[1:]])}`\n")
    print(table(totals, len(sample), args.top))
    return 0


if __name__ == "__main__":
    sys.exit(main())
