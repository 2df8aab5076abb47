#!/usr/bin/env python3
"""Quality of the model stage on the benchmark cases, against any endpoint.

    SLM_ENDPOINT=http://gpu-box:8080 python tests/bench/model_quality.py --sample 40
    python tests/bench/model_quality.py -e http://127.0.0.1:8098 --sample 24 --json out.json

For each sampled case and query mode it runs the lexical stage once, asks the model about
the file-diverse head (``--rerank-top``, default 16) once, and ranks files four ways from
the same verdicts: the lexical order (what ``--fast`` gives), the model's raw score alone
over the head (then the lexical tail), and the fused order for several judge weights w
(logit = w * logit(p) + z; the profile's own weight is marked). It reports file-level
Hit@1/5 for each, and the head's file recall (the share of cases whose head holds a gold
file: the ceiling of what any judge can lift). Scores are cached as in normal use, so a
second run with other weights costs no model time.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from cases import MODES, SPLITS, add_case_options, file_order, spread_sample
from metrics import hit_at, mean

from slm_rerank.cache_folder import cache_path, ensure_writable
from slm_rerank.host import Host
from slm_rerank.lexical.rank import lead
from slm_rerank.pipeline import (
    PlacedChunk,
    SearchRequest,
    fuse,
    gather,
    head,
    judge_head,
    query_terms,
    rank,
)

WEIGHTS = (0.1, 0.25, 0.5, 1.0)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    add_case_options(ap)
    ap.add_argument("-e", "--endpoint", help="model server URL (default: SLM_ENDPOINT, scan)")
    ap.add_argument("--model", help="model profile (default: the one claiming the model id)")
    ap.add_argument("--sample", type=int, default=24, help="cases, spread evenly")
    ap.add_argument("--rerank-top", type=int, default=16)
    ap.add_argument("--prompt-chars", type=int, help="passage budget (default: the setting)")
    ap.add_argument("--split", choices=SPLITS, default="all",
                    help="dev cases (choose weights there), held-out (report there), all")
    ap.add_argument("--modes", default=",".join(MODES))
    ap.add_argument("--json", type=Path, help="write per-case ranks here")
    ap.add_argument("--budget", help="cap each query's model work (2000: tokens, 20s)")
    ap.add_argument("--cascade", action="store_true", help="judge in a cascade")
    ap.add_argument("--concurrency", type=int,
                    help="requests in flight (default: the server's slots); 1 on a CPU "
                         "server reads a query's shared prefix once")
    ap.add_argument("--no-cache", action="store_true",
                    help="ask the server again (token counts are only known for fresh "
                         "verdicts)")
    args = ap.parse_args()

    flags = {"base_url": args.endpoint, "model": args.model, "rerank_top": args.rerank_top,
             "timeout": 600.0, "prompt_chars": args.prompt_chars, "cascade": args.cascade,
             "score_cache": not args.no_cache, "concurrency": args.concurrency}
    if args.budget:
        from slm_rerank.model.judge_budget import parse_budget

        budget = parse_budget(args.budget)
        flags.update(budget_tokens=budget.tokens, budget_seconds=budget.seconds)
    host = Host.from_environment(flags={**flags, "top_k": 10})
    settings = host.settings
    cache = ensure_writable(cache_path(settings))
    sample = spread_sample(args.cases, args.trees, args.sample, args.split)
    modes = args.modes.split(",")
    rows: list[dict] = []
    started = time.perf_counter()
    profile_weight = None
    for n, case in enumerate(sample, 1):
        for mode in modes:
            request = SearchRequest(query=case.text(mode), root=case.tree(args.trees).resolve(),
                                    fast=False, cache_dir=cache)
            terms = query_terms(request.query)
            notes: list[str] = []
            ranked = rank(request, host, gather(request, host, terms, notes), notes)
            if not ranked.chunks:
                continue
            scored = judge_head(request, host, settings, terms, ranked)
            judgement, chosen = scored.judgement, scored.chosen
            verdicts = {chosen[j]: v.probability for j, v in judgement.scores.items()}
            lengths = {chosen[j]: n for j, n in scored.lengths.items()}
            if judgement.degraded:
                print(f"{case.id} {mode}: degraded: {judgement.degraded}", file=sys.stderr)
            profile = judgement.profile.profile if judgement.profile else None
            profile_weight = profile.judge_weight if profile else None
            exponent = profile.length_exponent if profile else 0.0
            head_files = {ranked.chunks[i].path for i in head(ranked, settings.rerank_top)}
            row = {"id": case.id, "repo": case.repo, "mode": mode,
                   "head_recall": bool(head_files & set(case.gold_files)),
                   "scored": len(verdicts), "orders": {},
                   "intent": judgement.intent.kind if judgement.intent else None,
                   "seconds": judgement.model_ms / 1000, "sent": judgement.sent,
                   # what fusion needs, to try other fusions offline: the first chunks in
                   # lexical order (path, score) and the judged ones' verdicts and lengths
                   "chunks": [[c.path, c.score] for c in
                              ranked.chunks[:max(300, max(verdicts, default=0) + 1)]],
                   "verdicts": {str(i): p for i, p in verdicts.items()},
                   "lengths": {str(i): n for i, n in lengths.items()},
                   "gold": list(case.gold_files),
                   # the head in the order it was judged, and what each verdict cost:
                   # prompt tokens and of them cached, as the server counted them
                   "head": chosen, "tokens": judgement.tokens.to_dict(),
                   # the cascade's measure: how far the first file leads the next
                   "lead": lead(ranked),
                   "costs": {str(chosen[j]): list(cost)
                             for j, cost in judgement.tokens.per_document.items()}}
            row["orders"]["lexical"] = file_order(fuse(ranked))
            # the model alone: the head by raw P(relevant), then the lexical tail
            alone = sorted(verdicts, key=lambda i: (-verdicts[i], i))
            tail = [i for i in range(len(ranked.chunks)) if i not in verdicts]
            row["orders"]["model-alone"] = file_order(
                [PlacedChunk(ranked.chunks[i], verdicts.get(i, 0.0)) for i in alone + tail])
            for w in WEIGHTS:
                row["orders"][f"fused w={w}"] = file_order(
                    fuse(ranked, verdicts, w, lengths, exponent))
            rows.append(row)
        if args.json:  # after every case: a long run stopped early keeps what it measured
            args.json.write_text(json.dumps(rows, indent=1))
        print(f"[{n}/{len(sample)}] {case.id} ({time.perf_counter() - started:.0f} s)",
              file=sys.stderr)

    gold = {c.id: c.gold_files for c in sample}
    print(f"\n{len(sample)} cases ({args.split}, spread evenly over those with a tree), head "
          f"{settings.rerank_top}, prompt_chars {settings.prompt_chars}, "
          f"profile weight {profile_weight}, {time.perf_counter() - started:.0f} s\n")
    print("| mode | order | Hit@1 | Hit@5 | Hit@10 |\n| --- | --- | ---: | ---: | ---: |")
    for mode in modes:
        mode_rows = [r for r in rows if r["mode"] == mode]
        for order in mode_rows[0]["orders"] if mode_rows else []:
            hits = [100 * mean(float(hit_at(r["orders"][order], gold[r["id"]], k))
                               for r in mode_rows) for k in (1, 5, 10)]
            print(f"| {mode} | {order} | {hits[0]:.1f} | {hits[1]:.1f} | {hits[2]:.1f} |")
        recall = 100 * mean(float(r["head_recall"]) for r in mode_rows)
        print(f"| {mode} | head file recall | | {recall:.1f} | |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
