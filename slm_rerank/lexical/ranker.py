"""The learned ranker: a linear model over a candidate file's features
(``lexical/features.py``) that orders the files the lexical stage found.

    score(file) = bias + sum_i weight_i * (x_i - mean_i) / scale_i

Each term of that sum is what one feature did to the file against an average candidate, so
the largest of them say why a file sits where it does (``explain``). Files are ordered by
score; a file's chunks keep their lexical order and share their file's score in proportion
to their lexical scores, so ``--chunks`` interleaves files as before. A chunk's reported
score is its file's share of the softmax over the candidate files: the model's estimate that
this file is the answer, among the files it was shown.

A model is a small JSON file (``MODEL_FORMAT``): the shipped one (``ranker.json`` in this
package, trained by ``tests/bench/train_ranker.py``) or one ``slm-rerank calibrate --learn
--write`` fitted to a repository and kept in the user's cache. A file that cannot be read,
is not a model, or names a feature this version does not compute is a ``RankerError``; the
search then keeps the fixed lexical order and says so.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field, replace
from functools import lru_cache
from operator import attrgetter
from pathlib import Path
from typing import TYPE_CHECKING, Any

from slm_rerank.errors import SlmRerankError
from slm_rerank.lexical import features
from slm_rerank.lexical.features import FEATURES, Candidate, History
from slm_rerank.lexical.file_scores import FileEvidence
from slm_rerank.lexical.scores import ScoredChunk, TermStats
from slm_rerank.lexical.terms import QueryTerms

if TYPE_CHECKING:
    from collections.abc import Mapping

    from slm_rerank.lexical.chunk_memory import SlicedFile

#: the model file's format; a file of another format is refused, never guessed at
MODEL_FORMAT = 1
#: a model file is a few kilobytes; anything larger is not one
MAX_MODEL_BYTES = 1_000_000
SHIPPED = Path(__file__).with_name("ranker.json")
#: how many features ``explain`` names per result
EXPLAINED = 4


class RankerError(SlmRerankError):
    """A ranker model file cannot be used; the message names the file and why."""


@dataclass(frozen=True)
class RankerModel:
    """A linear model: per feature a mean, a scale and a weight, and where it came from."""

    name: str
    features: tuple[str, ...]
    mean: tuple[float, ...]
    scale: tuple[float, ...]
    weights: tuple[float, ...]
    bias: float = 0.0
    #: the training recipe, data and measurements, as the file carries them
    meta: dict[str, Any] = field(default_factory=dict, compare=False)
    #: where it was read from ("shipped", or the file's path)
    origin: str = "shipped"

    def to_json(self) -> dict[str, Any]:
        return {"format": MODEL_FORMAT, "name": self.name, "features": list(self.features),
                "mean": list(self.mean), "scale": list(self.scale),
                "weights": list(self.weights), "bias": self.bias, "meta": self.meta}

    def terms(self, values: tuple[float, ...]) -> list[tuple[str, float]]:
        """What each feature adds to the score of a candidate with ``values``."""
        index = _positions(self.features)
        return [(name, w * (values[i] - m) / s)
                for name, i, m, s, w in zip(self.features, index, self.mean, self.scale,
                                            self.weights, strict=True)]

    def score(self, values: tuple[float, ...]) -> float:
        index = _positions(self.features)
        total = self.bias
        for i, m, s, w in zip(index, self.mean, self.scale, self.weights, strict=True):
            total += w * (values[i] - m) / s
        return total


@lru_cache(maxsize=32)
def _positions(names: tuple[str, ...]) -> list[int]:
    order = {name: i for i, name in enumerate(FEATURES)}
    return [order[name] for name in names]


def _numbers(data: dict[str, Any], key: str, length: int, where: str) -> tuple[float, ...]:
    values = data.get(key)
    if not isinstance(values, list) or len(values) != length or not all(
            isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
            for v in values):
        raise RankerError(f"{where}: '{key}' must be a list of {length} finite numbers")
    return tuple(float(v) for v in values)


def parse_model(data: object, where: str) -> RankerModel:
    """A ``RankerModel`` from a model file's decoded JSON; ``where`` names the file."""
    if not isinstance(data, dict):
        raise RankerError(f"{where}: not a ranker model (expected a JSON object)")
    fmt = data.get("format")
    if fmt != MODEL_FORMAT:
        raise RankerError(f"{where}: model format {fmt!r}, this slm-rerank reads format "
                          f"{MODEL_FORMAT}; fit it again with slm-rerank calibrate --learn "
                          "--write, or upgrade slm-rerank")
    names = data.get("features")
    if not isinstance(names, list) or not names or not all(isinstance(n, str) for n in names):
        raise RankerError(f"{where}: 'features' must be a non-empty list of names")
    unknown = [n for n in names if n not in FEATURES]
    if unknown:
        raise RankerError(f"{where}: features {', '.join(map(repr, unknown[:5]))} are not "
                          "computed by this slm-rerank (a model for another version)")
    if len(set(names)) != len(names):
        raise RankerError(f"{where}: a feature is named twice")
    n = len(names)
    scale = _numbers(data, "scale", n, where)
    if any(s <= 0 for s in scale):
        raise RankerError(f"{where}: every 'scale' must be above 0")
    bias = data.get("bias", 0.0)
    if not isinstance(bias, (int, float)) or isinstance(bias, bool) or not math.isfinite(bias):
        raise RankerError(f"{where}: 'bias' must be a finite number")
    name = data.get("name")
    meta = data.get("meta", {})
    return RankerModel(name if isinstance(name, str) and name else "unnamed", tuple(names),
                       _numbers(data, "mean", n, where), scale,
                       _numbers(data, "weights", n, where), float(bias),
                       meta if isinstance(meta, dict) else {}, where)


def load_model(path: Path) -> RankerModel:
    """Read a model file (at most ``MAX_MODEL_BYTES``); a ``RankerError`` names what is
    wrong with it."""
    from slm_rerank.report import display_path

    where = display_path(str(path))
    try:
        with open(path, "rb") as handle:
            raw = handle.read(MAX_MODEL_BYTES + 1)
    except OSError as exc:
        raise RankerError(f"cannot read ranker model {where}: {exc.strerror or exc}") from exc
    if len(raw) > MAX_MODEL_BYTES:
        raise RankerError(f"{where}: over {MAX_MODEL_BYTES} bytes, not a ranker model")
    try:
        data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise RankerError(f"{where}: not valid JSON ({exc})") from exc
    model = parse_model(data, where)
    return model


@lru_cache(maxsize=1)
def shipped_model() -> RankerModel:
    """The model this package ships (``ranker.json``), read once per process."""
    return replace(load_model(SHIPPED), origin="shipped")


@dataclass(frozen=True)
class Placed:
    """A candidate file as the model placed it."""

    path: str
    score: float
    #: the model's estimate that this file is the answer, among the candidates
    share: float
    #: the features that moved it most, largest first: (feature, its term of the score)
    why: tuple[tuple[str, float], ...]
    #: its feature values, in ``FEATURES`` order (what ``why`` says in words)
    values: tuple[float, ...] = ()
    #: the query's words the messages of the commits that changed it say (``Candidate.said``)
    said: tuple[str, ...] = ()

    def value(self, feature: str) -> float:
        """The value of ``feature`` for this file (0 when not known)."""
        if feature not in FEATURES:
            return 0.0
        index = _positions((feature,))[0]
        return self.values[index] if index < len(self.values) else 0.0


def explain(model: RankerModel, candidate: Candidate, centre: tuple[float, ...] | None = None,
            count: int = EXPLAINED) -> tuple[tuple[str, float], ...]:
    """The ``count`` features that did most to ``candidate``'s score, largest first (and
    none that did nothing).

    ``centre`` (feature values, ``FEATURES`` order: the average of the query's candidates)
    is what each feature is measured from: a feature every candidate shares (no history
    was read, none is a test) then explains nothing, as it decides nothing. Without it, a
    feature is measured from the training data's mean."""
    return _explained(model.terms(candidate.values),
                      model.terms(centre) if centre is not None else None, count)


def _explained(terms: list[tuple[str, float]], base: list[tuple[str, float]] | None,
               count: int) -> tuple[tuple[str, float], ...]:
    """``explain`` of a candidate whose terms are ``terms``, measured from ``base`` (the
    centre's terms: the same for every candidate of a query)."""
    if base is not None:
        terms = [(name, value - centred) for (name, value), (_, centred)
                 in zip(terms, base, strict=True)]
    rounded = [(name, round(value, 2)) for name, value in terms]
    rounded.sort(key=_by_weight)
    return tuple(t for t in rounded[:count] if t[1] != 0)


def _by_weight(term: tuple[str, float]) -> tuple[float, str]:
    return -abs(term[1]), term[0]


def place(model: RankerModel, found: list[Candidate]) -> list[Placed]:
    """Every candidate by the model's score, best first (ties keep the lexical order)."""
    scores = [model.score(c.values) for c in found]
    top = max(scores, default=0.0)
    weights = [math.exp(s - top) for s in scores]
    total = sum(weights) or 1.0
    n = len(found) or 1
    centre = tuple(sum(column) / n for column in zip(*(c.values for c in found), strict=True))
    base = model.terms(centre) if centre else None  # what every candidate is measured from
    placed = [Placed(c.path, s, w / total, _explained(model.terms(c.values), base, EXPLAINED),
                     c.values, c.said)
              for c, s, w in zip(found, scores, weights, strict=True)]
    order = sorted(range(len(placed)), key=lambda i: (-placed[i].score, i))
    return [placed[i] for i in order]


def reorder(chunks: list[ScoredChunk], placed: list[Placed]) -> list[ScoredChunk]:
    """``chunks`` (lexical order) in the model's file order: a file's chunks keep their
    lexical order and get their file's share scaled by their lexical score against the
    file's best. Chunks are copied; the lexical scores stay in the caller's list."""
    by_file: dict[str, list[ScoredChunk]] = {}
    for item in chunks:
        by_file.setdefault(item.path, []).append(item)
    out: list[ScoredChunk] = []
    for entry in placed:
        own = by_file.get(entry.path, [])
        best = own[0].score if own and own[0].score > 0 else 1.0
        # the constructor, not dataclasses.replace: a tenth of the cost, for every chunk
        out.extend(ScoredChunk(item.path, item.chunk, entry.share * max(item.score, 0.0) / best,
                               item.matched, item.declares, item.enclosing, item.mentions)
                   for item in own)
    by_score_first(out)  # a file's chunks, and ties, keep their order
    return out


def by_score_first(items: list[ScoredChunk]) -> None:
    """Sort ``items`` by score, highest first, ties in the order they come (as
    ``items.sort(key=lambda c: -c.score)``, without a Python call per item: sorting in
    reverse keeps ties in order). A NaN score, which orders nothing, is sorted as before."""
    scores = list(map(_score_of, items))
    if any(map(math.isnan, scores)):
        items.sort(key=lambda c: -c.score)
    else:
        items.sort(key=_score_of, reverse=True)


_score_of = attrgetter("score")


# --- which model a search uses ------------------------------------------------------------


def work_tree(root: Path) -> Path:
    """The top of the git work tree holding ``root`` (found by its ``.git`` entry, without
    running git), else ``root`` itself."""
    for folder in (root, *root.parents):
        if (folder / ".git").exists():
            return folder
    return root


def repository_digest(root: Path) -> str:
    """The name of what the user's cache keeps for the repository holding ``root``: a hash
    of its work tree's real path."""
    from slm_rerank import digests

    top = str(work_tree(root.resolve()))
    return digests.sha256(top.encode("utf-8", "surrogateescape")).hexdigest()[:20]


def repository_model_path(cache_dir: Path, root: Path) -> Path:
    """Where ``calibrate --learn --write`` keeps the model fitted to the repository holding
    ``root``: the user's cache, named by ``repository_digest``. A repository's own files
    can neither name nor supply it."""
    return cache_dir / "rankers" / f"{repository_digest(root)}.json"


@dataclass(frozen=True)
class Chosen:
    """The model a search orders files by (None: the fixed order), and what to say."""

    model: RankerModel | None
    #: for -v: which model, from where
    note: str
    #: a model that could not be used (printed once, the fixed order applies)
    warning: str | None = None


def choose_model(root: Path, cache_dir: Path | None) -> Chosen:
    """This repository's own model when ``calibrate --learn --write`` kept one, else the
    shipped one. A model that cannot be read is a warning, and the search keeps the fixed
    lexical order rather than guessing."""
    if cache_dir is not None:
        own = repository_model_path(cache_dir, root)
        if own.exists():
            try:
                model = load_model(own)
            except RankerError as exc:
                return Chosen(None, "order: fixed lexical factors (this repository's "
                              "model is unusable)",
                              f"{exc}; the fixed lexical order is used (fit it again with "
                              "slm-rerank calibrate --learn --write, or delete the file)")
            return Chosen(model, f"order: learned ranker '{model.name}' fitted to this "
                          f"repository ({model.origin})")
    try:
        model = shipped_model()
    except RankerError as exc:
        return Chosen(None, "order: fixed lexical factors (the shipped model is unusable)",
                      f"{exc}; the fixed lexical order is used (reinstall slm-rerank)")
    return Chosen(model, f"order: learned ranker '{model.name}' (shipped)")


def learned_order(chunks: list[ScoredChunk], evidence: list[FileEvidence], terms: QueryTerms,
                  stats: TermStats, texts: dict[str, str], model: RankerModel,
                  history: History | None = None,
                  files: Mapping[str, SlicedFile] | None = None,
                  first: features.FirstLine | None = None,
                  strong: features.FirstLine | None = None
                  ) -> tuple[list[ScoredChunk], dict[str, Placed]]:
    """``chunks`` (lexical order, best first) in ``model``'s order, and how it placed each
    file (path -> ``Placed``); ``files``: the sliced files ``texts`` are of; ``first`` and
    ``strong``: how the query's first line and its strong terms alone rank them
    (``features.candidates``)."""
    found = features.candidates(chunks, {e.path: e for e in evidence}, terms, stats, texts,
                                history, files, first, strong)
    placed = place(model, found)
    return reorder(chunks, placed), {p.path: p for p in placed}
