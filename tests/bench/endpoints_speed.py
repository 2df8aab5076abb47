#!/usr/bin/env python3
"""One server against two on the same chunk set: the throughput of several endpoints.

    python tests/bench/endpoints_speed.py [--root DIR] [--query TEXT] [--chunks 32]
        [--slots 1,2] [--reps 3] [--threads N]

For each slot count S in --slots it starts two bundled llama-servers (contrib/llama-server:
the binary and GGUF ``make install`` brings) with ``--parallel S`` on free loopback ports
(never 8033-8040), takes the first --chunks chunks of the file-diverse lexical head of
--query over --root, and judges them through ``slm_rerank.model.stage.judge`` (the path a
CLI query takes: probe, dispatch, score cache off) with

  - ``one``: ``endpoints = [A]``
  - ``two``: ``endpoints = [A, B]`` (the chunks spread least-loaded first)

interleaved one, two, two, one, ... so that a drifting machine load hits both alike. Every
run carries its own nonce in the query, so no run finds its prompts in a server's cache
from an earlier run (the instruction before the query is shared, as in real use). Prints
the median chunks per second of each and the ratio two / one, and how the two-server runs
split the chunks. The servers are stopped at the end, also on failure.
"""

from __future__ import annotations

import argparse
import os
import platform
import signal
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from slm_rerank.host import Host
from slm_rerank.model.passages import Passage
from slm_rerank.model.passages import head_passages as passages
from slm_rerank.model.stage import judge
from slm_rerank.pipeline import SearchRequest, gather, head, query_terms, rank

REPO = Path(__file__).resolve().parents[2]
TREES = Path.home() / ".cache" / "slm-rerank-bench" / "trees"
ROOT = TREES / "astropy+astropy@0df94ff70979"
QUERY = "where is a FITS header card value parsed and its comment split off"
#: the ports a scan tries: the benchmark's own servers must never sit there
SCAN_PORTS = range(8033, 8041)


def start_server(slots: int, ctx_per_slot: int, threads: int | None) -> Any:
    sys.path.insert(0, str(REPO / "contrib" / "llama-server"))
    import llamaserver

    extra = ("--threads", str(threads)) if threads else ()
    server = llamaserver.start(llamaserver.find_installed(), slots=slots,
                               ctx_size=slots * ctx_per_slot, extra_args=extra, wait=120.0)
    if server.port in SCAN_PORTS:
        server.stop()
        raise SystemExit(f"a benchmark server got port {server.port}, inside the scan range")
    return server


def head_passages(root: Path, query: str, count: int) -> list[Passage]:
    """The first ``count`` chunks of the file-diverse lexical head, as the model reads them."""
    host = Host.from_environment(start=root)
    terms = query_terms(query)
    request = SearchRequest(query=query, root=root, fast=True)
    notes: list[str] = []
    ranked = rank(request, host, gather(request, host, terms, notes), notes)
    return passages(ranked, head(ranked, count), terms, host.settings.prompt_chars)


def run(urls: list[str], query: str, chunks: list[Passage], root: Path) -> tuple[float, Any]:
    """Seconds to judge ``chunks`` over ``urls``, and the judgement."""
    host = Host.from_environment(start=root, flags={"endpoints": urls, "score_cache": False,
                                                    "timeout": 3600.0})
    nonce = os.urandom(3).hex()
    started = time.perf_counter()
    judgement = judge(f"{query} (run {nonce})", chunks, host, host.settings, None)
    seconds = time.perf_counter() - started
    if judgement.degraded or len(judgement.scores) != len(chunks):
        raise SystemExit(f"run over {urls} judged {len(judgement.scores)} of {len(chunks)}: "
                         f"{judgement.degraded}")
    return seconds, judgement


def measure(slots: int, args: argparse.Namespace, chunks: list[Passage]) -> dict[str, Any]:
    servers = []
    try:
        for _ in range(2):
            servers.append(start_server(slots, args.ctx_per_slot, args.threads))
        a, b = (s.base_url for s in servers)
        run([a, b], QUERY, chunks[:2], args.root)  # warm both: model pages, answer-word ids
        times: dict[str, list[float]] = {"one": [], "two": []}
        split: list[list[int]] = []
        order = ["one", "two", "two", "one"] * ((args.reps + 1) // 2)
        for name in order[:2 * args.reps]:
            urls = [a] if name == "one" else [a, b]
            seconds, judgement = run(urls, args.query, chunks, args.root)
            times[name].append(seconds)
            if name == "two":
                split.append([u.scored for u in judgement.uses])
            print(f"  slots {slots} {name}: {seconds:.1f} s "
                  f"({len(chunks) / seconds:.2f} chunks/s)", flush=True)
    finally:
        for server in servers:
            server.stop()
    one, two = statistics.median(times["one"]), statistics.median(times["two"])
    return {"slots": slots, "one_s": one, "two_s": two, "one_rate": len(chunks) / one,
            "two_rate": len(chunks) / two, "ratio": one / two, "split": split,
            "times": times}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--root", type=Path, default=ROOT)
    ap.add_argument("--query", default=QUERY)
    ap.add_argument("--chunks", type=int, default=32)
    ap.add_argument("--slots", default="1,2", help="comma-separated --parallel values")
    ap.add_argument("--ctx-per-slot", type=int, default=2048)
    ap.add_argument("--reps", type=int, default=3, help="runs of each system per slot count")
    ap.add_argument("--threads", type=int, help="--threads of each server (default: "
                    "llama-server's own choice)")
    args = ap.parse_args()
    # A plain kill must still stop the servers this run started (the finally in measure).
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))

    chunks = head_passages(args.root, args.query, args.chunks)
    if len(chunks) < args.chunks:
        raise SystemExit(f"{args.root}: only {len(chunks)} chunks for the query")
    chars = sum(len(p.code) for p in chunks)
    print(f"{len(chunks)} chunks ({chars} characters of code) from {args.root.name}; "
          f"{os.cpu_count()} cores, {platform.machine()}; threads {args.threads or 'default'}")
    results = [measure(int(s), args, chunks) for s in args.slots.split(",")]
    print()
    print("| slots per server | one server | two servers | two / one | chunks per server "
          "(two) |")
    print("| --- | --- | --- | --- | --- |")
    for r in results:
        split = ", ".join("/".join(str(n) for n in s) for s in r["split"])
        print(f"| {r['slots']} | {r['one_s']:.1f} s ({r['one_rate']:.2f}/s) | "
              f"{r['two_s']:.1f} s ({r['two_rate']:.2f}/s) | {r['ratio']:.2f}x | {split} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
