"""The usage log: one JSON line per query in ``usage.jsonl``, and its summary."""

from __future__ import annotations

import json
import math
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from slm_rerank import safefile
from slm_rerank.errors import ConfigError
from slm_rerank.report import Report, visible

LOG_NAME = "usage.jsonl"
QUERY_CHARS = 500
#: a caller's name is kept to this many characters, as the query is to QUERY_CHARS
CALLER_CHARS = 100
TOP_PATHS = 5
#: The longest line ``summarize`` reads; an entry is well under 100 KB (a query of 500
#: characters, five paths), so a longer line is damage and is skipped, not held in memory.
MAX_LINE_CHARS = 1 << 20


def append(cache_dir: Path, report: Report, caller: str, latency_ms: float,
           hook: dict[str, Any] | None = None) -> None:
    """Add one line for ``report`` to the usage log in ``cache_dir``.

    ``hook`` is a prompt hook's decision record (decision, reason, queried), kept under the
    optional key "hook". Text never makes it fail: a query or caller taken from argv or the
    environment may hold undecodable bytes (lone surrogates), which are written as
    ``\\udcXX`` escapes. Only a real I/O fault (a read-only or full disk) raises, as
    ``OSError``; so does a symlink, FIFO or other non-regular file at the log's name
    (``safefile.NotRegularFile``): it is never followed nor waited on.
    """
    _write(cache_dir, _entry(report.query, caller, latency_ms,
                             [c.path for c in report.results[:TOP_PATHS]], hook))


def append_hook(cache_dir: Path, query: str, caller: str, latency_ms: float,
                hook: dict[str, Any], top_paths: list[str] | None = None) -> None:
    """Add one line for a prompt hook's decision (searched or not), as ``append`` does."""
    _write(cache_dir, _entry(query, caller, latency_ms, (top_paths or [])[:TOP_PATHS], hook))


def _entry(query: str, caller: str, latency_ms: float, top_paths: list[str],
           hook: dict[str, Any] | None) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "time": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "query": query[:QUERY_CHARS],
        "caller": caller[:CALLER_CHARS],  # --caller or SLM_RERANK_CALLER: any length
        "latency_ms": round(latency_ms, 1),
        "top_paths": top_paths,
    }
    if hook is not None:
        entry["hook"] = hook
    return entry


def _write(cache_dir: Path, entry: dict[str, Any]) -> None:
    # visible(json=True): DEL, C1 and U+2028 (which JSON leaves raw) become \uNNNN, so that
    # `cat usage.jsonl` cannot drive a terminal with a query's or a path's characters
    line = visible(json.dumps(entry, ensure_ascii=False), json=True) + "\n"
    # backslashreplace turns a lone surrogate into the JSON escape \udcXX: still valid JSON,
    # and it reads back as the same string.
    # Through open_regular: a symlink there made the query land in its target, a FIFO hung
    # every search (and the prompt hook past its limit).
    fd = safefile.open_regular(cache_dir / LOG_NAME, os.O_WRONLY | os.O_APPEND | os.O_CREAT,
                               0o666)
    with os.fdopen(fd, "ab") as log:
        log.write(line.encode("utf-8", errors="backslashreplace"))


@dataclass
class CallerStats:
    caller: str
    queries: int
    median_latency_ms: float


@dataclass
class HookStats:
    """Prompt hook decisions: how many prompts it saw, how many it searched for, how fast."""

    prompts: int = 0
    #: prompts it ran a search for (timed-out searches included)
    queried: int = 0
    #: searches that passed the deadline and printed nothing
    timeouts: int = 0
    #: hook runs that failed (unreadable input, a search error); the prompt went on
    errors: int = 0
    #: latency of the queried prompts (nearest rank), None when none queried
    p50_ms: float | None = None
    p95_ms: float | None = None
    #: prompts the classifier judged code questions, and how many each rule judged
    judged_code: int = 0
    by_rule: dict[str, int] = field(default_factory=dict)

    @property
    def share_queried(self) -> float:
        return self.queried / self.prompts if self.prompts else 0.0


@dataclass
class UsageStats:
    #: searches run (a hook prompt that ran none is not a query)
    queries: int = 0
    by_caller: list[CallerStats] = field(default_factory=list)
    hook: HookStats = field(default_factory=HookStats)
    #: lines that were not valid entries (a torn write, a hand edit) and were not counted
    skipped_lines: int = 0


def summarize(cache_dir: Path) -> UsageStats:
    """Count the queries in the usage log, the median latency per caller, and the prompt
    hook's decisions (lines written before the hook existed have none).

    Raises ConfigError when the log is a symlink, a FIFO or another non-regular file (it is
    not followed, nor waited on: a FIFO there hung `stats`).
    """
    import statistics  # only `stats` needs it; kept out of every query's start-up

    path = cache_dir / LOG_NAME
    latencies: dict[str, list[float]] = {}
    hook_latencies: list[float] = []
    stats = UsageStats()
    try:
        fd = safefile.open_regular(path, os.O_RDONLY)
    except FileNotFoundError:
        return stats
    except safefile.NotRegularFile as exc:
        raise ConfigError(f"usage log {path} is refused: {exc.strerror}; slm-rerank keeps "
                          f"only its own files there: remove it (rm {path})") from None
    with os.fdopen(fd, encoding="utf-8", errors="replace") as log:
        for line in _lines(log):
            if line is None:
                stats.skipped_lines += 1
                continue
            if not line.strip():
                continue
            try:
                entry = json.loads(line)
                latency = float(entry["latency_ms"])
                caller = str(entry.get("caller") or "unknown")
                if not math.isfinite(latency):  # NaN or 1e999: no latency was measured
                    raise ValueError(latency)
            # RecursionError: json nests one Python call per bracket ([[[[...)
            except (ValueError, KeyError, TypeError, RecursionError):
                stats.skipped_lines += 1
                continue
            hook = entry.get("hook")
            if isinstance(hook, dict):
                _count_hook(stats.hook, hook, latency, hook_latencies)
                if not hook.get("queried"):
                    continue
            latencies.setdefault(caller, []).append(latency)
    hook_latencies.sort()
    if hook_latencies:
        stats.hook.p50_ms = _nearest_rank(hook_latencies, 0.50)
        stats.hook.p95_ms = _nearest_rank(hook_latencies, 0.95)
    stats.queries = sum(len(v) for v in latencies.values())
    stats.by_caller = [
        CallerStats(caller, len(values), statistics.median(values))
        for caller, values in sorted(latencies.items())
    ]
    return stats


def _lines(log: TextIO) -> Iterator[str | None]:
    """The lines of ``log``, each at most MAX_LINE_CHARS; None for a line that is longer
    (read through to its end in pieces of that size, never held whole)."""
    while True:
        line = log.readline(MAX_LINE_CHARS + 1)
        if not line:
            return
        if len(line) <= MAX_LINE_CHARS:
            yield line
            continue
        while line and not line.endswith("\n"):
            line = log.readline(MAX_LINE_CHARS)
        yield None


#: A rule's name as logged is cut to this, and rules past MAX_RULES are counted as "other":
#: the log is a file anyone may have edited, and the rules are a dozen.
MAX_RULE_CHARS = 80
MAX_RULES = 64


def _judged_code(hook: dict[str, Any]) -> bool:
    """Whether the classifier judged the prompt a code question. Lines written before the
    hook logged ``code`` say it by having searched (an error line's reason is not a rule)."""
    if "code" in hook:
        return hook["code"] is True
    return bool(hook.get("queried")) and hook.get("decision") in ("query", "timeout")


def _count_hook(stats: HookStats, hook: dict[str, Any], latency: float,
                latencies: list[float]) -> None:
    stats.prompts += 1
    if _judged_code(hook):
        stats.judged_code += 1
        rule = str(hook.get("reason") or "unknown")[:MAX_RULE_CHARS]
        if rule not in stats.by_rule and len(stats.by_rule) >= MAX_RULES:
            rule = "other"
        stats.by_rule[rule] = stats.by_rule.get(rule, 0) + 1
    if hook.get("decision") == "timeout":
        stats.timeouts += 1
    if hook.get("decision") == "error":
        stats.errors += 1
    if hook.get("queried"):
        stats.queried += 1
        latencies.append(latency)


def _nearest_rank(ordered: list[float], share: float) -> float:
    """The nearest-rank percentile of a sorted, non-empty list (no interpolation)."""
    return ordered[max(0, math.ceil(share * len(ordered)) - 1)]
