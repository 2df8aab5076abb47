"""A whole measurement over a list of cases, each in its own tree; shared by ``calibrate``
(the parent tree of each mined commit) and ``bench --cases`` (the tree as it is)."""

from __future__ import annotations

import contextlib
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from slm_rerank.calibration.measure import (
    CaseOrders,
    ModelRun,
    OrderSummary,
    WeightChoice,
    choose_weight,
    measure_case,
    readable_gold,
    summarise,
)
from slm_rerank.calibration.mining import Case
from slm_rerank.calibration.trees import BadTree
from slm_rerank.errors import QueryError
from slm_rerank.host import Host
from slm_rerank.model.repository_judge import JudgeFinding

#: consecutive cases without a single verdict after which the model is no longer asked
GIVE_UP_AFTER = 3
TreeOf = Callable[[Case], contextlib.AbstractContextManager[Path]]
#: called after each case with (cases done, cases in all)
Advance = Callable[[int, int], None]
#: the results a measured search asks for, whatever the user's ``top_k``: it widens the
#: candidate files (``lexical.rank``), so each case is measured over the same candidates
MEASURED_TOP_K = 10
#: the reason a case whose tree could not be laid out is left out (``trees.BadTree``)
NO_TREE = "tree could not be laid out"


@dataclass
class Measurement:
    """Every order's summary over the cases measured, and what was left out and why."""

    results: list[CaseOrders]
    summaries: list[OrderSummary]
    #: None for --fast
    model: ModelRun | None
    #: reason -> cases left out of the measurement
    dropped: Counter[str] = field(default_factory=Counter)
    choice: WeightChoice | None = None
    #: why each case counted under NO_TREE was left out (its commit, git's or the OS's word)
    bad_trees: list[str] = field(default_factory=list)


def same_tree(root: Path) -> TreeOf:
    """Every case in ``root`` (``bench --cases``: the user's labelled queries of today)."""

    @contextlib.contextmanager
    def tree(case: Case) -> Iterator[Path]:
        yield root

    return tree


def run_cases(cases: Sequence[Case], tree_of: TreeOf, host: Host,
              cache_dir: Path | None, weights: Sequence[float], fast: bool,
              advance: Advance | None = None) -> Measurement:
    """Measure every case (``measure.measure_case``) in the tree ``tree_of`` lays out, by
    ``host``'s settings (``MEASURED_TOP_K`` results asked for)."""
    host = host.with_overrides("calibrate ({key} of a measured search)", top_k=MEASURED_TOP_K)
    model = None if fast else ModelRun()
    results: list[CaseOrders] = []
    dropped: Counter[str] = Counter()
    bad_trees: list[str] = []
    ask = not fast
    for done, case in enumerate(cases, 1):
        with contextlib.ExitStack() as laid_out:
            try:
                tree = laid_out.enter_context(tree_of(case))
            except BadTree as exc:  # one bad historic tree costs its case, not the run
                dropped[NO_TREE] += 1
                bad_trees.append(f"{case.id}: {exc}")
                if advance is not None:
                    advance(done, len(cases))
                continue
            gold = readable_gold(case, tree)
            if not gold:
                dropped["gold files missing or generated in the searched tree"] += 1
            else:
                try:
                    results.append(measure_case(replace(case, gold_files=gold), tree, host,
                                                host.settings, cache_dir, weights, not ask,
                                                model or ModelRun()))
                except QueryError:
                    dropped["query has no searchable words"] += 1
        if (model is not None and ask and model.weight is None
                and len(model.degraded) >= GIVE_UP_AFTER):
            # a server that never answered will not start now: each further case would
            # only wait out its timeout
            model.degraded.append(f"no verdict in the first {len(model.degraded)} cases; "
                                  "the rest are measured by the lexical order alone")
            ask = False
        if advance is not None:
            advance(done, len(cases))
    if model is not None and model.weight is not None:
        judged = [r for r in results if not r.degraded]
        if len(judged) < len(results):
            dropped["model run degraded"] += len(results) - len(judged)
        results = judged
    choice = None
    if model is not None:
        candidates = sorted({*weights, *([model.weight] if model.weight is not None else [])})
        choice = choose_weight(results, candidates, model.weight)
    return Measurement(results, summarise(results), model, dropped, choice, bad_trees)


def judge_finding(measurement: Measurement) -> JudgeFinding | None:
    """What the measurement says of the judge on this repository (``repository_judge``):
    whether it adds anything, and the weight chosen; None without verdicts, a model id or
    enough cases (``MIN_CASES``)."""
    from slm_rerank.calibration.measure import LEXICAL, MIN_CASES
    from slm_rerank.model.repository_judge import Measured, finding

    model, choice = measurement.model, measurement.choice
    if model is None or not model.model_id or model.weight is None:
        return None
    by_name = {s.order: s for s in measurement.summaries}
    if LEXICAL not in by_name:
        return None
    fused = {float(name.removeprefix("fused w=")): (s.mrr, s.mrr_ci[0])
             for name, s in by_name.items() if name.startswith("fused w=")}
    chosen = choice.best if choice is not None and choice.separated else None
    return finding(Measured(model.model_id, len(measurement.results), by_name[LEXICAL].mrr,
                            fused, chosen), MIN_CASES)
