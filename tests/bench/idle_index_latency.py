#!/usr/bin/env python3
"""A warm MCP call and a warm ``slm_rerank.search(fast=True)``, two checkouts side by side
(before: no idle work in those processes; after: the word index built between calls), each
timed call paired with one ``rg -i -c`` over the same terms.

    python tests/bench/idle_index_latency.py ROOT --before DIR --after DIR [--pairs 4] [--runs 15]

DIR is a checkout of slm-rerank (the host and the ripgrep plugin are taken from it through
PYTHONPATH; the venv is this one's). Each pair runs both sides, taking turns to go first:
for each side an MCP server (``slm-rerank mcp``, JSON-RPC over stdio) and then a Python
process calling the API. Each gets its first calls (the MCP server one, the API two: the after
side's build starts after them), then ten calls timed apart ("during the build": on the
after side they arrive while the index is being built), then waits until the process is
idle (its CPU time still for a second: the after side's index built; then once more
after one more call), then ``--runs``
calls, each followed by one rg process. Printed per side and pair: the load average, the
call's wall p50 and CPU p50 (the server's or the API process's, with the rg and git it
ran), rg's wall p50, and the median of the call/rg ratios taken call by call.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

BIN = Path(sys.executable).parent / "slm-rerank"
WORDS = ("matrix", "determinant", "bareiss")
RG = shutil.which("rg") or str(BIN.parent / "rg")

#: the API side, run in a process of its own: argv = ROOT RUNS; prints its figures as JSON
API_SIDE = r"""
import json, os, resource, statistics, subprocess, sys, time
root, runs, rg, words = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4:]
import slm_rerank

def children():
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime

def cpu():
    return time.process_time() + children()

def one_rg():
    c, t = children(), time.perf_counter()
    subprocess.run([rg, "-i", "-c", *[a for w in words for a in ("-e", w)], "."], cwd=root,
                   stdout=subprocess.DEVNULL, check=False)
    return time.perf_counter() - t, children() - c

def idle():
    last = cpu()
    while True:
        time.sleep(1.0)
        now = cpu()
        if now - last < 0.02:
            return
        last = now

query = " ".join(words)
first = [f"{c.path}:{c.start_line}" for c in slm_rerank.search(query, root, fast=True).results]
slm_rerank.search(query, root, fast=True)  # the second: the after side's build starts now
during = []
for _ in range(10):
    t = time.perf_counter()
    slm_rerank.search(query, root, fast=True)
    during.append(time.perf_counter() - t)
idle()  # the index built, in the after side's idle-work thread
slm_rerank.search(query, root, fast=True)  # a build cut short at its 5 s goes on
idle()
calls, rgs = [], []
same = True
for _ in range(runs):
    c, t = cpu(), time.perf_counter()
    report = slm_rerank.search(query, root, fast=True)
    calls.append((time.perf_counter() - t, cpu() - c))
    same = same and [f"{c.path}:{c.start_line}" for c in report.results] == first
    rgs.append(one_rg())
print(json.dumps({"calls": calls, "rg": rgs, "same": same, "places": first,
                  "during": during}))
"""


def children_cpu() -> float:
    import resource

    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def one_rg(root: Path) -> tuple[float, float]:
    cpu, started = children_cpu(), time.perf_counter()
    subprocess.run([RG, "-i", "-c", *[a for w in WORDS for a in ("-e", w)], "."], cwd=root,
                   stdout=subprocess.DEVNULL, check=False)
    return time.perf_counter() - started, children_cpu() - cpu


def process_cpu(pid: int) -> float:
    """CPU seconds of a running process and its finished children, from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return sum(int(v) for v in fields[11:15]) / os.sysconf("SC_CLK_TCK")


class Mcp:
    def __init__(self, root: Path, env: dict[str, str]) -> None:
        self.proc = subprocess.Popen([str(BIN), "mcp"], cwd=root, env=env,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL)
        self.next_id = 0
        self.request("initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                    "clientInfo": {"name": "bench", "version": "0"}})
        assert self.proc.stdin is not None
        self.proc.stdin.write(b'{"jsonrpc": "2.0", "method": "notifications/initialized"}\n')
        self.proc.stdin.flush()

    def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.next_id += 1
        message = {"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params}
        self.proc.stdin.write(json.dumps(message).encode() + b"\n")
        self.proc.stdin.flush()
        while True:
            answer = json.loads(self.proc.stdout.readline() or b"null")
            if answer is None:
                raise RuntimeError("the MCP server ended")
            if answer.get("id") == self.next_id:
                return answer

    def search(self, query: str) -> list[str]:
        result = self.request("tools/call", {"name": "rerank_codebase", "arguments": {
            "query": query, "fast": True}})["result"]
        if result.get("isError"):
            raise RuntimeError(result["content"][0]["text"])
        return [f"{c['path']}:{c['start_line']}" for c in result["structuredContent"]["results"]]

    def idle(self) -> None:
        last = process_cpu(self.proc.pid)
        while True:
            time.sleep(1.0)
            now = process_cpu(self.proc.pid)
            if now - last < 0.02:
                return
            last = now

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(timeout=30)


def mcp_side(root: Path, runs: int, env: dict[str, str]) -> dict[str, Any]:
    server = Mcp(root, env)
    try:
        query = " ".join(WORDS)
        first = server.search(query)  # the after side's build starts now
        during = []
        for _ in range(10):
            started = time.perf_counter()
            server.search(query)
            during.append(time.perf_counter() - started)
        server.idle()  # the index built, in the after side's idle-work thread
        server.search(query)  # a build cut short at its 5 s goes on
        server.idle()
        calls, rgs, same = [], [], True
        for _ in range(runs):
            cpu, started = process_cpu(server.proc.pid), time.perf_counter()
            same = server.search(query) == first and same
            calls.append((time.perf_counter() - started, process_cpu(server.proc.pid) - cpu))
            rgs.append(one_rg(root))
    finally:
        server.close()
    return {"calls": calls, "rg": rgs, "same": same, "places": first, "during": during}


def api_side(root: Path, runs: int, env: dict[str, str]) -> dict[str, Any]:
    done = subprocess.run([sys.executable, "-c", API_SIDE, str(root), str(runs), RG, *WORDS],
                          env=env, capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def summary(figures: dict[str, Any]) -> dict[str, float]:
    calls, rgs = figures["calls"], figures["rg"]
    return {"wall": statistics.median(c[0] for c in calls) * 1000,
            "p95": sorted(c[0] for c in calls)[max(0, round(0.95 * len(calls)) - 1)] * 1000,
            "cpu": statistics.median(c[1] for c in calls) * 1000,
            "rg": statistics.median(r[0] for r in rgs) * 1000,
            "rg_cpu": statistics.median(r[1] for r in rgs) * 1000,
            "ratio": statistics.median(c[0] / r[0] for c, r in zip(calls, rgs, strict=True)),
            "cpu_ratio": statistics.median(c[1] / max(r[1], 1e-3)
                                           for c, r in zip(calls, rgs, strict=True))}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("root", type=Path)
    parser.add_argument("--before", type=Path, required=True)
    parser.add_argument("--after", type=Path, required=True)
    parser.add_argument("--pairs", type=int, default=4)
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args()
    root = args.root.resolve()
    print("| pair | door | side | load | p50 ms | p95 ms | CPU p50 ms | rg p50 ms | "
          "× rg wall (call by call) | × rg CPU | same places | during the build: p50 / max ms |")
    print("| ---: | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- | ---: |")
    ratios: dict[tuple[str, str], list[float]] = {}
    places: dict[str, list[str]] = {}
    with tempfile.TemporaryDirectory(prefix="idle-index-") as scratch:
        for pair in range(args.pairs):
            sides = [("before", args.before), ("after", args.after)]
            if pair % 2:
                sides.reverse()
            row: dict[tuple[str, str], dict[str, float]] = {}
            for door, run in (("MCP", mcp_side), ("API", api_side)):
                for side, checkout in sides:
                    checkout = checkout.resolve()
                    env = {key: value for key, value in os.environ.items()
                           if not key.startswith("SLM_RERANK_")}
                    env["PYTHONPATH"] = (f"{checkout}{os.pathsep}"
                                         f"{checkout / 'plugins' / 'slm-rerank-ripgrep'}")
                    env["SLM_RERANK_CACHE_DIR"] = f"{scratch}/{side}-cache"
                    env["SLM_RERANK_WARM_PROCESS"] = "0"
                    env.pop("PYTHONDONTWRITEBYTECODE", None)
                    load = os.getloadavg()[0]
                    figures = run(root, args.runs, env)
                    got = summary(figures)
                    row[(door, side)] = got
                    same = places.setdefault(door, figures["places"]) == figures["places"]
                    print(f"| {pair + 1} | {door} | {side} | {load:.2f} | {got['wall']:.1f} | "
                          f"{got['p95']:.1f} | {got['cpu']:.1f} | {got['rg']:.1f} | "
                          f"{got['ratio']:.2f} | {got['cpu_ratio']:.2f} | "
                          f"{'yes' if same and figures['same'] else 'NO'} | "
                          f"{statistics.median(figures['during']) * 1000:.0f} / "
                          f"{max(figures['during']) * 1000:.0f} |", flush=True)
            for door in ("MCP", "API"):
                for what in ("wall", "cpu"):
                    ratios.setdefault((door, what), []).append(
                        row[(door, "after")][what] / row[(door, "before")][what])
    print()
    print("| after/before | " + " | ".join(f"pair {n + 1}" for n in range(args.pairs))
          + " | median |")
    print("| --- |" + " ---: |" * (args.pairs + 1))
    for (door, what), values in ratios.items():
        print(f"| {door} {'p50 wall' if what == 'wall' else 'CPU p50'} | "
              + " | ".join(f"{v:.2f}" for v in values)
              + f" | **{statistics.median(values):.2f}** |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
