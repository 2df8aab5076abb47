"""Fitting the learned ranker (``lexical/ranker.py``) to cases whose answers are known.

Each case is a group: its candidate files' features and which of them are gold. The loss is
listwise: the softmax of the scores over a group's candidates, and minus the log of the
share that falls on its gold files, plus an L2 pull towards a starting model (the shipped
one, for a repository's own fit; zero for the shipped one). Features are standardised by
the training groups' mean and spread, so a weight says how much one spread of a feature
moves a file. The fit is full-batch gradient descent with Adam steps, in pure Python, and
deterministic: the same groups give the same model.

A group without a gold candidate teaches nothing (the lexical stage never found the
answer) and is left out; so is a group with one candidate.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import repeat
from operator import add, mul
from pathlib import Path
from typing import Any

from slm_rerank.host import Host
from slm_rerank.lexical.features import FEATURES, History
from slm_rerank.lexical.ranker import RankerModel

#: candidates per group the fit looks at: the best by lexical order (the model reorders
#: what the lexical stage found; a file below this is rarely the answer)
GROUP_SIZE = 40
L2 = 0.01
ITERATIONS = 200
STEP = 0.05
#: a candidate's gradient term below this (relative to one group) is skipped
NEGLIGIBLE = 1e-4


@dataclass(frozen=True)
class Group:
    """One case's candidates: their feature values (``FEATURES`` order) and gold flags."""

    values: list[tuple[float, ...]]
    gold: list[bool]

    @property
    def useful(self) -> bool:
        return len(self.values) > 1 and any(self.gold)


def _standardiser(groups: Sequence[Group], index: list[int]
                  ) -> tuple[list[float], list[float]]:
    rows = [tuple(v[i] for i in index) for g in groups for v in g.values]
    n = max(1, len(rows))
    mean = [sum(r[j] for r in rows) / n for j in range(len(index))]
    spread = [math.sqrt(sum((r[j] - mean[j]) ** 2 for r in rows) / n) for j in range(len(index))]
    return mean, [s if s > 1e-9 else 1.0 for s in spread]


def loss_and_gradient(weights: Sequence[float], groups: Sequence[list[list[float]]],
                      golds: Sequence[list[bool]], prior: Sequence[float], l2: float
                      ) -> tuple[float, list[float]]:
    """The mean listwise loss over ``groups`` (standardised rows) and its gradient.

    A candidate whose share of its group and of its group's gold mass are both below
    ``NEGLIGIBLE`` adds nothing worth the arithmetic to the gradient and is skipped."""
    grad = [l2 * 2 * (w - p) for w, p in zip(weights, prior, strict=True)]
    total = l2 * sum((w - p) ** 2 for w, p in zip(weights, prior, strict=True))
    count = len(groups) or 1
    for rows, gold in zip(groups, golds, strict=True):
        scores = [sum(map(mul, weights, row)) for row in rows]
        top = max(scores)
        exps = [math.exp(s - top) for s in scores]
        z = sum(exps)
        gold_mass = sum(e for e, g in zip(exps, gold, strict=True) if g)
        total += (math.log(z) - math.log(gold_mass)) / count
        for row, e, g in zip(rows, exps, gold, strict=True):
            coef = (e / z - (e / gold_mass if g else 0.0)) / count
            if abs(coef) * count > NEGLIGIBLE:
                grad = list(map(add, grad, map(mul, repeat(coef), row)))
    return total, grad


def fit(groups: Sequence[Group], *, name: str, features: Sequence[str] = tuple(FEATURES),
        start: RankerModel | None = None, l2: float = L2, iterations: int = ITERATIONS,
        meta: dict[str, Any] | None = None) -> RankerModel:
    """A model fitted to ``groups``; ``start`` (same features) is the point the L2 pulls
    towards and the fit begins at, keeping its standardisation."""
    order = {n: i for i, n in enumerate(FEATURES)}
    index = [order[n] for n in features]
    useful = [g for g in groups if g.useful]
    if start is not None and tuple(features) == start.features:
        mean, scale = list(start.mean), list(start.scale)
        prior = list(start.weights)
    else:
        mean, scale = _standardiser(useful, index)
        prior = [0.0] * len(index)
    rows = [[[(v[i] - m) / s for i, m, s in zip(index, mean, scale, strict=True)]
             for v in g.values] for g in useful]
    golds = [g.gold for g in useful]
    weights = list(prior)
    first, second = [0.0] * len(weights), [0.0] * len(weights)
    for step in range(1, iterations + 1):
        _, grad = loss_and_gradient(weights, rows, golds, prior, l2)
        for j, g in enumerate(grad):
            first[j] = 0.9 * first[j] + 0.1 * g
            second[j] = 0.999 * second[j] + 0.001 * g * g
            corrected = first[j] / (1 - 0.9 ** step)
            spread = math.sqrt(second[j] / (1 - 0.999 ** step)) + 1e-8
            weights[j] -= STEP * corrected / spread
    return RankerModel(name, tuple(features), tuple(mean), tuple(scale),
                       tuple(round(w, 6) for w in weights), 0.0, dict(meta or {}))


def group_of(values: Sequence[tuple[float, ...]], paths: Sequence[str], gold: set[str],
             size: int = GROUP_SIZE) -> Group:
    """The first ``size`` candidates of a case (lexical order) with their gold flags."""
    return Group(list(values[:size]), [p in gold for p in paths[:size]])


# --- a case's candidates ------------------------------------------------------------------


@dataclass(frozen=True)
class Extracted:
    """A query's candidate files in the fixed lexical order, with their features."""

    paths: list[str]
    values: list[tuple[float, ...]]


def extract(query: str, tree: Path, host: Host, cache_dir: Path | None = None,
            history: History | None = None) -> Extracted:
    """Run the lexical stage over ``tree`` for ``query`` as a search does, in the fixed
    order, and compute each candidate file's features (``lexical/features.py``)."""
    from slm_rerank.lexical.features import candidates
    from slm_rerank.lexical.first_line import first_line_view, strong_view
    from slm_rerank.pipeline import SearchRequest, gather, query_terms, rank

    fixed = host.with_overrides("learning ({key})", learned_order=False)
    request = SearchRequest(query=query, root=tree.resolve(), fast=True, cache_dir=cache_dir)
    terms = query_terms(query)
    notes: list[str] = []
    gathered = gather(request, fixed, terms, notes)
    ranked = rank(request, fixed, gathered, notes)
    first = first_line_view(query, gathered, ranked)
    strong = strong_view(gathered, ranked)
    found = candidates(ranked.chunks, {e.path: e for e in gathered.evidence}, gathered.terms,
                       gathered.stats, ranked.texts, history, ranked.files, first, strong)
    return Extracted([c.path for c in found], [c.values for c in found])
