#!/usr/bin/env python3
"""What a warm ``--fast`` search costs, part by part (issue 30).

    python tests/bench/warm_call_parts.py ROOT [--runs 20] [--query TEXT]

ROOT is a git checkout (docs/benchmarks.md uses sympy). Four measurements:

1. the command's own process before it can ask: the interpreter alone (``-c pass``) and
   the interpreter importing the warm process's command side, alternating, each its own
   process (wall and CPU from ``os.wait4``); the difference is what the import costs;
2. connecting to a running warm process (started as a user's first command starts it, in
   temporary folders) and a status request answered, in this process;
3. the worker's command, in a process set up as the worker is (everything imported, the
   plugins kept, ``gc.freeze()``): the request taken, run and put back exactly as the
   worker does (``isolation.prepare``, ``run``, ``finish``, a collection, ``settle``),
   after three warm-ups, with a timer around each stage where the command looks it up:
   the host and settings, the matching pass (ripgrep, ``pipeline.gather``), chunk
   scoring (``rank_chunks``), the learned order (``put_in_order``), evidence (``cite``
   and ``explain_order``), output (``emit``), and what is left (click, the formatter,
   the worker put back), and how long the cyclic collector ran in it; then the
   collection and checks after the answer (``--gc-as-before``: the collector as the
   worker had it before, on during the command with nothing frozen); the idle work the
   worker does once a command was answered (the ripgrep source's word index) runs after
   each, untimed (``--without-index``: none, so ripgrep's matching pass runs every time);
4. the whole warm call as a user runs it, for scale, once the worker's idle work (the word
   index) has had ``--settle`` seconds after each of three searches.

Wall times (the matching pass waits for ripgrep's processes); medians of the runs.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
QUERY = "Matrix determinant raises Invalid NaN comparison"

#: (part, module path suffix, function name): cumulative time under the profile
def waited(args: list[str], env: dict[str, str], cwd: Path) -> tuple[float, float]:
    """Wall and CPU seconds of one process."""
    began = time.perf_counter()
    proc = subprocess.Popen(args, env=env, cwd=cwd, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
    _, _, usage = os.wait4(proc.pid, 0)
    return time.perf_counter() - began, usage.ru_utime + usage.ru_stime


def ms(values: list[float]) -> str:
    return f"{statistics.median(values) * 1000:.1f}"


def _as_the_command_runs() -> None:
    """Run again under the interpreter the installed ``slm-rerank`` script names, when it is
    not this one (a venv's ``python`` beside its ``python3``): the warm process is keyed by
    the interpreter's path, so the parts timed in this process would ask another one."""
    cli = shutil.which("slm-rerank", path=str(Path(sys.executable).parent))
    if cli is None:
        return
    with open(cli, "rb") as script:
        first = script.readline()
    named = first[2:].strip().decode() if first.startswith(b"#!") else ""
    if named and os.path.isabs(named) and named != sys.executable:
        os.execv(named, [named, os.path.abspath(__file__), *sys.argv[1:]])


def client_start(runs: int, env: dict[str, str], root: Path) -> list[str]:
    bare = [sys.executable, "-c", "pass"]
    side = [sys.executable, "-c", "import slm_rerank.warm_process.client"]
    pairs = [(waited(bare, env, root), waited(side, env, root)) for _ in range(runs)]
    import_wall = [s[0] - b[0] for b, s in pairs]
    import_cpu = [s[1] - b[1] for b, s in pairs]
    return [
        "| part | wall ms (p50) | CPU ms (p50) |", "| --- | ---: | ---: |",
        f"| interpreter start (`python -c pass`) | {ms([b[0] for b, _ in pairs])} | "
        f"{ms([b[1] for b, _ in pairs])} |",
        f"| interpreter + the command side's imports | {ms([s[0] for _, s in pairs])} | "
        f"{ms([s[1] for _, s in pairs])} |",
        f"| the imports alone (pair by pair) | {ms(import_wall)} | {ms(import_cpu)} |",
    ]


def connect_parts(runs: int, root: Path, env: dict[str, str]) -> list[str]:
    from slm_rerank.warm_process import client, wire

    path = client.socket_path(env)
    connect: list[float] = []
    status: list[float] = []
    for _ in range(runs):
        began = time.perf_counter()
        sock = client.connect(path, time.monotonic() + 5)
        connect.append(time.perf_counter() - began)
        with sock:
            by = time.monotonic() + 5
            wire.send_json(sock, {"format": wire.FORMAT, "kind": "status"}, by)
            wire.send_frame(sock, b"", by)
            wire.receive_json(sock, by)
        status.append(time.perf_counter() - began)
    return [f"| connect (checks and `connect()`) | {ms(connect)} | |",
            f"| connect + a status request answered | {ms(status)} | |"]


WORKER = r"""
import gc, json, os, sys, time
from slm_rerank import api, cli, pipeline
from slm_rerank.cli import search as cli_search, terminal
from slm_rerank.host import Host, keep_plugins
from slm_rerank.lexical import ordering, why
from slm_rerank.warm_process import client, command_fork, isolation

keep_plugins()
root, query, runs, out = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
as_before = sys.argv[5] == "1"
from slm_rerank import idle_work
if sys.argv[6] == "1":  # as the worker does: the word index built after a search
    idle_work.accept()
if not as_before:
    gc.collect()
    gc.freeze()
collecting = [0.0, 0.0]  # when the collector started; how long it ran

def watch(phase, info):
    if phase == "start":
        collecting[0] = time.perf_counter()
    else:
        collecting[1] += time.perf_counter() - collecting[0]

gc.callbacks.append(watch)
os.chdir(root)
args = ["-q", query, "--fast"]
spent = {}

def timer(label, fn):
    def timed(*a, **k):
        began = time.perf_counter()
        try:
            return fn(*a, **k)
        finally:
            spent[label] = spent.get(label, 0.0) + time.perf_counter() - began
    return timed

# the stages, timed where the command looks them up (patched before any snapshot: the
# worker's put-back keeps them)
pipeline.gather = timer("gather", pipeline.gather)
pipeline.rank_chunks = timer("rank_chunks", pipeline.rank_chunks)
ordering.read_ahead = timer("read_ahead", ordering.read_ahead)
ordering.put_in_order = timer("put_in_order", ordering.put_in_order)
pipeline.cite = timer("cite", pipeline.cite)
why.explain_order = timer("explain_order", why.explain_order)
api.run_search = timer("run_search", api.run_search)
cli_search.emit = timer("emit", cli_search.emit)
Host.from_environment = classmethod(timer("host", Host.from_environment.__func__))

def one():
    request = client.Request("search", list(args), False, started=time.monotonic())
    head = client._header(request)
    out_fd, err_fd = command_fork.memory_file("stdout"), command_fork.memory_file("stderr")
    began = time.perf_counter()
    collecting[1] = 0.0
    snapshot = isolation.prepare(head)
    if not as_before:
        gc.disable()
    ran = None
    try:
        ran = isolation.run(head, b"", out_fd, err_fd)
    finally:
        isolation.finish(snapshot, ran)
    answered = time.perf_counter()
    during = collecting[1]
    if not as_before:  # as the worker does now
        gc.enable()
        gc.collect(1)
    isolation.settle(snapshot, ran)
    done = time.perf_counter()
    idle_work.run_pending(time.monotonic() + idle_work.IDLE_SECONDS)  # the caller has gone
    os.close(out_fd)
    os.close(err_fd)
    return answered - began, done - answered, during

for _ in range(3):
    one()
spent.clear()
rows = []
for _ in range(runs):
    spent.clear()
    command, after, during = one()
    rows.append({"command": command, "after": after, "collector": during, **spent})
with open(out, "w") as f:
    json.dump(rows, f)
"""

#: (label, timer): the stages of the worker's command
STAGES = (
    ("host and settings (`Host.from_environment`)", "host"),
    ("matching pass: ripgrep, its listing and counts (`pipeline.gather`)", "gather"),
    ("history look-up started beside it (`ordering.read_ahead`)", "read_ahead"),
    ("chunk scoring (`rank_chunks`)", "rank_chunks"),
    ("learned order (`put_in_order`)", "put_in_order"),
    ("evidence: citations (`cite`)", "cite"),
    ("evidence: why each file (`explain_order`)", "explain_order"),
    ("output written (`emit`)", "emit"),
)


def worker_parts(runs: int, root: Path, env: dict[str, str], scratch: Path,
                 query: str, gc_as_before: bool = False, index: bool = True) -> list[str]:
    import json

    out = scratch / "parts.json"
    subprocess.run([sys.executable, "-c", WORKER, str(root), query, str(runs), str(out),
                    "1" if gc_as_before else "0", "1" if index else "0"],
                   env=env, cwd=root, check=True, stdout=subprocess.DEVNULL)
    rows = json.loads(out.read_text())

    def p50(key: str) -> float:
        return statistics.median(r.get(key, 0.0) for r in rows)

    command = p50("command")
    lines = ["| part | ms p50 | share of the command (p50s) |", "| --- | ---: | ---: |"]
    for label, key in STAGES:
        lines.append(f"| {label} | {p50(key) * 1000:.1f} | {p50(key) / command:.0%} |")
    search = p50("run_search")
    lines.append(f"| the search as a whole (`run_search`) | {search * 1000:.1f} | "
                 f"{search / command:.0%} |")
    rest = statistics.median(r["command"] - r.get("run_search", 0.0) - r.get("host", 0.0)
                             - r.get("emit", 0.0) for r in rows)
    lines.append(f"| the rest: click, the formatter, putting the worker back | "
                 f"{rest * 1000:.1f} | {rest / command:.0%} |")
    lines.append(f"| **the command** (request taken to answer ready) | {command * 1000:.1f} "
                 "| 100% |")
    lines.append(f"| of the command: the cyclic collector | {p50('collector') * 1000:.1f} | "
                 f"{p50('collector') / command:.0%} |")
    lines.append(f"| after it answered: the young generations collected (not with "
                 f"--gc-as-before), the checks | {p50('after') * 1000:.1f} | (the caller has "
                 "its answer) |")
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("root", type=Path)
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--query", default=QUERY)
    parser.add_argument("--gc-as-before", action="store_true",
                        help="part 3 with the collector as the worker had it before "
                             "(on during the command, nothing frozen)")
    parser.add_argument("--without-index", action="store_true",
                        help="part 3 without the word index the worker builds (ripgrep's "
                             "matching pass on every search, as before)")
    parser.add_argument("--settle", type=float, default=8.0,
                        help="seconds after each of three searches before part 4 is timed, "
                             "for the worker's idle work (the word index) to end")
    args = parser.parse_args()
    _as_the_command_runs()
    root = args.root.resolve()
    scratch = Path(tempfile.mkdtemp(prefix="wcp-", dir="/tmp"))
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env.update({"XDG_RUNTIME_DIR": str(scratch / "run"),
                "XDG_CONFIG_HOME": str(scratch / "cfg"),
                "XDG_CACHE_HOME": str(scratch / "cache"),
                "SLM_RERANK_CACHE_DIR": str(scratch / "cache" / "slm-rerank"),
                "SLM_RERANK_WARM_PROCESS": "1", "SLM_RERANK_WARM_IDLE": "600"})
    (scratch / "run").mkdir(mode=0o700)
    cli = shutil.which("slm-rerank", path=str(Path(sys.executable).parent)) or "slm-rerank"
    search = [cli, "-q", args.query, "--fast"]
    lines = [f"root {root}, {args.runs} runs each, load average "
             f"{os.getloadavg()[0]:.1f} (start)", ""]
    try:
        for _ in range(2):  # the caches (chunks, history) warm, and a warm process started
            waited(search, env, root)
        for _ in range(100):
            status = subprocess.run([cli, "warm", "status"], env=env, cwd=root,
                                    capture_output=True, text=True, check=False).stdout
            if "connections so far" in status:
                break
            time.sleep(0.1)
        lines += ["command side, before it can ask:", ""]
        lines += client_start(args.runs, env, root)
        saved = dict(os.environ)
        os.environ.update(env)
        try:
            lines += connect_parts(args.runs, root, env)
        finally:
            os.environ.clear()
            os.environ.update(saved)
        # the worker builds the word index in the idle time after a search: calls made before
        # it is built answer through rg, so a few searches with pauses come first
        for _ in range(3):
            waited(search, env, root)
            time.sleep(args.settle)
        warm = [waited(search, env, root) for _ in range(args.runs)]
        lines += [f"| the whole warm call (`slm-rerank -q ... --fast`) | {ms([w[0] for w in warm])}"
                  f" | {ms([w[1] for w in warm])} (the command's process) |", ""]
        lines += ["the worker's command, part by part (timers around each stage):", ""]
        lines += worker_parts(args.runs, root, env, scratch, args.query, args.gc_as_before,
                              not args.without_index)
        lines += ["", f"load average {os.getloadavg()[0]:.1f} (end)"]
    finally:
        subprocess.run([cli, "warm", "stop", "--all"], env=env, cwd=root,
                       capture_output=True, check=False)
        shutil.rmtree(scratch, ignore_errors=True)
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
