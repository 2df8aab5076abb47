"""The usage log: one JSON line per query in ``usage.jsonl``, and its summary."""

from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass, field
from pathlib import Path

from slm_rerank.report import Report

LOG_NAME = "usage.jsonl"
QUERY_CHARS = 500
TOP_PATHS = 5


def append(cache_dir: Path, report: Report, caller: str, latency_ms: float) -> None:
    """Add one line for ``report`` to the usage log in ``cache_dir``.

    Text never makes it fail: a query or caller taken from argv or the environment may hold
    undecodable bytes (lone surrogates), which are written as ``\\udcXX`` escapes. Only a
    real I/O fault (a read-only or full disk) raises, as ``OSError``.
    """
    entry = {
        "time": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "query": report.query[:QUERY_CHARS],
        "caller": caller,
        "latency_ms": round(latency_ms, 1),
        "top_paths": [c.path for c in report.results[:TOP_PATHS]],
    }
    line = json.dumps(entry, ensure_ascii=False) + "\n"
    # backslashreplace turns a lone surrogate into the JSON escape \udcXX: still valid JSON,
    # and it reads back as the same string.
    with open(cache_dir / LOG_NAME, "ab") as log:
        log.write(line.encode("utf-8", errors="backslashreplace"))


@dataclass
class CallerStats:
    caller: str
    queries: int
    median_latency_ms: float


@dataclass
class UsageStats:
    queries: int = 0
    by_caller: list[CallerStats] = field(default_factory=list)
    #: lines that were not valid entries (a torn write, a hand edit) and were not counted
    skipped_lines: int = 0


def summarize(cache_dir: Path) -> UsageStats:
    """Count the queries in the usage log and the median latency per caller."""
    import statistics  # only `stats` needs it; kept out of every query's start-up

    path = cache_dir / LOG_NAME
    latencies: dict[str, list[float]] = {}
    stats = UsageStats()
    if not path.is_file():
        return stats
    with open(path, encoding="utf-8", errors="replace") as log:
        for line in log:
            if not line.strip():
                continue
            try:
                entry = json.loads(line)
                latency = float(entry["latency_ms"])
                caller = str(entry.get("caller") or "unknown")
                if not math.isfinite(latency):  # NaN or 1e999: no latency was measured
                    raise ValueError(latency)
            except (ValueError, KeyError, TypeError):
                stats.skipped_lines += 1
                continue
            latencies.setdefault(caller, []).append(latency)
    stats.queries = sum(len(v) for v in latencies.values())
    stats.by_caller = [
        CallerStats(caller, len(values), statistics.median(values))
        for caller, values in sorted(latencies.items())
    ]
    return stats
