#!/usr/bin/env python3
"""Latency of the long-lived and per-prompt paths (issue 30): the prompt hook, a warm MCP
server, the Python API in a warm process; and one ripgrep process as the yardstick.

    python tests/bench/warm_latency.py ROOT [--runs 30] [--cache DIR] [--check]

ROOT is a git checkout (docs/benchmarks.md uses a sympy checkout, 1.7k files). Figures:

- hook: ``slm-rerank hook claude-prompt`` run as Claude Code runs it (a fresh process, the
  UserPromptSubmit JSON on stdin), wall p50/p95 over ``--runs`` runs after one warm-up run;
  the cold run (an empty cache folder: the repository's vocabulary and history are built)
  is timed apart.
- mcp: ``slm-rerank mcp`` started once, spoken to in JSON-RPC over stdio; ``tools/call``
  with ``fast=true`` timed from the request written to the answer read, after warm-ups.
- api: ``slm_rerank.search(query, ROOT, fast=True)`` in this process, after warm-ups; its
  CPU with its children's (rg, git), and how much of it was this process's own.
- rg: ``rg -i -c -e A -e B -e C .`` over the API query's three words, a fresh process a run.

``--check`` runs the same prompts and queries through hook, MCP and API twice and says
whether each answer (the places listed) is the same both times and across the three doors.
The cache folder is a temporary one (``--cache`` to keep one): runs never touch the user's.
PYTHONDONTWRITEBYTECODE is unset for the processes started, as on a user's machine: with it
every start compiles each module again.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[2]
BIN = REPO_ROOT / ".venv" / "bin" / "slm-rerank"
#: a code question the hook's classifier sends to the search (tests/bench/hook_prompts.jsonl)
PROMPT = ("simplifying trig expressions with half angles gives back something longer than "
          "what I started with")
#: three words: the API's query and the ripgrep yardstick's terms
WORDS = ("matrix", "determinant", "bareiss")
#: further queries for --check
QUERIES = ("where is the latex printer for matrices", "trigsimp half angle",
           "solve quadratic symbolic coefficients")


def percentile(values: list[float], share: float) -> float:
    """The nearest-rank percentile (``share`` in 0..1) of ``values``."""
    ordered = sorted(values)
    rank = max(1, min(len(ordered), round(share * len(ordered) + 0.5)))
    return ordered[rank - 1]


def hook_input(prompt: str, root: Path) -> bytes:
    return json.dumps({"session_id": "bench", "transcript_path": "/dev/null",
                       "cwd": str(root), "hook_event_name": "UserPromptSubmit",
                       "prompt": prompt}).encode()


def children_cpu() -> float:
    """CPU seconds of this process's finished children (and theirs)."""
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def own_cpu() -> float:
    """CPU seconds of this process and its finished children."""
    return time.process_time() + children_cpu()


def server_cpu(pid: int) -> float:
    """CPU seconds of a running process and its finished children, from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = sum(int(v) for v in fields[11:15])  # utime stime cutime cstime
    return ticks / os.sysconf("SC_CLK_TCK")


#: (wall seconds, CPU seconds) of each run
Runs = list[tuple[float, float]]


def run_hook(prompt: str, root: Path, env: dict[str, str]) -> tuple[tuple[float, float],
                                                                   list[str]]:
    """One hook process: its wall and CPU seconds and the places its context lists."""
    cpu = children_cpu()
    started = time.perf_counter()
    done = subprocess.run([str(BIN), "hook", "claude-prompt"], input=hook_input(prompt, root),
                          capture_output=True, env=env, cwd=root, check=False)
    took = (time.perf_counter() - started, children_cpu() - cpu)
    places: list[str] = []
    if done.stdout.strip():
        context = json.loads(done.stdout)["hookSpecificOutput"]["additionalContext"]
        places = [line[2:] for line in context.splitlines() if line.startswith("- ")]
    return took, places


class McpClient:
    """``slm-rerank mcp`` as a subprocess, spoken to in newline-delimited JSON-RPC."""

    def __init__(self, root: Path, env: dict[str, str]) -> None:
        self.proc = subprocess.Popen([str(BIN), "mcp"], cwd=root, env=env,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL)
        self.next_id = 0
        self.request("initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                    "clientInfo": {"name": "bench", "version": "0"}})
        self.notify("notifications/initialized")

    def notify(self, method: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps({"jsonrpc": "2.0", "method": method}).encode() + b"\n")
        self.proc.stdin.flush()

    def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.next_id += 1
        message = {"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params}
        self.proc.stdin.write(json.dumps(message).encode() + b"\n")
        self.proc.stdin.flush()
        while True:
            line = self.proc.stdout.readline()
            if not line:
                raise RuntimeError("the MCP server ended")
            answer = json.loads(line)
            if answer.get("id") == self.next_id:
                return answer

    def search(self, query: str, **arguments: Any) -> list[str]:
        answer = self.request("tools/call", {"name": "rerank_codebase", "arguments": {
            "query": query, "fast": True, **arguments}})
        result = answer["result"]
        if result.get("isError"):
            raise RuntimeError(result["content"][0]["text"])
        return [f"{c['path']}:{c['start_line']}"
                for c in result["structuredContent"]["results"]]

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(timeout=10)


def api_places(query: str, root: Path) -> list[str]:
    import slm_rerank

    report = slm_rerank.search(query, root, fast=True, top_k=5)
    return [f"{c.path}:{c.start_line}" for c in report.results]


RG = shutil.which("rg") or str(BIN.parent / "rg")


def run_rg(root: Path) -> tuple[float, float]:
    """One ``rg -i -c -e A -e B -e C .``: its wall and CPU seconds."""
    cpu = children_cpu()
    started = time.perf_counter()
    subprocess.run([RG, "-i", "-c", *[a for w in WORDS for a in ("-e", w)], "."], cwd=root,
                   stdout=subprocess.DEVNULL, check=False)
    return time.perf_counter() - started, children_cpu() - cpu


def median_ms(runs: Runs, which: int) -> float:
    return statistics.median(r[which] for r in runs) * 1000


def row(name: str, runs: Runs, note: str = "") -> str:
    ms = [wall * 1000 for wall, _ in runs]
    return (f"| {name} | {len(ms)} | {statistics.median(ms):.0f} | {percentile(ms, 0.95):.0f} "
            f"| {min(ms):.0f} | {median_ms(runs, 1):.0f} | {note} |")


def measure(root: Path, runs: int, env: dict[str, str]) -> list[str]:
    cache = Path(env["SLM_RERANK_CACHE_DIR"])
    shutil.rmtree(cache, ignore_errors=True)
    cold = run_hook(PROMPT, root, env)[0]
    hook = [run_hook(PROMPT, root, env)[0] for _ in range(runs + 1)][1:]

    # the API's calls and rg's processes alternate: the ratio is taken pair by pair
    query = " ".join(WORDS)
    for _ in range(3):
        api_places(query, root)
        run_rg(root)
    api: Runs = []
    rg: Runs = []
    python: list[float] = []  # the API's CPU in this process, without rg's and git's
    for _ in range(runs):
        cpu, started, mine = own_cpu(), time.perf_counter(), time.process_time()
        api_places(query, root)
        api.append((time.perf_counter() - started, own_cpu() - cpu))
        python.append(time.process_time() - mine)
        rg.append(run_rg(root))
    ratios = sorted(a[0] / r[0] for a, r in zip(api, rg, strict=True))
    cpu_ratio = median_ms(api, 1) / median_ms(rg, 1)

    client = McpClient(root, env)
    try:
        for _ in range(3):
            client.search(query)
        mcp: Runs = []
        for _ in range(runs):
            cpu, started = server_cpu(client.proc.pid), time.perf_counter()
            client.search(query)
            mcp.append((time.perf_counter() - started, server_cpu(client.proc.pid) - cpu))
    finally:
        client.close()
    return [
        "| path | runs | p50 ms | p95 ms | min ms | CPU p50 ms | note |",
        "| --- | ---: | ---: | ---: | ---: | ---: | --- |",
        row("hook (a process a prompt)", hook,
            f"cold (empty cache folder): {cold[0] * 1000:.0f} ms wall, "
            f"{cold[1] * 1000:.0f} ms CPU"),
        row("MCP tools/call, fast", mcp),
        row("API search(fast=True)", api,
            f"{statistics.median(ratios):.2f}x rg, wall, pair by pair; {cpu_ratio:.2f}x CPU; "
            f"{statistics.median(python) * 1000:.0f} ms of it in Python"),
        row("rg -i -c (3 terms)", rg, "a process a run, alternating with the API's calls"),
    ]


def check(root: Path, env: dict[str, str]) -> list[str]:
    """Each door's answer to each query, twice; whether they agree."""
    lines = []
    client = McpClient(root, env)
    try:
        for query in QUERIES:
            first = client.search(query)
            again = client.search(query)
            api = api_places(query, root)
            hook = [run_hook(query, root, env)[1] for _ in range(2)]
            lines.append(f"{query!r}: mcp stable {first == again}, api = mcp {api == first}, "
                         f"hook stable {hook[0] == hook[1]} ({len(hook[0])} places)")
            lines.append(f"    mcp/api: {first}")
            lines.append(f"    hook: {hook[0]}")
    finally:
        client.close()
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("root", type=Path)
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--cache", type=Path, default=None,
                        help="the cache folder (default: a temporary one)")
    parser.add_argument("--check", action="store_true",
                        help="print each door's answers instead of timing them")
    args = parser.parse_args()
    root = args.root.resolve()
    with tempfile.TemporaryDirectory(prefix="warm-latency-") as scratch:
        cache = args.cache or Path(scratch) / "cache"
        os.environ["SLM_RERANK_CACHE_DIR"] = str(cache)
        # as a user's Python runs: the modules' compiled bytecode written and reused
        os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
        # a process a prompt, as measured before the warm process (warm_process_latency.py
        # measures the hook through it)
        os.environ["SLM_RERANK_WARM_PROCESS"] = "0"
        os.chdir(root)
        env = dict(os.environ)
        lines = check(root, env) if args.check else measure(root, args.runs, env)
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
