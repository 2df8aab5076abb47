#!/usr/bin/env python3
"""The warm process's worker over many different ``--fast`` queries, two installs side by
side: how its peak resident size grows, and what each call takes (issue 30).

    python tests/bench/worker_memory.py ROOT --before VENV --after VENV
                                        [--queries tests/bench/worker_memory_queries.txt]
                                        [--passes 2] [--settle 3]

``fast_paired.py`` repeats one query, so its worker keeps that query's files and nothing
more; an agent asks one thing after another. Here each side (its own temporary cache,
config and socket folders, as ``fast_paired.py`` sets them) answers the first query twice,
then ``--settle`` times more 3 s apart (the worker builds its word index after a command, 5 s
at a time), and says its resident memory; then every query of the file, ``--passes`` times
over, the two sides taking turns call by call. Printed after every five queries: each
side's worker's peak resident size (``VmHWM``) and the median wall time of its calls so
far; at the end, whether both sides printed the same answers. The default queries are
about sympy (``worker_memory_queries.txt``).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fast_paired import peak_mib, side_env, wall  # noqa: E402


class CliSide:
    """A side that is only its CLI (no MCP server, no API process)."""

    def __init__(self, name: str, venv: Path, root: Path, scratch: Path) -> None:
        self.name, self.root = name, root
        self.bin = str(venv / "bin" / "slm-rerank")
        self.env = side_env(scratch / name)

    def ask(self, query: str) -> tuple[float, bytes]:
        return wall([self.bin, "-q", query, "--fast"], self.root, self.env)

    def worker_pid(self) -> int | None:
        _, out = wall([self.bin, "warm", "status"], self.root, self.env)
        for line in out.decode(errors="replace").splitlines():
            if "its worker pid" in line:
                return int(line.split("its worker pid", 1)[1].split()[0])
        return None


def resident(pid: int | None) -> str:
    """A running process's resident size, its own (anonymous) memory and what it maps of
    files, in MiB (``/proc/PID/status``)."""
    found = {}
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                name, _, value = line.partition(":")
                if name in ("VmRSS", "RssAnon", "RssFile"):
                    found[name] = f"{int(value.split()[0]) / 1024:.1f}"
    except (OSError, ValueError):
        return "?"
    return (f"resident {found.get('VmRSS', '?')} MiB (own {found.get('RssAnon', '?')}, "
            f"files {found.get('RssFile', '?')})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("root", type=Path)
    parser.add_argument("--before", type=Path, required=True)
    parser.add_argument("--after", type=Path, required=True)
    parser.add_argument("--queries", type=Path,
                        default=Path(__file__).with_name("worker_memory_queries.txt"))
    parser.add_argument("--passes", type=int, default=2)
    parser.add_argument("--settle", type=int, default=3,
                        help="the first query asked again this many times, 3 s apart, "
                             "before the others: the worker's index is built meanwhile")
    args = parser.parse_args()
    queries = [q.strip() for q in args.queries.read_text().splitlines() if q.strip()]
    with tempfile.TemporaryDirectory(prefix="worker-memory-") as scratch:
        sides = [CliSide("before", args.before, args.root, Path(scratch)),
                 CliSide("after", args.after, args.root, Path(scratch))]
        try:
            for side in sides:
                side.ask(queries[0])
                side.ask(queries[0])
            for _ in range(args.settle):  # the worker builds its index after a command,
                time.sleep(3)  # 5 s at most at a time: each ask lets it go on
                for side in sides:
                    side.ask(queries[0])
            print("once built: " + "; ".join(f"{s.name} {resident(s.worker_pid())}"
                                             for s in sides) + "\n")
            times: dict[str, list[float]] = {s.name: [] for s in sides}
            answers: dict[str, list[bytes]] = {s.name: [] for s in sides}
            print("| queries | before: worker peak MiB | after: worker peak MiB "
                  "| before: call p50 ms | after: call p50 ms |")
            print("| ---: | ---: | ---: | ---: | ---: |")
            done = 0
            for _ in range(args.passes):
                for query in queries:
                    for side in sides if done % 2 == 0 else sides[::-1]:
                        took, out = side.ask(query)
                        times[side.name].append(took)
                        answers[side.name].append(out)
                    done += 1
                    if done % 5 == 0:
                        peaks = [peak_mib(s.worker_pid()) for s in sides]
                        p50 = [f"{statistics.median(times[s.name]) * 1000:.1f}" for s in sides]
                        print(f"| {done} | {peaks[0]} | {peaks[1]} | {p50[0]} | {p50[1]} |",
                              flush=True)
            same = answers["before"] == answers["after"]
            print(f"\nsame answers both sides: {'yes' if same else 'no'}")
            print("at the end: " + "; ".join(f"{s.name} {resident(s.worker_pid())}"
                                            for s in sides))
        finally:
            for side in sides:
                wall([side.bin, "warm", "stop", "--all"], side.root, side.env)


if __name__ == "__main__":
    main()
