"""One measurement: each case searched once, its files ranked several ways from the same
verdicts, and Hit@1/5/10 and MRR@10 of each way with a confidence interval on its
difference from the lexical order.

The orders: ``lexical`` (what ``--fast`` gives), ``judge alone`` (the head by the model's
raw P(relevant), then the lexical tail) and ``fused w=W`` for each weight asked for. The
model is asked once per case (``pipeline.judge_head``); every weight reuses its verdicts
through the search's own fusion (``fusion.apply_verdicts``), and the score cache makes a
second run free.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from slm_rerank.calibration.mining import Case
from slm_rerank.config import Settings
from slm_rerank.host import Host
from slm_rerank.lexical.filetypes import SNIFF_BYTES, content_reason
from slm_rerank.pipeline import (
    SearchRequest,
    gather,
    head,
    kind_priors,
    query_terms,
    rank,
)

if TYPE_CHECKING:
    from slm_rerank.model.fusion import FusedOrder

LEXICAL = "lexical"
JUDGE_ALONE = "judge alone"
#: fewest cases a weight is chosen on; fewer, and ``--write`` writes nothing
MIN_CASES = 30
BOOTSTRAP_ROUNDS = 2000
#: the results an MRR counts (MRR@10)
MRR_DEPTH = 10


def fused_name(weight: float) -> str:
    return f"fused w={weight:g}"


# --- metrics ------------------------------------------------------------------------------


def first_gold_rank(ranked: Sequence[str], gold: Iterable[str]) -> int | None:
    """The 1-based rank of the first gold file in ``ranked``, or None."""
    wanted = set(gold)
    return next((n for n, path in enumerate(ranked, 1) if path in wanted), None)


def hit_at(ranked: Sequence[str], gold: Iterable[str], k: int) -> float:
    rank_ = first_gold_rank(ranked[:k], gold)
    return 0.0 if rank_ is None else 1.0


def reciprocal_rank(ranked: Sequence[str], gold: Iterable[str], k: int = MRR_DEPTH) -> float:
    rank_ = first_gold_rank(ranked[:k], gold)
    return 0.0 if rank_ is None else 1.0 / rank_


def paired_interval(differences: Sequence[float], rounds: int = BOOTSTRAP_ROUNDS,
                    seed: int = 0) -> tuple[float, float]:
    """A 95 % bootstrap interval of the mean of per-case ``differences`` (paired: both
    orders answered the same cases). Seeded: the same cases give the same interval."""
    if not differences:
        return (math.nan, math.nan)
    draw = random.Random(seed)
    n = len(differences)
    means = sorted(sum(draw.choices(differences, k=n)) / n for _ in range(rounds))
    return (means[int(0.025 * (rounds - 1))], means[int(0.975 * (rounds - 1))])


# --- one case -----------------------------------------------------------------------------


@dataclass
class CaseOrders:
    """One case's files in each order, best first."""

    case: Case
    orders: dict[str, list[str]]
    #: whether the head the model judged held a gold file (None: no model)
    head_recall: bool | None = None
    #: the model run degraded: only the lexical order was measured
    degraded: bool = False


def file_order(paths: Iterable[str]) -> list[str]:
    """The files of an order of chunks (their paths, best first), each at the place of its
    best chunk."""
    return list(dict.fromkeys(paths))


def readable_gold(case: Case, tree: Path) -> tuple[str, ...]:
    """The gold files that are in ``tree`` and not generated (a marker in their first
    lines): the lexical stage never ranks a generated file, so it is no fair answer."""
    kept = []
    for path in case.gold_files:
        try:
            with open(tree / path, "rb") as handle:
                start = handle.read(SNIFF_BYTES)
            size = (tree / path).stat().st_size
        except (OSError, ValueError):
            continue
        if content_reason(path.rsplit("/", 1)[-1], start, size) is None:
            kept.append(path)
    return tuple(kept)


@dataclass
class ModelRun:
    """What the model said about the runs' heads: which model, by which weight today."""

    model_id: str | None = None
    profile: str | None = None
    #: the weight a search uses now, and where it comes from (``fusion.weight_in_use``)
    weight: float | None = None
    weight_source: str | None = None
    degraded: list[str] = field(default_factory=list)


def measure_case(case: Case, tree: Path, host: Host, settings: Settings, cache_dir: Path | None,
                 weights: Sequence[float], fast: bool, model: ModelRun) -> CaseOrders:
    """The case's orders in ``tree``; the lexical order alone (``degraded``) when the model
    run degraded, since its verdicts would not be the whole head.

    Every fused order is the search's own: ``fusion.apply_verdicts`` over the same
    verdicts, by the weight a search uses today and by each weight tried."""
    from slm_rerank.model.fusion import apply_verdicts
    from slm_rerank.pipeline import judge_head

    request = SearchRequest(query=case.query, root=tree.resolve(), fast=fast,
                            cache_dir=cache_dir)
    terms = query_terms(case.query)
    notes: list[str] = []
    ranked = rank(request, host, gather(request, host, terms, notes), notes)
    orders = {LEXICAL: file_order(c.path for c in ranked.chunks)}
    if fast or not ranked.chunks:
        return CaseOrders(case, orders)
    scored = judge_head(request, host, settings, terms, ranked)
    judgement = scored.judgement
    if judgement.degraded:
        model.degraded.append(f"{case.id}: {judgement.degraded}")
        return CaseOrders(case, orders, degraded=True)
    # the file-kind prior the search adds, so each fused order is the search's own
    priors = kind_priors(ranked, scored.chosen, terms)
    lexical = [c.score for c in ranked.chunks]

    def fused(tried: float | None = None) -> FusedOrder:
        return apply_verdicts(lexical, judgement, settings, threshold=None, query=case.query,
                              lengths=scored.lengths, at=scored.chosen, priors=priors,
                              tried=tried)

    if model.weight is None:
        today = fused().weight
        model.model_id = judgement.endpoint.model_id if judgement.endpoint else None
        model.profile = judgement.profile.profile.name if judgement.profile else None
        model.weight, model.weight_source = today.weight, today.source
    verdicts = {scored.chosen[j]: v.probability for j, v in judgement.scores.items()}
    alone = sorted(verdicts, key=lambda i: (-verdicts[i], i))
    tail = [i for i in range(len(ranked.chunks)) if i not in verdicts]
    orders[JUDGE_ALONE] = file_order(ranked.chunks[i].path for i in alone + tail)
    # today's weight is always measured: a new weight is chosen against it
    for weight in sorted({*weights, model.weight}):
        orders[fused_name(weight)] = file_order(ranked.chunks[f.index].path
                                                for f in fused(weight).kept)
    judged = {ranked.chunks[i].path for i in head(ranked, settings.rerank_top)}
    return CaseOrders(case, orders, head_recall=bool(judged & set(case.gold_files)))


# --- the whole measurement ----------------------------------------------------------------


@dataclass(frozen=True)
class OrderSummary:
    """One order over every case: its metrics, and its difference from the lexical order."""

    order: str
    cases: int
    hit_at_1: float
    hit_at_5: float
    hit_at_10: float
    mrr: float
    #: mean per-case difference from the lexical order, and its 95 % bootstrap interval
    mrr_delta: float
    mrr_ci: tuple[float, float]
    hit_at_1_delta: float
    hit_at_1_ci: tuple[float, float]


def _per_case(results: Sequence[CaseOrders], order: str,
              metric: Callable[[Sequence[str], Iterable[str]], float]) -> list[float]:
    return [metric(r.orders[order], r.case.gold_files) for r in results]


def summarise(results: Sequence[CaseOrders]) -> list[OrderSummary]:
    """Every order's summary, in the order the first case lists them."""
    if not results:
        return []
    names = list(results[0].orders)

    def rr(ranked: Sequence[str], gold: Iterable[str]) -> float:
        return reciprocal_rank(ranked, gold)

    def hit1(ranked: Sequence[str], gold: Iterable[str]) -> float:
        return hit_at(ranked, gold, 1)

    base_rr, base_hit = _per_case(results, LEXICAL, rr), _per_case(results, LEXICAL, hit1)
    n = len(results)
    summaries = []
    for name in names:
        rrs, hits = _per_case(results, name, rr), _per_case(results, name, hit1)
        d_rr = [a - b for a, b in zip(rrs, base_rr, strict=True)]
        d_hit = [a - b for a, b in zip(hits, base_hit, strict=True)]
        summaries.append(OrderSummary(
            order=name, cases=n,
            hit_at_1=sum(hits) / n,
            hit_at_5=sum(hit_at(r.orders[name], r.case.gold_files, 5) for r in results) / n,
            hit_at_10=sum(hit_at(r.orders[name], r.case.gold_files, 10) for r in results) / n,
            mrr=sum(rrs) / n, mrr_delta=sum(d_rr) / n, mrr_ci=paired_interval(d_rr),
            hit_at_1_delta=sum(d_hit) / n, hit_at_1_ci=paired_interval(d_hit)))
    return summaries


@dataclass(frozen=True)
class WeightChoice:
    """The best fused weight, and whether the cases tell it apart from today's."""

    best: float | None
    current: float | None
    #: write the best weight: enough cases, and its MRR interval against today's weight
    #: lies above zero
    separated: bool
    reason: str
    ci: tuple[float, float] | None = None


def choose_weight(results: Sequence[CaseOrders], weights: Sequence[float],
                  current: float | None, min_cases: int | None = None) -> WeightChoice:
    """The weight with the best MRR, and whether it is measurably better than ``current``
    (the weight a search uses today): a paired bootstrap of the per-case difference."""
    min_cases = MIN_CASES if min_cases is None else min_cases
    if not results or current is None or JUDGE_ALONE not in results[0].orders:
        return WeightChoice(None, current, False, "no model verdicts to choose a weight from")

    def mrr(weight: float) -> float:
        return sum(_per_case(results, fused_name(weight), reciprocal_rank)) / len(results)

    # ties go to today's weight, then to the smaller weight (the lexical order is safer)
    best = max(weights, key=lambda w: (round(mrr(w), 9), w == current, -w))
    if len(results) < min_cases:
        return WeightChoice(best, current, False,
                            f"{len(results)} cases are too few to tell weights apart (at "
                            f"least {min_cases}); raise --commits")
    if best == current:
        return WeightChoice(best, current, False,
                            f"the weight in use ({current:g}) is already the best measured")
    diff = [a - b for a, b in zip(_per_case(results, fused_name(best), reciprocal_rank),
                                  _per_case(results, fused_name(current), reciprocal_rank),
                                  strict=True)]
    ci = paired_interval(diff)
    if ci[0] <= 0.0:
        return WeightChoice(best, current, False,
                            f"w={best:g} is not measurably better than w={current:g} on "
                            f"{len(results)} cases (MRR difference 95 % interval "
                            f"{ci[0]:+.3f} .. {ci[1]:+.3f} includes 0)", ci)
    return WeightChoice(best, current, True,
                        f"w={best:g} beats w={current:g} on {len(results)} cases (MRR "
                        f"difference 95 % interval {ci[0]:+.3f} .. {ci[1]:+.3f})", ci)
