#!/usr/bin/env python3
"""The warm process (issue 30): a ``--fast`` search and the prompt hook through it, against
the same commands each in its own process, one ripgrep process, and the same search
through the Python API in one long-lived (warm) process.

    python tests/bench/warm_process_latency.py ROOT [--runs 20]

ROOT is a git checkout (docs/benchmarks.md uses sympy). Each round runs, in turn, the
``--fast`` search through a running warm process, the same search in its own process
(``SLM_RERANK_WARM_PROCESS=0``), ``rg -i -c -e matrix -e determinant -e nan .`` and
``slm_rerank.search(..., fast=True)`` in one long-lived process (after three warm-ups); the
ratios to rg are taken round by round. Then the hook (``slm-rerank hook claude-prompt``,
the UserPromptSubmit JSON on stdin), warm and in its own process alternating. Cold: the
first search with no warm process (it answers in its own process and starts one) and how
long until the warm process answers. The warm rows are timed once the worker's word index
of ROOT (built after a search is answered, 5 s at a time) stops growing, after up to 12
more searches six seconds apart; the line under the table says what it held.

Wall and CPU per command are the command's own process (``os.wait4``); for the warm rows
the CPU the warm process spent is added (its own, its worker's and its forks', with
their children's, read from /proc over all the runs, divided by the runs). The cache,
config and socket folders are temporary ones; PYTHONDONTWRITEBYTECODE is unset, as on a
user's machine.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
BIN = REPO_ROOT / ".venv" / "bin" / "slm-rerank"
PYTHON = Path(sys.executable)
QUERY = "Matrix determinant raises Invalid NaN comparison"
RG_TERMS = ("matrix", "determinant", "nan")
PROMPT = ("simplifying trig expressions with half angles gives back something longer than "
          "what I started with")


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    rank = max(1, min(len(ordered), round(share * len(ordered) + 0.5)))
    return ordered[rank - 1]


#: one process: (wall s, CPU s, peak RSS MiB)
Took = tuple[float, float, float]


def timed(args: list[str], root: Path, env: dict[str, str], stdin: bytes | None = None) -> Took:
    started = time.perf_counter()
    proc = subprocess.Popen(args, cwd=root, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL,
                            stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL)
    if stdin is not None:
        assert proc.stdin is not None
        proc.stdin.write(stdin)
        proc.stdin.close()
    _, _, usage = os.wait4(proc.pid, 0)
    proc.returncode = 0
    return (time.perf_counter() - started, usage.ru_utime + usage.ru_stime,
            usage.ru_maxrss / 1024)


def warm_cpu(pid: int) -> float:
    """CPU seconds of the warm process, its finished forks, and its running children (its
    worker, and what the worker's finished children spent)."""
    def spent(one: int) -> float:
        try:
            fields = Path(f"/proc/{one}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            return 0.0
        return sum(int(v) for v in fields[11:15]) / os.sysconf("SC_CLK_TCK")

    children: list[int] = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        with contextlib.suppress(OSError):
            children += [int(c) for c in (task / "children").read_text().split()]
    return spent(pid) + sum(spent(child) for child in children)


def warm_pid(root: Path, env: dict[str, str]) -> int | None:
    done = subprocess.run([str(BIN), "warm", "status"], cwd=root, env=env,
                          capture_output=True, text=True, check=False)
    if ": pid " not in done.stdout:
        return None
    return int(done.stdout.split(": pid ")[1].split(",")[0])


#: a long-lived Python process that runs the search through the API each time it reads a
#: line, and writes its wall and CPU seconds (its own and its children's): the script's own
#: process stays small, so the children it times report their own peak memory
API_LOOP = """
import resource, sys, time
from slm_rerank import search
def cpu():
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime
for line in sys.stdin:
    started, spent = time.perf_counter(), cpu()
    search(sys.argv[1], sys.argv[2], fast=True, caller="bench")
    print(time.perf_counter() - started, cpu() - spent, flush=True)
"""


class ApiLoop:
    """The same search through the Python API in one warm process (the yardstick of what a
    command in a warm process could cost)."""

    def __init__(self, root: Path, env: dict[str, str]) -> None:
        self.proc = subprocess.Popen([str(PYTHON), "-c", API_LOOP, QUERY, str(root)],
                                     cwd=root, env=env, stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True)

    def call(self) -> Took:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write("go\n")
        self.proc.stdin.flush()
        wall, cpu = (float(v) for v in self.proc.stdout.readline().split())
        return wall, cpu, 0.0

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        self.proc.wait()


def index_built(search: list[str], root: Path, env: dict[str, str]) -> str:
    """Search until the worker's word index of ``root`` stops growing (it is built after a
    search is answered, 5 s at a time); what ``warm status`` then says of it."""
    said, before = "", None
    for _ in range(12):
        time.sleep(6)  # the idle work after the last search is done
        done = subprocess.run([str(BIN), "warm", "status"], cwd=root, env=env,
                              capture_output=True, text=True, check=False)
        said = next((line.split("word index: ", 1)[1] for line in done.stdout.splitlines()
                     if "word index: " in line), "")
        if said == before:  # no longer growing (or, twice, none at all)
            break
        before = said
        timed(search, root, env)
    return said


def hook_input(root: Path) -> bytes:
    return json.dumps({"session_id": "bench", "transcript_path": "/dev/null",
                       "cwd": str(root), "hook_event_name": "UserPromptSubmit",
                       "prompt": PROMPT}).encode()


def row(name: str, runs: list[Took], note: str = "", extra_cpu: float = 0.0) -> str:
    walls = [r[0] * 1000 for r in runs]
    cpu = statistics.median(r[1] for r in runs) * 1000 + extra_cpu * 1000
    peak = max(r[2] for r in runs)
    return (f"| {name} | {len(runs)} | {statistics.median(walls):.0f} | "
            f"{percentile(walls, 0.95):.0f} | {min(walls):.0f} | {cpu:.0f} | {peak:.1f} | "
            f"{note} |")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("root", type=Path)
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--venv", type=Path, default=REPO_ROOT / ".venv",
                        help="the environment whose slm-rerank and python run (default the "
                             "checkout's .venv; an editable install's import hooks cost "
                             "each process start about 30 ms a user's install does not pay)")
    args = parser.parse_args()
    global BIN, PYTHON
    BIN, PYTHON = args.venv / "bin" / "slm-rerank", args.venv / "bin" / "python"
    root = args.root.resolve()
    rg = shutil.which("rg") or str(BIN.parent / "rg")  # the one the search runs
    scratch = Path(tempfile.mkdtemp(prefix="wpb-", dir="/tmp"))
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env.update({"XDG_RUNTIME_DIR": str(scratch / "run"), "XDG_CONFIG_HOME": str(scratch / "cfg"),
                "XDG_CACHE_HOME": str(scratch / "cache"),
                "SLM_RERANK_CACHE_DIR": str(scratch / "cache" / "slm-rerank"),
                "SLM_RERANK_WARM_PROCESS": "1", "SLM_RERANK_WARM_IDLE": "900"})
    (scratch / "run").mkdir(mode=0o700)
    alone = {**env, "SLM_RERANK_WARM_PROCESS": "0"}
    search = [str(BIN), "-q", QUERY, "--fast"]
    hook = [str(BIN), "hook", "claude-prompt"]
    rg_args = [rg, "-i", "-c", *[a for t in RG_TERMS for a in ("-e", t)], "."]
    lines: list[str] = []
    try:
        # the caches (chunks, vocabulary, history) warm, in process, before any timing
        for _ in range(2):
            timed(search, root, alone)
            timed(hook, root, alone, hook_input(root))
        cold = timed(search, root, env)  # no warm process yet: answers here, starts one
        began = time.perf_counter()
        pid = None
        while pid is None and time.perf_counter() - began < 60:
            pid = warm_pid(root, env)
            time.sleep(0.05)
        ready = time.perf_counter() - began + cold[0]
        assert pid is not None, "the warm process did not start"
        for _ in range(3):
            timed(search, root, env)
            timed(rg_args, root, env)
        indexed = index_built(search, root, env)
        api_loop = ApiLoop(root, alone)
        for _ in range(3):
            api_loop.call()
        cpu0 = warm_cpu(pid)
        warm: list[Took] = []
        inproc: list[Took] = []
        rgs: list[Took] = []
        api: list[Took] = []
        for _ in range(args.runs):
            warm.append(timed(search, root, env))
            inproc.append(timed(search, root, alone))
            rgs.append(timed(rg_args, root, env))
            api.append(api_loop.call())
        search_warm_cpu = (warm_cpu(pid) - cpu0) / args.runs  # includes the rounds' status
        api_loop.close()
        cpu0 = warm_cpu(pid)
        hook_warm: list[Took] = []
        hook_alone: list[Took] = []
        for _ in range(args.runs):
            hook_warm.append(timed(hook, root, env, hook_input(root)))
            hook_alone.append(timed(hook, root, alone, hook_input(root)))
        hook_warm_cpu = (warm_cpu(pid) - cpu0) / args.runs
        def rss_mib(one: int) -> float:
            status = Path(f"/proc/{one}/status").read_text()
            return int(status.split("VmRSS:")[1].split()[0]) / 1024

        warm_rss = f"{rss_mib(pid):.1f} MiB"
        for task in Path(f"/proc/{pid}/task").iterdir():  # its worker, where there is one
            for child in (task / "children").read_text().split():
                with contextlib.suppress(OSError, IndexError):
                    warm_rss += f", its worker {rss_mib(int(child)):.1f} MiB"
        ratio_warm = statistics.median(w[0] / r[0] for w, r in zip(warm, rgs, strict=True))
        ratio_alone = statistics.median(a[0] / r[0] for a, r in zip(inproc, rgs, strict=True))
        cpu_warm = (statistics.median(w[1] for w in warm) + search_warm_cpu)
        cpu_rg = statistics.median(r[1] for r in rgs)
        lines += [
            f"root {root}, {args.runs} runs each, load average {os.getloadavg()[0]:.1f}",
            "",
            "| command | runs | p50 ms | p95 ms | min ms | CPU ms | peak MiB | note |",
            "| --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |",
            row("`--fast` search, warm process", warm,
                f"{ratio_warm:.2f}x rg wall, round by round; {cpu_warm / cpu_rg:.2f}x rg CPU "
                f"(the command {statistics.median(w[1] for w in warm) * 1000:.0f} ms + the "
                f"warm process {search_warm_cpu * 1000:.0f} ms)", search_warm_cpu),
            row("`--fast` search, own process", inproc,
                f"{ratio_alone:.2f}x rg wall, round by round; "
                f"{statistics.median(a[1] for a in inproc) / cpu_rg:.2f}x rg CPU"),
            row("`rg -i -c` (3 terms)", rgs),
            row("API `search(fast=True)`, warm, one process", api,
                f"{statistics.median(a[0] / r[0] for a, r in zip(api, rgs, strict=True)):.2f}x "
                f"rg wall, round by round; "
                f"{statistics.median(a[1] for a in api) / cpu_rg:.2f}x rg CPU"),
            row("hook, warm process", hook_warm,
                f"the command {statistics.median(h[1] for h in hook_warm) * 1000:.0f} ms CPU "
                f"+ the warm process {hook_warm_cpu * 1000:.0f} ms", hook_warm_cpu),
            row("hook, own process", hook_alone),
            "",
            f"cold: the first search with no warm process {cold[0] * 1000:.0f} ms wall "
            f"({cold[1] * 1000:.0f} ms CPU; it answers in its own process and starts one); "
            f"the warm process answered {ready:.2f} s after that search began; "
            f"its resident memory after the runs {warm_rss}",
            f"timed once its worker's word index stopped growing: "
            f"{indexed or 'none (an install without it, or a tree it does not index)'}",
        ]
    finally:
        subprocess.run([str(BIN), "warm", "stop", "--all"], cwd=root, env=env,
                       capture_output=True, check=False)
        shutil.rmtree(scratch, ignore_errors=True)
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
