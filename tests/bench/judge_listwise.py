#!/usr/bin/env python3
"""The listwise judge beside --fast and the yes/no judge, on a sample of benchmark cases.

    cd tests/bench && ../../.venv/bin/python judge_listwise.py -e http://127.0.0.1:8061 \
        --sample 12 --mode title

For each sampled case it runs the lexical stage once, then asks the model about the same
file-diverse head (``--rerank-top``) twice: one yes/no prompt per chunk (``yesno``), and
the whole head in sliding windows (``listwise``). Files are ranked three ways: the
lexical order (what ``--fast`` gives), each judge fused with the lexical prior at the
profile's judge weight (what users get), and each judge alone over the head. It reports
file-level Hit@1/5, and per query the model calls and the prompt tokens the server read
(llama.cpp's ``tokens_evaluated``; ``prompt_n`` is what it computed after reusing its
prompt cache). The score cache is off, so every run pays in full.

The host hands a scorer's documents to servers in batches of their free slots until it
honours ``Scorer.per_document``; so that the listwise judge sees the whole head in one
request here, its run sets ``concurrency`` to the head size.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from cases import MODES, add_case_options, file_order, spread_sample
from metrics import hit_at, mean

from slm_rerank.host import Host
from slm_rerank.model.client import ModelClient
from slm_rerank.pipeline import (
    PlacedChunk,
    SearchRequest,
    fuse,
    gather,
    query_terms,
    rank,
    score,
)

SCORERS = ("yesno", "listwise")


class Meter:
    """Counts the requests a run sends and the prompt tokens the server reports."""

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.calls: dict[str, int] = defaultdict(int)  # HTTP requests by path
        self.prompts = 0  # prompts in them (llama.cpp takes an array of prompts)
        self.prompt_tokens = 0  # every prompt token the server read
        self.computed_tokens = 0  # those it computed (not reused from its prompt cache)

    def record(self, path: str, answer: Any) -> None:
        self.calls[path] += 1
        for item in answer if isinstance(answer, list) else [answer]:
            if not isinstance(item, dict):
                continue
            self.prompts += 1
            timings = item.get("timings") or {}
            usage = item.get("usage") or {}
            self.prompt_tokens += int(item.get("tokens_evaluated")
                                      or usage.get("prompt_tokens") or 0)
            self.computed_tokens += int(timings.get("prompt_n") or 0)


METER = Meter()
_post = ModelClient._post


async def _metered_post(self: ModelClient, endpoint: Any, path: str, body: dict[str, Any],
                        *args: Any, **kwargs: Any) -> Any:
    answer = await _post(self, endpoint, path, body, *args, **kwargs)
    if path in ("/completion", "/v1/completions"):
        METER.record(path, answer)
    return answer


ModelClient._post = _metered_post  # type: ignore[method-assign]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    add_case_options(ap)
    ap.add_argument("-e", "--endpoint", required=True, help="model server URL")
    ap.add_argument("--sample", type=int, default=12, help="cases, spread evenly")
    ap.add_argument("--mode", choices=MODES, default="title")
    ap.add_argument("--rerank-top", type=int, default=16)
    ap.add_argument("--window", type=int, default=20, help="[plugins.listwise] window")
    ap.add_argument("--step", type=int, default=10, help="[plugins.listwise] step")
    ap.add_argument("--json", type=Path, help="write per-case rows here")
    args = ap.parse_args()

    hosts = {}
    for scorer in SCORERS:
        flags: dict[str, Any] = {"base_url": args.endpoint, "rerank_top": args.rerank_top,
                                 "timeout": 900.0, "scorer": scorer, "score_cache": False,
                                 "top_k": 10}
        if scorer == "listwise":
            flags["concurrency"] = args.rerank_top
        host = Host.from_environment(flags=flags)
        host.settings.plugins = {**host.settings.plugins,
                                 "listwise": {"window": args.window, "step": args.step}}
        hosts[scorer] = (host, host.settings)
    sample = spread_sample(args.cases, args.trees, args.sample)
    rows: list[dict[str, Any]] = []
    started = time.perf_counter()
    for n, case in enumerate(sample, 1):
        request = SearchRequest(query=case.text(args.mode),
                                root=case.tree(args.trees).resolve(), fast=False)
        terms = query_terms(request.query)
        host, settings = hosts["yesno"]
        ranked = rank(request, host, gather(request, host, terms, []), [])
        if not ranked.chunks:
            continue
        row: dict[str, Any] = {"id": case.id,
                               "orders": {"lexical (--fast)": file_order(fuse(ranked))},
                               "cost": {}, "degraded": {}}
        for scorer in SCORERS:
            host, settings = hosts[scorer]
            METER.reset()
            clock = time.perf_counter()
            judgement, verdicts, lengths, _ = score(request, host, settings, terms, ranked)
            seconds = time.perf_counter() - clock
            profile = judgement.profile.profile if judgement.profile else None
            weight = profile.judge_weight if profile else 1.0
            exponent = profile.length_exponent if profile else 0.0
            row["degraded"][scorer] = judgement.degraded
            if judgement.degraded:
                print(f"{case.id} {scorer}: degraded: {judgement.degraded}", file=sys.stderr)
            row["orders"][f"{scorer} fused (w={weight})"] = file_order(
                fuse(ranked, verdicts, weight, lengths, exponent))
            alone = sorted(verdicts, key=lambda i: (-verdicts[i], i))
            tail = [i for i in range(len(ranked.chunks)) if i not in verdicts]
            row["orders"][f"{scorer} alone"] = file_order(
                [PlacedChunk(ranked.chunks[i], verdicts.get(i, 0.0)) for i in alone + tail])
            row["cost"][scorer] = {"calls": sum(METER.calls.values()),
                                   "prompts": METER.prompts,
                                   "prompt_tokens": METER.prompt_tokens,
                                   "computed_tokens": METER.computed_tokens,
                                   "seconds": round(seconds, 1),
                                   "scored": len(verdicts)}
        rows.append(row)
        if args.json:  # after every case: a long run stopped early keeps what it measured
            args.json.write_text(json.dumps(rows, indent=1))
        print(f"[{n}/{len(sample)}] {case.id} ({time.perf_counter() - started:.0f} s) "
              f"{row['cost']}", file=sys.stderr)

    gold = {c.id: c.gold_files for c in sample}
    print(f"\n{len(rows)} cases ({args.mode} mode, spread evenly over those with a tree), head "
          f"{args.rerank_top}, listwise window {args.window} step {args.step}, "
          f"{time.perf_counter() - started:.0f} s\n")
    print("| order | Hit@1 | Hit@5 |\n| --- | ---: | ---: |")
    for order in rows[0]["orders"] if rows else []:
        hits = [100 * mean(float(hit_at(r["orders"][order], gold[r["id"]], k)) for r in rows)
                for k in (1, 5)]
        print(f"| {order} | {hits[0]:.1f} | {hits[1]:.1f} |")
    print("\n| judge | requests / query | prompts / query | prompt tokens / query | "
          "computed / query | s / query | degraded |\n"
          "| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for scorer in SCORERS:
        costs = [r["cost"][scorer] for r in rows]
        degraded = sum(1 for r in rows if r["degraded"][scorer])
        print(f"| {scorer} | {mean(c['calls'] for c in costs):.1f} | "
              f"{mean(c['prompts'] for c in costs):.1f} | "
              f"{mean(c['prompt_tokens'] for c in costs):.0f} | "
              f"{mean(c['computed_tokens'] for c in costs):.0f} | "
              f"{mean(c['seconds'] for c in costs):.1f} | {degraded} of {len(rows)} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
