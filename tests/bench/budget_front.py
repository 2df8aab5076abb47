#!/usr/bin/env python3
"""What a query's judge costs against what it gains: head sizes and cascades, replayed
from saved verdicts, without a model server.

    python tests/bench/model_quality.py -e URL --split dev --modes query --rerank-top 16 \\
        --prompt-chars 1500 --no-cache --json a.json                   # asks the model
    python tests/bench/budget_front.py 1500=a.json 500=b.json --markdown  # free

``model_quality.py --json`` keeps, per case, the head in the order it was judged and what
each verdict cost (prompt tokens and of them cached, as llama.cpp counted them). Judging
passes the head in order, so the first k passages of a 16-passage run are what a head of
k would have judged, at the cost they had; a cascade (judge ``first``, then rounds of two
while no verdict reaches ``clear``) is replayed the same way, and so is the cascade's first
step: a head judged only when the query's lexical lead (``lexical.rank.lead``, computed
from the saved ranking) is below a threshold, else nothing. For each plan this prints
file-level Hit@1/5 of the fused order (the search's own ``fusion.fuse_scores`` with the
file-kind prior and the profile's weight for the query), and per query the median of:
prompt tokens, tokens read (prompt - cached), the share of prompt tokens taken from the
prompt cache, the tokens one slot would have read on a cold cache (every prompt's tokens,
less the shared prefix for all but the first: ``prefix_tokens``), and model seconds at the
throughput the run measured (tokens read / seconds, over the whole run). The llama-server's
prompt cache outlives a query (``--cache-ram``): a run of the same queries after another
finds their prefixes already cached, so its "read" column is below a cold query's; the
one-slot column does not depend on that.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

from cases import DEFAULT_CASES, load_cases
from metrics import hit_at, mean
from model_refuse import distinct

from slm_rerank.config import Settings
from slm_rerank.host import Host
from slm_rerank.lexical.chunking import Chunk
from slm_rerank.lexical.rank import Ranked, head, lead
from slm_rerank.lexical.scores import ScoredChunk, kind_prior
from slm_rerank.lexical.terms import extract
from slm_rerank.model.fusion import fuse_scores, judge_weight

HEADS = (4, 6, 8, 12, 16)
CASCADES = ((4, 0.6), (4, 0.7), (4, 0.8), (2, 0.7))
#: heads judged only when the lexical lead is below a threshold (the cascade's first step,
#: ``cascade.DECISIVE_LEAD``): (head size, lead)
DECISIVE = ((4, 1.1), (4, 1.2), (4, 1.3), (16, 1.2))


def cascade(head: list[int], verdicts: dict[int, float], first: int, clear: float,
            slots: int = 2) -> list[int]:
    """The passages a cascade judges: ``first``, then rounds of ``slots`` while none of
    the judged reaches ``clear``."""
    judged = head[:first]
    while len(judged) < len(head) and max(verdicts[i] for i in judged) < clear:
        judged = head[:len(judged) + slots]
    return judged


def replay(row: dict, judged: list[int], query: str, weight: float, exponent: float
           ) -> dict[str, float]:
    chunks = row["chunks"]
    paths = [p for p, _ in chunks]
    verdicts = {int(i): p for i, p in row["verdicts"].items()}
    lengths = {int(i): n for i, n in row["lengths"].items()}
    costs = {int(i): c for i, c in row.get("costs", {}).items()}  # older runs have none
    terms = extract(query)
    mine = {i: verdicts[i] for i in judged}
    priors = {i: kind_prior(paths[i], terms) for i in mine}
    fused = fuse_scores([s for _, s in chunks], mine, weight, lengths, exponent, priors)
    order = distinct([paths[f.index] for f in fused])
    prompt = sum(costs.get(i, (0, 0))[0] for i in judged)
    cached = sum(costs.get(i, (0, 0))[1] for i in judged)
    one_slot = prompt - prefix_tokens(row) * max(len(judged) - 1, 0) if judged else 0
    return {"hit1": float(hit_at(order, row["gold"], 1)),
            "hit5": float(hit_at(order, row["gold"], 5)),
            "prompt": prompt, "read": prompt - cached, "one_slot": max(one_slot, 0),
            "reuse": cached / prompt if prompt else 0.0, "judged": len(judged)}


def prefix_tokens(row: dict) -> int:
    """The tokens every prompt of the query shares (instruction and query): the fewest
    cached tokens of a prompt after the first two in judging order, which each slot's cache
    held by then. (The first prompts may have more, or fewer: the server's prompt cache
    keeps earlier runs of the same query.)"""
    costs = row.get("costs", {})
    later = [costs[str(i)][1] for i in row.get("head", [])[2:] if str(i) in costs]
    return min(later) if later else 0


def saved_ranking(row: dict) -> Ranked:
    """The run's saved lexical ranking (paths and scores, best first)."""
    return Ranked([ScoredChunk(p, Chunk(1, 1), s, []) for p, s in row["chunks"]])


def row_lead(row: dict) -> float | None:
    """The lexical lead of the query (``lexical.rank.lead``) from the run's saved ranking."""
    return lead(saved_ranking(row))


def plans(row: dict) -> dict[str, list[int]]:
    costs = row.get("costs")
    # runs before the head was saved: the head the search takes of the saved ranking
    order = row.get("head") or head(saved_ranking(row), len(row["verdicts"]))
    judged = [i for i in order if str(i) in row["verdicts"]
              and (costs is None or str(i) in costs)]
    verdicts = {int(i): p for i, p in row["verdicts"].items()}
    out = {f"head {k}": judged[:k] for k in HEADS if k <= len(order)}
    for first, clear in CASCADES:
        out[f"cascade {first}, clear {clear:g}"] = cascade(judged, verdicts, first, clear)
    ahead = row_lead(row)
    for k, at in DECISIVE:
        if k <= len(order):
            sure = ahead is not None and ahead >= at
            out[f"head {k} unless lead >= {at:g}"] = [] if sure else judged[:k]
    return out


def table(label: str, rows: list[dict], texts: dict[str, str], profile, exponent: float,
          markdown: bool) -> list[str]:
    seconds = sum(r["seconds"] for r in rows if "tokens" in r)
    read = sum(r["tokens"]["read"] for r in rows if "tokens" in r)
    rate = read / seconds if seconds else float("nan")
    by_plan: dict[str, list[dict[str, float]]] = {}
    for row in rows:
        query = texts[row["id"]]
        weight = judge_weight(profile, query)
        for name, judged in plans(row).items():
            by_plan.setdefault(name, []).append(replay(row, judged, query, weight, exponent))
    lines = []
    for name, got in by_plan.items():
        med = {k: statistics.median(g[k] for g in got)
               for k in ("prompt", "read", "one_slot", "reuse", "judged")}
        cells = [label, name, str(len(got)),
                 f"{100 * mean(g['hit1'] for g in got):.1f}",
                 f"{100 * mean(g['hit5'] for g in got):.1f}",
                 f"{med['judged']:.0f}", f"{med['prompt']:.0f}", f"{med['read']:.0f}",
                 f"{100 * med['reuse']:.0f} %", f"{med['one_slot']:.0f}",
                 f"{med['read'] / rate:.0f}", f"{med['one_slot'] / rate:.0f}",
                 f"{mean(g['one_slot'] for g in got) / rate:.0f}"]
        lines.append("| " + " | ".join(cells) + " |" if markdown else "  ".join(cells))
    lines.append(f"{'|' if markdown else ''} {label}: measured {rate:.1f} tokens read a "
                 f"second over {len(rows)} queries{' |' if markdown else ''}")
    return lines


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("runs", nargs="+", help="LABEL=model_quality.json (LABEL: e.g. 1500)")
    ap.add_argument("--cases", type=Path, default=DEFAULT_CASES)
    ap.add_argument("--profile", default="qwen", help="the profile whose weights fuse")
    ap.add_argument("--markdown", action="store_true")
    ap.add_argument("--mode", help="only this query mode (title, query) of each run")
    args = ap.parse_args()
    cases = {c.id: c for c in load_cases(args.cases)}
    profile = Host(Settings()).registry.profiles()[args.profile]
    lines = []
    if args.markdown:
        lines += ["| passage chars | plan | cases | Hit@1 | Hit@5 | judged | prompt tokens | "
                  "read | cached | read, one slot | s | s, one slot | mean s, one slot |",
                  "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | "
                  "---: | ---: | ---: |"]
    for run in args.runs:
        label, _, path = run.partition("=")
        rows = [r for r in json.loads(Path(path).read_text()) if "verdicts" in r
                and args.mode in (None, r["mode"])]
        texts = {r["id"]: cases[r["id"]].text(r["mode"]) for r in rows}
        lines += table(label, rows, texts, profile, profile.length_exponent, args.markdown)
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
