"""Fusion: the model's verdict on the head, combined with the lexical evidence.

    logit(final) = w * logit(p_model) + z + prior

``z`` is the chunk's tier-1 lexical score standardised over the scored chunks: the scores
are put on a 0-100 scale (100 = the best candidate), their spread is floored at
``SPREAD_FLOOR`` points (a narrower spread is noise, not evidence) and ``z`` is clipped to
+-``Z_CLIP``. ``w`` is the judge's weight (``weight_in_use``): the one ``slm-rerank
calibrate --write`` measured for the judge's model id on the repository searched
(``repository_judge.py``, the user's cache), else the one it measured for that model id
on the user's code (the user config's ``[judge_weights]``), else the profile's
(``ModelProfile.judge_weight``, or its ``short_query_weight`` for a one-line query). 1
lets an instruction-tuned judge overrule the lexical order; a weak base model gets less,
so its verdict nudges the order instead of replacing it. With the learned order, ``z`` is
the learned ranker's score standardised, so the fused logit is that linear model with the
judge's verdict as one more feature, ``w`` its coefficient. ``prior`` is what the lexical
stage knows of the file's kind (``lexical.scores.kind_prior``: a test, doc page, changelog or
data file the query did not ask for starts below source), so a judge's yes to a test that
shares the query's words does not silently undo that. Judged chunks rank above unjudged
ones; the unjudged tail keeps its lexical order below the head and is never dropped, so an
answer with a model holds every result ``--fast`` would have shown.

Length normalisation: a longer chunk gives a model more text to find a reason to say yes.
The profile's ``length_exponent`` e damps that before fusion:
``logit(p) - e * ln(max(n, REFERENCE_CHARS) / REFERENCE_CHARS)`` for a chunk of n
characters, so chunks up to the reference length are untouched and one eight times longer
loses e * 2.08 logits (0.25 for Qwen's 0.12). The reported model score stays the raw one.

The threshold is on the judge's own scale: a judged chunk whose P(relevant) is below it is
dropped. It is unset by default, so no judge cuts results unless the user asks for a cut
(``--threshold``): a fused score is mostly the lexical z, and cutting by it dropped chunks
the judge had said yes to.

``apply_verdicts`` is the one place the verdicts of a run meet the lexical order: it
chooses the weight, fuses, keeps the unjudged tail, applies the threshold and says which
weight it used and why. A search (``pipeline.run_search``, and so the MCP tool),
``Reranker.rerank``, the documents API (``documents.py``, and so ``/v1/rerank`` and the
review's judges) and ``calibrate`` (``calibration/measure.py``) all call it; none derives
a weight of its own.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from slm_rerank.config import Settings
    from slm_rerank.model.judgement import Judgement
    from slm_rerank.model.repository_judge import RepositoryJudge
    from slm_rerank.registrations import ModelProfile

Z_CLIP = 3.0
SPREAD_FLOOR = 3.0
#: probabilities are clamped this far from 0 and 1 before the logit
EPSILON = 1e-6
#: chunk length (characters) below which no length normalisation applies
REFERENCE_CHARS = 400
#: the settings key of the weights the user measured (model id -> weight)
MEASURED_KEY = "judge_weights"


def logit(p: float) -> float:
    p = min(max(p, EPSILON), 1.0 - EPSILON)
    return math.log(p / (1.0 - p))


def sigmoid(x: float) -> float:
    if x >= 0:
        return 1.0 / (1.0 + math.exp(-x))
    e = math.exp(x)
    return e / (1.0 + e)


def standardise(values: Sequence[float]) -> list[float]:
    """z-scores on a 0-100 scale with a floored spread, clipped to +-Z_CLIP."""
    if not values:
        return []
    top = max(values)
    scale = 100.0 / top if top > 0 else 1.0
    points = [v * scale for v in values]
    import statistics  # decimal and fractions come with it: not for a --fast search

    mean = statistics.fmean(points)
    spread = max(statistics.pstdev(points), SPREAD_FLOOR)
    return [max(-Z_CLIP, min(Z_CLIP, (p - mean) / spread)) for p in points]


@dataclass(frozen=True)
class FusedScore:
    index: int
    #: P(relevant) after fusion, in (0, 1); 0.0 for an unscored chunk
    score: float
    #: the model's own P(relevant), or None when the chunk was not scored
    model: float | None
    z: float | None
    #: the answer side the model left out of its top-K (its ``model`` is a bound), if any
    bounded: str | None = None
    #: the file-kind prior added to the fused logit (0.0 for source), None when unscored
    prior: float | None = None


def length_penalty(chars: int, exponent: float) -> float:
    """How many logits a chunk of ``chars`` characters loses (0 up to the reference)."""
    return exponent * math.log(max(chars, REFERENCE_CHARS) / REFERENCE_CHARS)


def fuse_scores(lexical: Sequence[float], model: Mapping[int, float], weight: float,
                lengths: Mapping[int, int] | None = None, exponent: float = 0.0,
                priors: Mapping[int, float] | None = None) -> list[FusedScore]:
    """The final order of chunks ``0..len(lexical)-1`` (lexical order, best first).

    ``model`` maps a chunk's index to the model's P(relevant), ``priors`` (optional) a
    chunk's file-kind prior in logits (``lexical.scores.kind_prior``). Returns every chunk:
    the scored ones by fused score, then the unscored ones in their lexical order.
    """
    scored = sorted(model)
    zs = dict(zip(scored, standardise([lexical[i] for i in scored]), strict=True))
    lengths = lengths or {}
    priors = priors or {}

    def judged(i: int) -> float:
        return logit(model[i]) - length_penalty(lengths.get(i, 0), exponent)

    head = [FusedScore(i, sigmoid(weight * judged(i) + zs[i] + priors.get(i, 0.0)),
                       model[i], zs[i], prior=priors.get(i, 0.0))
            for i in scored]
    head.sort(key=lambda f: (-f.score, f.index))
    tail = [FusedScore(i, 0.0, None, None) for i in range(len(lexical)) if i not in model]
    return head + tail


@dataclass(frozen=True)
class JudgeWeight:
    """The weight verdicts are fused by, and where it came from (for ``-v`` and the JSON)."""

    weight: float
    source: str

    @property
    def note(self) -> str:
        return f"judge weight {self.weight:g} from {self.source}"


@dataclass(frozen=True)
class FusedOrder:
    """The fused order a result shows, what the threshold cut from it, and by which weight."""

    #: best first: the judged chunks by fused score (those the threshold let through, when
    #: one is set), then every unjudged chunk in lexical order
    kept: list[FusedScore]
    #: how many chunks were judged; None when the run degraded (no threshold applies then)
    judged: int | None
    #: how many judged chunks the threshold dropped
    dropped: int = 0
    #: the judge's highest P(relevant) (0.0 when none was judged)
    best: float = 0.0
    #: the weight the verdicts were fused by, and why that one
    weight: JudgeWeight = JudgeWeight(1.0, "default")


def profile_weight(profile: ModelProfile | None, query: str | None) -> float:
    """The weight of a profile's verdicts for ``query``: its ``short_query_weight`` for a
    one-line query when it has one, else its ``judge_weight`` (1.0 without a profile)."""
    from slm_rerank.model.intent import reads_as_issue

    if profile is None:
        return 1.0
    if (profile.short_query_weight is not None and query is not None
            and not reads_as_issue(query)):
        return profile.short_query_weight
    return profile.judge_weight


def weight_in_use(profile: ModelProfile | None, model_id: str | None, settings: Settings,
                  query: str | None = None,
                  repository: RepositoryJudge | None = None) -> JudgeWeight:
    """The weight ``calibrate --write`` measured for ``model_id`` on this repository
    (``repository``, a search's), else the user's measured weight for ``model_id``
    (``judge_weights`` in the user config; for every query), else the profile's for
    ``query`` (``profile_weight``), else 1."""
    here = repository.weight(model_id) if repository is not None else None
    if here is not None and here.weight is not None:
        return JudgeWeight(here.weight, f"calibrate --write on this repository "
                                        f"({here.written_at or 'undated'})")
    measured = settings.judge_weights.get(model_id) if model_id else None
    if measured is not None:
        origin = settings.origins.get(MEASURED_KEY, "user config")
        return JudgeWeight(float(measured), f"{MEASURED_KEY}[{model_id!r}] ({origin})")
    if profile is not None:
        weight = profile_weight(profile, query)
        if weight != profile.judge_weight:
            return JudgeWeight(weight, f"profile {profile.name}, short_query_weight (a "
                                       "one-line query)")
        return JudgeWeight(weight, f"profile {profile.name}")
    return JudgeWeight(1.0, "default")


def apply_verdicts(lexical: Sequence[float] | int, judgement: Judgement, settings: Settings, *,
                   threshold: float | None, query: str | None = None,
                   lengths: Mapping[int, int] | None = None,
                   at: Sequence[int] | None = None,
                   priors: Mapping[int, float] | None = None,
                   tried: float | None = None,
                   repository: RepositoryJudge | None = None) -> FusedOrder:
    """Where a run's verdicts meet the lexical order: every front door calls this.

    Chooses the weight (``weight_in_use``: the measured one for the judge's model id, else
    the profile's for ``query``), fuses the verdicts with the ``lexical`` scores (best
    first) by it and by the profile's length exponent, keeps every unjudged chunk below
    the judged ones, and drops the judged chunks the threshold cuts. ``tried`` fuses by
    that weight instead (``calibrate`` measuring the weights it may write); ``repository``
    (a search's) holds the weight measured on the repository searched. ``lexical`` may
    be a count of documents with no lexical evidence (the documents API): the verdicts
    alone then order the judged ones (every weight orders them alike), the unjudged
    follow in the given order.

    ``judgement.scores`` and ``lengths`` (characters the model read) are keyed by the
    judged document's index; ``at`` says where each sits in ``lexical`` (a search judges
    the head of a longer ranking), None when document i is ``lexical[i]``; ``priors`` (the
    file-kind prior in logits) is keyed like ``lexical``. ``threshold`` is on the judge's
    scale, P(relevant): a judged chunk below it is dropped, unless the run degraded (its
    verdicts are not the whole story); None drops nothing.
    """
    def where(i: int) -> int:
        return at[i] if at is not None else i

    profile = judgement.profile.profile if judgement.profile else None
    model_id = judgement.endpoint.model_id if judgement.endpoint else None
    weight = (JudgeWeight(tried, "tried") if tried is not None
              else weight_in_use(profile, model_id, settings, query, repository))
    model = {where(i): v.probability for i, v in judgement.scores.items()}
    bounded = {where(i): v.bounded for i, v in judgement.scores.items() if v.bounded}
    if isinstance(lexical, int):
        fused = [FusedScore(i, model[i], model[i], None)
                 for i in sorted(model, key=lambda i: (-model[i], i))]
        fused += [FusedScore(i, 0.0, None, None) for i in range(lexical) if i not in model]
    else:
        fused = fuse_scores(lexical, model, weight.weight,
                            {where(i): n for i, n in (lengths or {}).items()},
                            profile.length_exponent if profile else 0.0, priors)
    fused = [dataclasses.replace(f, bounded=bounded.get(f.index)) for f in fused]
    judged = [f for f in fused if f.model is not None]
    tail = [f for f in fused if f.model is None]
    best = max((f.model for f in judged if f.model is not None), default=0.0)
    if judgement.degraded:
        return FusedOrder(fused, None, 0, best, weight)
    kept = [f for f in judged if threshold is None or (f.model or 0.0) >= threshold]
    return FusedOrder(kept + tail, len(judged), len(judged) - len(kept), best, weight)
