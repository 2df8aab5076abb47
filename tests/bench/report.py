"""Aggregates per-case results into micro/macro averages and latency percentiles, and
renders them as markdown tables."""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

import metrics
from cases import CaseResult
from systems import IndexBuild


@dataclass
class Summary:
    """One system over one mode's cases."""

    system: str
    mode: str
    cases: int
    errors: int
    hit1: float
    hit5: float
    hit10: float
    mrr10: float
    line_hit5: float | None  # None: the system only ranks files
    macro_hit5: float
    p50_ms: float
    p95_ms: float


def summarize(results: Sequence[CaseResult], system: str, mode: str) -> Summary:
    rows = [r for r in results if r.system == system and r.mode == mode]
    by_repo: dict[str, list[float]] = defaultdict(list)
    for r in rows:
        by_repo[r.repo].append(float(r.hit5))
    line_hits = [float(r.line_hit5) for r in rows if r.line_hit5 is not None]
    latencies = [r.latency_ms for r in rows if r.error is None]
    return Summary(
        system=system,
        mode=mode,
        cases=len(rows),
        errors=sum(r.error is not None for r in rows),
        hit1=metrics.mean(float(r.hit1) for r in rows),
        hit5=metrics.mean(float(r.hit5) for r in rows),
        hit10=metrics.mean(float(r.hit10) for r in rows),
        mrr10=metrics.mean(r.rr10 for r in rows),
        line_hit5=metrics.mean(line_hits) if line_hits else None,
        macro_hit5=metrics.macro_mean(by_repo),
        p50_ms=metrics.percentile(latencies, 50),
        p95_ms=metrics.percentile(latencies, 95),
    )


def per_repo_hit5(results: Sequence[CaseResult], system: str, mode: str) -> dict[str, float]:
    by_repo: dict[str, list[float]] = defaultdict(list)
    for r in results:
        if r.system == system and r.mode == mode:
            by_repo[r.repo].append(float(r.hit5))
    return {repo: metrics.mean(vals) for repo, vals in by_repo.items()}


def _pct(value: float | None) -> str:
    if value is None:
        return "n/a"
    return "–" if math.isnan(value) else f"{100 * value:.1f}"


def _ms(value: float) -> str:
    if math.isnan(value):
        return "–"
    return f"{value:.1f}" if value < 100 else f"{value:.0f}"


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |"]
    lines.append("|" + "|".join(":--" if i == 0 else "--:" for i in range(len(header))) + "|")
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return lines


def summary_table(summaries: Sequence[Summary]) -> list[str]:
    header = [
        "system",
        "Hit@1",
        "Hit@5",
        "Hit@10",
        "MRR@10",
        "line-hit@5",
        "macro Hit@5",
        "p50 ms",
        "p95 ms",
    ]
    rows = [
        [
            s.system,
            _pct(s.hit1),
            _pct(s.hit5),
            _pct(s.hit10),
            "–" if math.isnan(s.mrr10) else f"{s.mrr10:.3f}",
            _pct(s.line_hit5),
            _pct(s.macro_hit5),
            _ms(s.p50_ms),
            _ms(s.p95_ms),
        ]
        for s in summaries
    ]
    return _table(header, rows)


def repo_table(results: Sequence[CaseResult], systems: Sequence[str], mode: str) -> list[str]:
    case_counts: dict[str, set[str]] = defaultdict(set)
    for r in results:
        if r.mode == mode:
            case_counts[r.repo].add(r.case_id)
    per_system = {s: per_repo_hit5(results, s, mode) for s in systems}
    rows = []
    for repo in sorted(case_counts, key=lambda name: (-len(case_counts[name]), name)):
        rows.append(
            [repo, str(len(case_counts[repo]))]
            + [_pct(per_system[s].get(repo, math.nan)) for s in systems]
        )
    total = str(sum(len(ids) for ids in case_counts.values()))
    micro = [summarize(results, s, mode).hit5 for s in systems]
    macro = [metrics.mean(per_system[s].values()) for s in systems]
    rows.append(["**all cases (micro)**", total] + [_pct(v) for v in micro])
    rows.append([f"**macro over {len(case_counts)} repos**", total] + [_pct(v) for v in macro])
    return _table(["repository", "cases", *systems], rows)


NO_LANG = "(none)"


def languages(results: Sequence[CaseResult]) -> list[tuple[str, list[CaseResult]]]:
    """The results of each language, by name; empty when no case names its language."""
    if not any(r.lang for r in results):
        return []
    by_lang: dict[str, list[CaseResult]] = defaultdict(list)
    for r in results:
        by_lang[r.lang or NO_LANG].append(r)
    return sorted(by_lang.items())


def _metric_cells(s: Summary) -> list[str]:
    mrr = "–" if math.isnan(s.mrr10) else f"{s.mrr10:.3f}"
    return [_pct(s.hit1), _pct(s.hit5), _pct(s.hit10), mrr]


def lang_table(results: Sequence[CaseResult], systems: Sequence[str], mode: str) -> list[str]:
    """Hit@1/5/10 and MRR@10 of each system in each language, then over all cases (micro)
    and as the mean of the per-language figures (macro)."""
    groups = languages([r for r in results if r.mode == mode])
    rows = []
    per_lang: dict[str, list[Summary]] = defaultdict(list)
    for lang, lang_rows in groups:
        for system in systems:
            summary = summarize(lang_rows, system, mode)
            per_lang[system].append(summary)
            rows.append([lang, str(summary.cases), system, *_metric_cells(summary)])
    for system in systems:
        overall = summarize(results, system, mode)
        rows.append(["**all (micro)**", str(overall.cases), system, *_metric_cells(overall)])
    for system in systems:
        mine = per_lang[system]
        macro = Summary(
            system, mode, sum(s.cases for s in mine), sum(s.errors for s in mine),
            hit1=metrics.mean(s.hit1 for s in mine),
            hit5=metrics.mean(s.hit5 for s in mine),
            hit10=metrics.mean(s.hit10 for s in mine),
            mrr10=metrics.mean(s.mrr10 for s in mine),
            line_hit5=None, macro_hit5=math.nan, p50_ms=math.nan, p95_ms=math.nan,
        )
        label = f"**macro over {len(groups)} languages**"
        rows.append([label, str(macro.cases), system, *_metric_cells(macro)])
    return _table(["language", "cases", "system", "Hit@1", "Hit@5", "Hit@10", "MRR@10"], rows)


def index_line(builds: Sequence[IndexBuild], system: str) -> str | None:
    mine = [b for b in builds if b.system == system]
    if not mine:
        return None
    seconds = [b.seconds for b in mine]
    slowest = max(mine, key=lambda b: b.seconds)
    return (
        f"- {system} index build (not in latency): {sum(seconds):.1f} s over {len(mine)} trees;"
        f" median {1000 * metrics.percentile(seconds, 50):.0f} ms,"
        f" max {slowest.seconds:.2f} s ({slowest.tree}, {slowest.documents} files)"
    )


def render(
    results: Sequence[CaseResult],
    systems: Sequence[str],
    modes: Sequence[str],
    builds: Sequence[IndexBuild],
    preamble: Sequence[str] = (),
) -> str:
    lines: list[str] = list(preamble)
    for mode in modes:
        summaries = [summarize(results, s, mode) for s in systems]
        n = max((s.cases for s in summaries), default=0)
        what = "issue title" if mode == "title" else "whole issue text"
        lines += ["", f"## Mode `{mode}` ({what}), {n} cases", ""]
        lines += summary_table(summaries)
        lines.append("")
        lines.append(
            "Hit@k, line-hit@5 and macro Hit@5 in %; macro = mean of per-repository means;"
            " latency = wall time per query."
        )
        for s in systems:
            line = index_line(builds, s)
            if line:
                lines.append(line)
        for s in summaries:
            if s.errors:
                lines.append(
                    f"- {s.system}: {s.errors} failed queries, scored as misses"
                    " and left out of latency"
                )
        tool_ms = [
            r.extra.get("tool_total_ms")
            for r in results
            if r.mode == mode and r.system == "fast" and r.error is None
        ]
        tool_ms = [float(v) for v in tool_ms if isinstance(v, (int, float))]
        if tool_ms:
            lines.append(
                f"- fast, tool-reported total_ms: p50 {_ms(metrics.percentile(tool_ms, 50))},"
                f" p95 {_ms(metrics.percentile(tool_ms, 95))}"
            )
        degraded = sum(
            1 for r in results if r.mode == mode and r.system == "fast" and r.extra.get("degraded")
        )
        if degraded:
            lines.append(f"- fast: {degraded} results reported `degraded`")
        if languages(results):
            lines += ["", f"### Per language, mode `{mode}`", ""]
            lines += lang_table(results, systems, mode)
            lines += ["", "Hit@k in %; macro = mean of the per-language figures."]
        lines += ["", f"### Hit@5 per repository, mode `{mode}`", ""]
        lines += repo_table(results, systems, mode)
    return "\n".join(lines) + "\n"
