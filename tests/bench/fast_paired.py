#!/usr/bin/env python3
"""A warm ``--fast`` search through each door, two installs side by side, each call paired
with one ripgrep process over the same terms (issue 30).

    python tests/bench/fast_paired.py ROOT --before VENV --after VENV [--rounds 20]
                                      [--query TEXT]

VENV is a virtual environment with slm-rerank installed the way a user installs it (not
editable: an editable install's import hooks cost each process start tens of ms). For each
side, in temporary cache, config and socket folders: an MCP server (``slm-rerank mcp``,
JSON-RPC over stdio, the call timed from the request written to the answer read), a Python
process calling ``slm_rerank.search(QUERY, ROOT, fast=True)`` (timed around the call, in
that process), and the CLI (``slm-rerank -q QUERY --fast`` through its warm process, the
process's wall time from ``os.wait4``). Each gets warm-up calls and then quiet time, so the
caches and the word index its process builds between calls are in place before any timing.
Then ``--rounds`` rounds; in each, for each door, both sides (taking turns to go first), each
call followed by ``rg -i -c -e TERM ... .`` (the query's words, lower case, the rg of the
after side's install). Printed: per door and side the p50 wall of the call and of rg, the
median of the call/rg ratios taken call by call, and the median of the after/before ratios
taken round by round; whether both sides gave the same answers; the peak resident size of
each process (the CLI's own, from ``os.wait4``; the warm process, its worker, the MCP server
and the API process, ``VmHWM`` at the end); the load average.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

QUERY = "solve polynomial roots"

#: a long-lived process calling the API: one query a line on stdin, one JSON line out
API_SIDE = r"""
import json, sys, time
import slm_rerank
root = sys.argv[1]
for line in sys.stdin:
    began = time.perf_counter()
    found = slm_rerank.search(line.strip(), root, fast=True)
    took = time.perf_counter() - began
    print(json.dumps({"s": took, "places": [[c.path, c.start_line, round(c.score, 6)]
                                            for c in found.results]}), flush=True)
"""


#: the peak resident size (KiB) of each process run by ``wall``, by its program
PEAKS: dict[str, list[int]] = {}


def wall(args: list[str], root: Path, env: dict[str, str]) -> tuple[float, bytes]:
    began = time.perf_counter()
    proc = subprocess.Popen(args, cwd=root, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
    assert proc.stdout is not None
    out = proc.stdout.read()
    _, _, usage = os.wait4(proc.pid, 0)
    PEAKS.setdefault(args[0], []).append(usage.ru_maxrss)
    return time.perf_counter() - began, out


def peak_mib(pid: int | None) -> str:
    """A running process's peak resident size (VmHWM), in MiB."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return f"{int(line.split()[1]) / 1024:.1f}"
    except (OSError, ValueError):
        pass
    return "?"


def side_env(home: Path) -> dict[str, str]:
    """A side's environment: this one's, less slm-rerank's own settings, with its cache,
    config and socket folders under ``home`` (made here) and its warm process on."""
    (home / "run").mkdir(parents=True, mode=0o700)
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("SLM_RERANK_") and k not in ("PYTHONPATH",
                                                             "PYTHONDONTWRITEBYTECODE")}
    env.update({"XDG_RUNTIME_DIR": str(home / "run"), "XDG_CONFIG_HOME": str(home / "cfg"),
                "XDG_CACHE_HOME": str(home / "cache"),
                "SLM_RERANK_CACHE_DIR": str(home / "cache" / "slm-rerank"),
                "SLM_RERANK_WARM_PROCESS": "1", "SLM_RERANK_WARM_IDLE": "1800"})
    return env


class Side:
    def __init__(self, name: str, venv: Path, root: Path, scratch: Path, query: str) -> None:
        self.name, self.root, self.query = name, root, query
        self.bin = str(venv / "bin" / "slm-rerank")
        self.env = side_env(scratch / name)
        self.mcp = subprocess.Popen([self.bin, "mcp"], cwd=root, env=self.env,
                                    stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                    stderr=subprocess.DEVNULL)
        self.next_id = 0
        self.request("initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                    "clientInfo": {"name": "bench", "version": "0"}})
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        self.api = subprocess.Popen([str(venv / "bin" / "python"), "-c", API_SIDE, str(root)],
                                    cwd=root, env=self.env, stdin=subprocess.PIPE,
                                    stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)

    def send(self, message: dict[str, Any]) -> None:
        assert self.mcp.stdin is not None
        self.mcp.stdin.write(json.dumps(message).encode() + b"\n")
        self.mcp.stdin.flush()

    def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        assert self.mcp.stdout is not None
        self.next_id += 1
        self.send({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params})
        while True:
            answer = json.loads(self.mcp.stdout.readline() or b"null")
            if answer is None:
                raise RuntimeError(f"{self.name}: the MCP server ended")
            if answer.get("id") == self.next_id:
                return answer

    def call(self, door: str) -> tuple[float, Any]:
        if door == "MCP":
            began = time.perf_counter()
            result = self.request("tools/call", {"name": "rerank_codebase", "arguments": {
                "query": self.query, "fast": True}})["result"]
            took = time.perf_counter() - began
            if result.get("isError"):
                raise RuntimeError(result["content"][0]["text"])
            return took, [[c["path"], c["start_line"], round(c["score"], 6)]
                          for c in result["structuredContent"]["results"]]
        if door == "API":
            assert self.api.stdin is not None and self.api.stdout is not None
            self.api.stdin.write(self.query.encode() + b"\n")
            self.api.stdin.flush()
            answer = json.loads(self.api.stdout.readline() or b"null")
            if answer is None:
                raise RuntimeError(f"{self.name}: the API process ended")
            return answer["s"], answer["places"]
        took, out = wall([self.bin, "-q", self.query, "--fast"], self.root, self.env)
        return took, out

    def memory(self) -> list[str]:
        """Peak resident MiB: the command's process, the warm process and its worker, the
        MCP server, the process calling the API."""
        found = re.search(r": pid (\d+),.*?worker pid (\d+)", self.status())
        server, worker = (int(found[1]), int(found[2])) if found else (None, None)
        command = max(PEAKS.get(self.bin, [0])) / 1024
        return [f"{command:.1f}", peak_mib(server), peak_mib(worker), peak_mib(self.mcp.pid),
                peak_mib(self.api.pid)]

    def status(self) -> str:
        return subprocess.run([self.bin, "warm", "status"], cwd=self.root, env=self.env,
                              capture_output=True, text=True, check=False).stdout

    def close(self) -> None:
        for proc in (self.mcp, self.api):
            if proc.stdin is not None:
                proc.stdin.close()
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
        subprocess.run([self.bin, "warm", "stop", "--all"], cwd=self.root, env=self.env,
                       capture_output=True, check=False)


DOORS = ("MCP", "API", "CLI")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("root", type=Path)
    parser.add_argument("--before", type=Path, required=True)
    parser.add_argument("--after", type=Path, required=True)
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--query", default=QUERY)
    parser.add_argument("--settle", type=float, default=8.0,
                        help="quiet seconds after each of the three warm-up rounds (a large "
                             "tree's word index takes longer to build)")
    args = parser.parse_args()
    root = args.root.resolve()
    words = [w.lower() for w in re.findall(r"\w+", args.query)]
    rg = str(args.after / "bin" / "rg") if (args.after / "bin" / "rg").exists() \
        else shutil.which("rg") or "rg"
    rg_args = [rg, "-i", "-c", *[a for w in words for a in ("-e", w)], "."]
    load_start = os.getloadavg()
    print(f"root {root}, query {args.query!r}, {args.rounds} rounds; load average "
          f"{load_start[0]:.2f} {load_start[1]:.2f} {load_start[2]:.2f} (start)")
    with tempfile.TemporaryDirectory(prefix="fast-paired-") as scratch:
        sides = [Side("before", args.before, root, Path(scratch), args.query),
                 Side("after", args.after, root, Path(scratch), args.query)]
        try:
            # warm-up: each door's caches, and the word index each process builds when idle
            # (5 s at a time), so quiet time after the calls
            for _ in range(3):
                for side in sides:
                    for door in DOORS:
                        side.call(door)
                time.sleep(args.settle)
            for side in sides:
                print(f"{side.name}: {side.status().strip()}")
            PEAKS.clear()  # the timed calls' only (a warm-up's first CLI call ran in its own)
            calls: dict[tuple[str, str], list[float]] = {}
            rgs: dict[tuple[str, str], list[float]] = {}
            answers: dict[tuple[str, str], Any] = {}
            same = {door: True for door in DOORS}
            for round_ in range(args.rounds):
                order = sides if round_ % 2 == 0 else sides[::-1]
                for door in DOORS:
                    for side in order:
                        took, answer = side.call(door)
                        rg_took, _ = wall(rg_args, root, side.env)
                        calls.setdefault((door, side.name), []).append(took)
                        rgs.setdefault((door, side.name), []).append(rg_took)
                        first = answers.setdefault((door, "any"), answer)
                        same[door] = same[door] and answer == first
            memory = {side.name: side.memory() for side in sides}
        finally:
            for side in sides:
                side.close()
    load_end = os.getloadavg()
    print()
    print("| door | side | call p50 ms | rg p50 ms | × one rg (median, call by call) |")
    print("| --- | --- | ---: | ---: | ---: |")
    for door in DOORS:
        for name in ("before", "after"):
            c, r = calls[(door, name)], rgs[(door, name)]
            ratio = statistics.median(a / b for a, b in zip(c, r, strict=True))
            print(f"| {door} | {name} | {statistics.median(c) * 1000:.1f} | "
                  f"{statistics.median(r) * 1000:.1f} | {ratio:.2f} |")
    print()
    print("| door | after/before (median, round by round) | same answers both sides |")
    print("| --- | ---: | --- |")
    for door in DOORS:
        pairs = zip(calls[(door, "after")], calls[(door, "before")], strict=True)
        print(f"| {door} | {statistics.median(a / b for a, b in pairs):.2f} | "
              f"{'yes' if same[door] else 'NO'} |")
    print()
    print("| side | peak MiB: the CLI's process | its warm process | its worker | "
          "MCP server | API process |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    for name, row in memory.items():
        print(f"| {name} | {' | '.join(row)} |")
    print(f"rg's peak: {max(PEAKS.get(rg, [0])) / 1024:.1f} MiB")
    print(f"\nload average {load_end[0]:.2f} {load_end[1]:.2f} {load_end[2]:.2f} (end)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
