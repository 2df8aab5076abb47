"""``calibrate --learn``: the learned ranker fitted to one repository's own history, and
measured on its newest commits against the shipped model and the fixed lexical order.

Each mined case (``mining.mine``) is searched in its parent's tree as ``calibrate`` does,
with the repository's change history read as it was at that parent (nothing later leaks
into a case's features), and its candidate files' features are kept (``learning.extract``).

The cases are split by time (``time_split``): sorted by commit date, then by their place in
the history, the oldest two thirds train and the newest third tests, and no training
commit is newer than a test commit. The fit starts from the shipped model and is pulled
towards it (``learning.fit``). On the test cases three orders are measured, each file list
scored by Hit@1, Hit@5 and MRR@10: the fixed lexical order, the shipped model and the
repository's model, with a 95 % paired bootstrap interval of each gain (``decide``: when
the repository's model is kept).
"""

from __future__ import annotations

import json
import math
import time
from collections import Counter
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from slm_rerank.calibration.measure import hit_at, paired_interval, reciprocal_rank
from slm_rerank.calibration.mining import Case
from slm_rerank.lexical.ranker import RankerModel

if TYPE_CHECKING:
    from slm_rerank.host import Host
    from slm_rerank.lexical.features import History

#: the share of cases (the newest) the models are measured on
TEST_SHARE = 1 / 3
#: fewest training cases whose answer is among the candidates (fewer, and nothing is fitted)
MIN_TRAIN = 30
#: fewest test cases (fewer, and no measurement could tell the models apart)
MIN_TEST = 20
#: seconds the change history as of one case's parent may take to read
HISTORY_DEADLINE = 10.0
#: the orders measured, in the table's order
FIXED, SHIPPED, REPOSITORY = "fixed", "shipped", "repository"
#: the metrics, in the table's order: (key, heading)
METRICS = (("hit_at_1", "Hit@1"), ("hit_at_5", "Hit@5"), ("mrr", "MRR@10"))
#: when ``--write`` keeps the repository's model (``decide``)
RULE = ("kept when, on the test cases, its MRR@10 is above the shipped model's with the "
        "95 % interval of the gain at or above 0, and its Hit@1 is not lower")


class Dated(Protocol):
    """What the time split reads of a case: its commit's date, its place in the history."""

    @property
    def date(self) -> int: ...

    @property
    def position(self) -> int: ...


D = TypeVar("D", bound=Dated)


@dataclass(frozen=True)
class Example:
    """One case as the fit and the measurement see it: its candidates in the fixed lexical
    order, their features (``FEATURES`` order), and its commit's date and place."""

    case: Case
    #: the fix's committer date (seconds since the epoch)
    date: int
    #: its place in the history read, newest first (0: the newest commit looked at)
    position: int
    paths: list[str]
    values: list[tuple[float, ...]]
    gold: frozenset[str]

    @property
    def useful(self) -> bool:
        """Whether the fit learns from it: a gold file is among its candidates."""
        return any(p in self.gold for p in self.paths)


@dataclass(frozen=True)
class Split:
    """The training cases (oldest first) and the test cases (newest last)."""

    train: list[Any]
    test: list[Any]
    #: the newest training commit's date and the oldest test commit's (None: a side empty)
    train_until: int | None
    test_from: int | None


def _older_first(item: Dated) -> tuple[int, int]:
    # a larger position is further back in the history: older, at an equal date
    return (item.date, -item.position)


def time_split(items: Sequence[D], test_share: float = TEST_SHARE) -> Split:
    """``items`` sorted oldest first (commit date, then place in the history); the newest
    ``test_share`` of them test, the rest train. Raises ``ValueError`` if a training item
    is not older than every test item (it cannot be, by construction; a guard)."""
    ordered = sorted(items, key=_older_first)
    tested = int(len(ordered) * test_share)
    cut = len(ordered) - tested
    train, test = ordered[:cut], ordered[cut:]
    if train and test and not _older_first(train[-1]) < _older_first(test[0]):
        raise ValueError("time split: a training commit is not older than every test commit")
    if train and test and max(t.date for t in train) > min(t.date for t in test):
        raise ValueError("time split: a training commit is newer than a test commit")
    return Split(train, test, train[-1].date if train else None,
                 test[0].date if test else None)


# --- measuring --------------------------------------------------------------------------


def model_order(example: Example, model: RankerModel | None) -> list[str]:
    """``example``'s files by ``model``'s score (ties keep the lexical order); None: the
    fixed lexical order."""
    if model is None:
        return list(example.paths)
    scores = [model.score(v) for v in example.values]
    return [example.paths[i]
            for i in sorted(range(len(scores)), key=lambda i: (-scores[i], i))]


def _per_case(ranked: Sequence[str], gold: frozenset[str]) -> dict[str, float]:
    return {"hit_at_1": hit_at(ranked, gold, 1), "hit_at_5": hit_at(ranked, gold, 5),
            "mrr": reciprocal_rank(ranked, gold)}


@dataclass(frozen=True)
class Gain:
    """The mean per-case difference of one metric between two orders, and its 95 % paired
    bootstrap interval."""

    mean: float
    low: float
    high: float


def gain(better: Sequence[float], base: Sequence[float]) -> Gain:
    diff = [a - b for a, b in zip(better, base, strict=True)]
    if not diff:
        return Gain(math.nan, math.nan, math.nan)
    low, high = paired_interval(diff)
    return Gain(sum(diff) / len(diff), low, high)


@dataclass(frozen=True)
class Measured:
    """The three orders over the test cases: each metric's mean per order, and the gains
    (``<order> vs <order>`` -> metric -> ``Gain``)."""

    cases: int
    #: order -> metric -> mean over the test cases
    means: dict[str, dict[str, float]]
    gains: dict[str, dict[str, Gain]]


#: the comparisons measured: (name, better order, base order)
COMPARISONS = ((f"{SHIPPED} vs {FIXED}", SHIPPED, FIXED),
               (f"{REPOSITORY} vs {FIXED}", REPOSITORY, FIXED),
               (f"{REPOSITORY} vs {SHIPPED}", REPOSITORY, SHIPPED))


def measure_orders(test: Sequence[Example], shipped: RankerModel,
                   repository: RankerModel) -> Measured:
    """The fixed order, ``shipped`` and ``repository`` over ``test``."""
    models: dict[str, RankerModel | None] = {FIXED: None, SHIPPED: shipped,
                                              REPOSITORY: repository}
    scored = {name: [_per_case(model_order(e, model), e.gold) for e in test]
              for name, model in models.items()}
    n = len(test) or 1
    means = {name: {key: sum(c[key] for c in cases) / n for key, _ in METRICS}
             for name, cases in scored.items()}
    gains = {label: {key: gain([c[key] for c in scored[a]], [c[key] for c in scored[b]])
                     for key, _ in METRICS}
             for label, a, b in COMPARISONS}
    return Measured(len(test), means, gains)


@dataclass(frozen=True)
class Decision:
    """Whether the repository's model is kept, and why (one line)."""

    wins: bool
    reason: str


def decide(measured: Measured) -> Decision:
    """``RULE``: the repository's model wins when its MRR@10 on the test cases is above the
    shipped model's, the 95 % interval of that gain does not reach below 0, and its Hit@1
    is not lower than the shipped model's."""
    versus = measured.gains[f"{REPOSITORY} vs {SHIPPED}"]
    mrr, hit = versus["mrr"], versus["hit_at_1"]
    interval = f"{mrr.mean:+.3f} (95 % interval {mrr.low:+.3f} .. {mrr.high:+.3f})"
    if math.isnan(mrr.mean) or not mrr.mean > 0:
        return Decision(False, f"its MRR@10 is not above the shipped model's: {interval}")
    if not mrr.low >= 0:
        return Decision(False, f"its MRR@10 gain over the shipped model is not sure: "
                               f"{interval} reaches below 0")
    if hit.mean < 0:
        return Decision(False, f"its Hit@1 is {100 * hit.mean:+.1f} points against the "
                               "shipped model's (lower)")
    return Decision(True, f"it beats the shipped model: MRR@10 {interval}, Hit@1 "
                          f"{100 * hit.mean:+.1f} points")


# --- the run ------------------------------------------------------------------------------


#: lays out a case's tree, for the case (``run.TreeOf``)
TreeOf = Callable[[Case], AbstractContextManager[Path]]
#: reads the change history as of a commit (None: none could be read)
HistoryAt = Callable[[str], "History | None"]
#: called after each case with (cases done, cases in all)
Advance = Callable[[int, int], None]


@dataclass
class Extraction:
    """Every case that could be searched, and why the others were left out."""

    examples: list[Example]
    dropped: Counter[str] = field(default_factory=Counter)
    #: why each tree that could not be laid out was not (its commit, git's or the OS's word)
    bad_trees: list[str] = field(default_factory=list)
    #: cases searched without their change history (it could not be read as of the parent)
    no_history: int = 0
    seconds: float = 0.0


def extract_examples(cases: Sequence[Case], dates: dict[str, int], tree_of: TreeOf,
                     history_at: HistoryAt, host: Host, cache_dir: Path | None,
                     advance: Advance | None = None) -> Extraction:
    """Each case's candidates and features in its parent's tree, with the history as of
    that parent. ``cases`` are newest first (``mining.mine``): a case's index is its place.
    ``dates``: case id -> its commit's date; a case without one is left out."""
    import contextlib

    from slm_rerank.calibration.learning import extract
    from slm_rerank.calibration.measure import readable_gold
    from slm_rerank.calibration.run import NO_TREE
    from slm_rerank.calibration.trees import BadTree
    from slm_rerank.errors import QueryError

    started = time.monotonic()
    out = Extraction([])
    for done, case in enumerate(cases, 1):
        commit = case.tree or ""
        if case.id not in dates:  # not placed in time: it could be on either side
            out.dropped["commit date unknown"] += 1
            if advance is not None:
                advance(done, len(cases))
            continue
        with contextlib.ExitStack() as laid_out:
            try:
                tree = laid_out.enter_context(tree_of(case))
            except BadTree as exc:
                out.dropped[NO_TREE] += 1
                out.bad_trees.append(f"{case.id}: {exc}")
                tree = None
            gold = readable_gold(case, tree) if tree is not None else ()
            if tree is not None and not gold:
                out.dropped["gold files missing or generated in the searched tree"] += 1
            elif tree is not None:
                history = history_at(commit)
                out.no_history += history is None
                try:
                    found = extract(case.query, tree, host, cache_dir, history)
                except QueryError:
                    out.dropped["query has no searchable words"] += 1
                else:
                    out.examples.append(Example(case, dates[case.id], done - 1,
                                                found.paths, found.values, frozenset(gold)))
        if advance is not None:
            advance(done, len(cases))
    out.seconds = time.monotonic() - started
    return out


def fewest_cases() -> int:
    """The fewest cases a time split gives ``MIN_TRAIN`` and ``MIN_TEST`` from."""
    n = MIN_TRAIN + MIN_TEST
    while int(n * TEST_SHARE) < MIN_TEST or n - int(n * TEST_SHARE) < MIN_TRAIN:
        n += 1
    return n


def too_few_mined(cases: int) -> str | None:
    """Why ``cases`` mined cases are too few before any is searched, or None."""
    fewest = fewest_cases()
    if cases >= fewest:
        return None
    return (f"{cases} cases mined are too few to fit and test a model for this repository "
            f"(at least {fewest}: the newest {TEST_SHARE:.0%} test, at least {MIN_TEST}, "
            f"and at least {MIN_TRAIN} older ones train); raise --commits")


def commit_dates(root: Path, commits: int, rev: str = "HEAD") -> list[tuple[str, int]]:
    """(commit, committer date) of the newest ``commits`` commits reachable from ``rev``,
    newest first: the same commits ``mining.mine`` looks at."""
    from slm_rerank.git_runner import git_output

    raw = git_output(root, ["log", f"-n{commits}", "--format=%H %ct", rev, "--"])
    out = []
    for line in raw.decode("ascii", "replace").splitlines():
        commit, _, stamp = line.partition(" ")
        if commit and stamp.strip().lstrip("-").isdigit():
            out.append((commit, int(stamp)))
    return out


def too_few(split: Split) -> str | None:
    """Why ``split`` is too small to fit and test on, or None."""
    useful = sum(e.useful for e in split.train)
    if useful >= MIN_TRAIN and len(split.test) >= MIN_TEST:
        return None
    return (f"{len(split.train) + len(split.test)} cases ({useful} older ones whose answer "
            f"the lexical stage found, to train on, and {len(split.test)} newest to test "
            f"on) are too few to fit and test a model for this repository (at least "
            f"{MIN_TRAIN} and {MIN_TEST}); raise --commits")


def fit_repository(train: Sequence[Example], start: RankerModel, name: str,
                   meta: dict[str, Any]) -> RankerModel:
    """The model fitted to ``train``, starting from and pulled towards ``start``."""
    from slm_rerank.calibration.learning import fit, group_of

    groups = [group_of(e.values, e.paths, set(e.gold)) for e in train]
    return fit(groups, name=name, features=start.features, start=start, meta=meta)


def iso_date(stamp: int | None) -> str | None:
    if stamp is None:
        return None
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(stamp))


def measured_json(measured: Measured) -> dict[str, Any]:
    """The measurement as plain JSON values (NaN as null)."""

    def number(value: float) -> float | None:
        return None if math.isnan(value) else round(value, 4)

    return {"cases": measured.cases,
            "orders": {name: {key: number(v) for key, v in values.items()}
                       for name, values in measured.means.items()},
            "gains": {label: {key: {"mean": number(g.mean), "ci": [number(g.low),
                                                                     number(g.high)]}
                              for key, g in metrics.items()}
                      for label, metrics in measured.gains.items()}}


def write_model(path: Path, model: RankerModel) -> None:
    """Write ``model`` to ``path`` by rename: a search never reads half a file."""
    from slm_rerank import safefile

    safefile.replace_file(path, json.dumps(model.to_json(), indent=1) + "\n")
