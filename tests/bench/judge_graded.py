#!/usr/bin/env python3
"""The graded judge beside --fast and the yes/no judge, on a small sample of dev cases.

    cd tests/bench && ../../.venv/bin/python judge_graded.py -e http://127.0.0.1:8071 --sample 12

Start the server with ``--metrics`` (llama-server): the prompt tokens each judge made the
server process are read from its ``llamacpp:prompt_tokens_total`` counter (tokens taken
from the prompt cache are not processed, so they do not count). Model calls are counted
by wrapping ``ModelClient.next_token`` (one per prompt) and ``ModelClient.generate``.

For each sampled case the lexical stage runs once; each judge then scores the same head
(``--rerank-top``, score cache off) and the files are ranked three ways per judge: fused
with the profile's judge weight (what a user gets), and the model's score alone over the
head. Reports file-level Hit@1/5 and, per query, model calls, processed prompt tokens and
seconds.
"""

from __future__ import annotations

import argparse
import re
import sys
import time

import httpx
from cases import add_case_options, file_order, spread_sample
from metrics import hit_at, mean

from slm_rerank.cache_folder import cache_path, ensure_writable
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

JUDGES = ("yesno", "graded")
CALLS = {"n": 0}


def counting() -> None:
    """Count every prompt the client sends (the bench's own instrumentation)."""
    next_token, generate = ModelClient.next_token, ModelClient.generate

    async def counted_next_token(self, endpoint, prompts, *args, **kwargs):  # type: ignore[no-untyped-def]
        CALLS["n"] += len(prompts)
        return await next_token(self, endpoint, prompts, *args, **kwargs)

    async def counted_generate(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        CALLS["n"] += 1
        return await generate(self, *args, **kwargs)

    ModelClient.next_token = counted_next_token  # type: ignore[method-assign]
    ModelClient.generate = counted_generate  # type: ignore[method-assign]


def prompt_tokens(base_url: str) -> float:
    text = httpx.get(base_url.rstrip("/") + "/metrics", timeout=30).text
    found = re.search(r"^llamacpp:prompt_tokens_total\s+(\S+)", text, re.MULTILINE)
    if found is None:
        raise SystemExit(f"{base_url}/metrics has no llamacpp:prompt_tokens_total; start "
                         "llama-server with --metrics")
    return float(found.group(1))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    add_case_options(ap)
    ap.add_argument("-e", "--endpoint", required=True, help="llama-server URL (--metrics on)")
    ap.add_argument("--sample", type=int, default=12, help="cases, spread evenly")
    ap.add_argument("--rerank-top", type=int, default=16)
    ap.add_argument("--mode", default="title")
    args = ap.parse_args()

    counting()
    hosts = {}
    for judge in JUDGES:
        host = Host.from_environment(flags={
            "base_url": args.endpoint, "rerank_top": args.rerank_top, "timeout": 900.0,
            "scorer": judge, "score_cache": False, "top_k": 10})
        hosts[judge] = (host, host.settings)
    cache = ensure_writable(cache_path(hosts[JUDGES[0]][1]))
    sample = spread_sample(args.cases, args.trees, args.sample)
    rows: list[dict] = []
    cost = {j: {"calls": [], "tokens": [], "seconds": [], "scored": []} for j in JUDGES}
    for n, case in enumerate(sample, 1):
        request = SearchRequest(query=case.text(args.mode),
                                root=case.tree(args.trees).resolve(), fast=False,
                                cache_dir=cache)
        terms = query_terms(request.query)
        host, settings = hosts[JUDGES[0]]
        notes: list[str] = []
        ranked = rank(request, host, gather(request, host, terms, notes), notes)
        if not ranked.chunks:
            continue
        row = {"id": case.id, "orders": {"--fast (lexical)": file_order(fuse(ranked))}}
        for judge in JUDGES:
            host, settings = hosts[judge]
            calls, tokens, started = CALLS["n"], prompt_tokens(args.endpoint), time.perf_counter()
            judgement, verdicts, lengths, _ = score(request, host, settings, terms, ranked)
            cost[judge]["seconds"].append(time.perf_counter() - started)
            cost[judge]["calls"].append(CALLS["n"] - calls)
            cost[judge]["tokens"].append(prompt_tokens(args.endpoint) - tokens)
            cost[judge]["scored"].append(len(verdicts))
            if judgement.degraded:
                print(f"{case.id} {judge}: degraded: {judgement.degraded}", file=sys.stderr)
            profile = judgement.profile.profile if judgement.profile else None
            weight = profile.judge_weight if profile else 1.0
            exponent = profile.length_exponent if profile else 0.0
            row["orders"][f"{judge} fused (w={weight})"] = file_order(
                fuse(ranked, verdicts, weight, lengths, exponent))
            alone = sorted(verdicts, key=lambda i: (-verdicts[i], i))
            tail = [i for i in range(len(ranked.chunks)) if i not in verdicts]
            row["orders"][f"{judge} alone"] = file_order(
                [PlacedChunk(ranked.chunks[i], verdicts.get(i, 0.0)) for i in alone + tail])
        rows.append(row)
        print(f"[{n}/{len(sample)}] {case.id}", file=sys.stderr)

    gold = {c.id: c.gold_files for c in sample}
    print(f"\n{len(rows)} cases ({args.mode} mode, spread evenly over those with a tree), head "
          f"{args.rerank_top}\n")
    print("| order | Hit@1 | Hit@5 |\n| --- | ---: | ---: |")
    for order in rows[0]["orders"] if rows else []:
        hits = [100 * mean(float(hit_at(r["orders"][order], gold[r["id"]], k)) for r in rows)
                for k in (1, 5)]
        print(f"| {order} | {hits[0]:.1f} | {hits[1]:.1f} |")
    print("\n| judge | chunks judged / query | model calls / query | prompt tokens "
          "processed / query | seconds / query |\n| --- | ---: | ---: | ---: | ---: |")
    for judge in JUDGES:
        c = cost[judge]
        print(f"| {judge} | {mean(c['scored']):.1f} | {mean(c['calls']):.1f} | "
              f"{mean(c['tokens']):.0f} | {mean(c['seconds']):.1f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
