"""What a query produces: ranked citations plus timings and any degradation."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

#: Bumped when a key of the JSON document changes meaning or disappears (docs/output.md).
#: 2: ``score`` is null for a result the model did not judge in a run it fused (it was 0.0).
SCHEMA_VERSION = 2

#: What a result's ``score`` is, by ``Report.score_kind``: the lexical score (the fixed
#: order), the learned ranker's share (``--fast``, or a run that fused no verdict, ordered by
#: the learned ranker) or the fused P(relevant). Said in the JSON document and in the text
#: formats' header, so the scales are never read as one.
SCORE_MEANINGS = {
    "learned": ("score is the learned ranker's estimate, 0 to 1, that this result's file is "
                "the answer, among the candidate files it was shown (the files' shares sum "
                "to 1); a file's other chunks get its share scaled by their lexical score "
                "against its best chunk's"),
    "lexical": ("score is the lexical score: the query's evidence in the path and the text "
                "(BM25-like, 0 or more, no upper bound; compare it within one query only)"),
    "fused": ("score is the fused P(relevant), 0 to 1: the judge's verdict combined with "
              "the lexical score; null for a result the model did not judge (those follow "
              "the judged ones, in lexical order)"),
}


#: What a terminal, a Markdown renderer or an agent reading text takes as structure or as a
#: command rather than as part of a name: DEL, C1 controls (NEL U+0085 and CSI U+009B among
#: them), the line and paragraph separators U+2028/U+2029, and the bidirectional embeddings,
#: overrides and isolates, which reorder what a person reads. C0 (ESC, BEL, CR, newline, ...)
#: is added below; JSON escapes C0 itself.
_BEYOND_C0 = "\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069"
_UNSAFE = re.compile(f"[\x00-\x1f{_BEYOND_C0}]")
#: The same without tab and newline, for text that may span lines (a stub's code).
_UNSAFE_BUT_LINES = re.compile(f"[\x00-\x08\x0b-\x1f{_BEYOND_C0}]")
#: Only what JSON leaves raw: its own escapes already cover C0 inside strings.
_UNSAFE_IN_JSON = re.compile(f"[{_BEYOND_C0}]")


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def visible(text: str, keep_lines: bool = False, json: bool = False) -> str:
    """``text`` with every character in ``_UNSAFE`` shown as an escape (``\\x1b``,
    ``\\u2028``), so a file name, symbol or server message cannot drive a terminal, start a
    line of its own in what a person or an agent reads, or reorder it.

    The one escaping function of every writer: formatters, the hook's context, messages on
    stderr. ``keep_lines`` leaves tab and newline alone (a stub's code). ``json`` is for
    text already serialised by ``json.dumps(..., ensure_ascii=False)``: the characters JSON
    leaves raw become ``\\uNNNN`` escapes, so the value a reader decodes stays exact.
    """
    if json:
        return _UNSAFE_IN_JSON.sub(lambda m: f"\\u{ord(m.group()):04x}", text)
    return (_UNSAFE_BUT_LINES if keep_lines else _UNSAFE).sub(_escape, text)


#: how much of a long argument an error message quotes
QUOTED_CHARS = 80
#: a run of characters without a space longer than this is cut in an error message even
#: when it is no argument as given (a path the argument was resolved to, git's echo of it)
LONG_RUN = 200


def _cut(text: str) -> str:
    return f"{text[:QUOTED_CHARS]}... ({len(text)} chars)"


def cut_arguments(message: str, args: Sequence[str]) -> str:
    """``message`` with each argument of ``args`` over ``LONG_RUN`` characters it quotes (as
    given, as the value of ``--option=value``, or as ``repr`` writes it) cut to its first
    ``QUOTED_CHARS`` characters, and any other run of over ``LONG_RUN`` characters without a
    space cut too: an error is one readable line, not an echo of a 100 KB argument, while a
    path of ordinary length is named whole."""
    forms: set[str] = set()
    for arg in args:
        for value in (arg, arg.partition("=")[2] if arg.startswith("--") else ""):
            if len(value) > LONG_RUN:
                forms.update((value, repr(value)[1:-1]))
    for form in sorted(forms, key=len, reverse=True):
        message = message.replace(form, _cut(form))
    return re.sub(rf"\S{{{LONG_RUN + 1},}}", lambda m: _cut(m.group()), message)


def display_path(path: str) -> str:
    """A path as text that always encodes: undecodable bytes become \\x escapes."""
    return path.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


@dataclass
class Citation:
    """One ranked place: a file's line range, with the scores that put it there."""

    path: str
    start_line: int
    end_line: int
    symbol: str | None
    score: float
    lexical_score: float
    model_score: float | None = None
    matched_terms: list[str] = field(default_factory=list)
    #: "yes", "no" or "both" when the model's answer left that side out of its top-K, so
    #: ``model_score`` is a bound rather than a measurement
    bounded: str | None = None
    #: the file's ghost stub (``--stub``/``--skeleton``): a ``slm_rerank.context.stubs.Stub``
    stub: Any = None
    #: the architectural slice holding the file (``--by-slice``), None outside any
    slice: str | None = None
    #: "modified", "staged", "untracked" or "deleted" when ``--dirty`` found the file changed
    dirty: str | None = None
    #: the file's kind as the lexical stage reads its path: "source", "test", "doc",
    #: "changelog" or "other"
    kind: str | None = None
    #: the file-kind prior (logits) fusion added to its model verdict; None when not judged
    prior: float | None = None
    #: the features that placed its file, largest effect first; None with the fixed order
    why: list[Reason] | None = None

    @property
    def location(self) -> str:
        return f"{self.path}:{self.start_line}-{self.end_line}"


@dataclass(frozen=True)
class Reason:
    """One feature that placed a result where the learned ranker put it."""

    #: its name (``lexical.features.FEATURES``)
    feature: str
    #: what it added to the file's score against an average candidate (logits)
    effect: float
    #: the same in words, specific where the query's terms say it ("path names 'io'")
    says: str


@dataclass(frozen=True)
class OrderInfo:
    """What ordered the candidate files: the learned ranker (which model) or the fixed
    lexical factors (and why)."""

    #: "learned" or "fixed"
    kind: str
    #: the model's name, for a learned order
    model: str | None = None
    #: "shipped" (in the package) or "this repository" (``calibrate --learn --write``)
    origin: str | None = None
    #: the model file, for one fitted to this repository
    file: str | None = None
    #: the model's version as its file gives it (``meta.version``), if any
    version: str | None = None
    #: why the fixed order, when it is fixed: the setting, or an unusable model file
    reason: str | None = None


@dataclass
class Degraded:
    """Why the result is less than was asked for (e.g. the model server did not answer)."""

    reason: str


@dataclass
class Shortfall:
    """Fewer results than asked for (``-k``), and why: the threshold, the model's head, or
    the repository holding fewer matches."""

    asked: int
    shown: int
    #: "threshold" (the judge's P(relevant) was below --threshold) or "matches"
    cause: str
    #: one sentence, as stderr says it
    reason: str


@dataclass
class EndpointInfo:
    """One server a query's chunks were spread over, and how it did."""

    url: str
    scored: int
    #: why it was left out mid-run, or None
    failed: str | None = None


@dataclass
class ModelInfo:
    """How the model stage ran: which server, model, profile and scorer, and how much."""

    endpoint: str | None
    model_id: str | None
    profile: str | None
    #: why this profile (asked for, claims the model id, generic fallback)
    profile_reason: str | None
    scorer: str | None
    #: chunks judged (from the server or the cache)
    scored: int = 0
    #: of which answered from the score cache
    cache_hits: int = 0
    threshold: float | None = None
    #: every server the chunks went to (one, or several with an ``endpoints`` list)
    endpoints: list[EndpointInfo] = field(default_factory=list)
    #: the weight the verdicts were fused by, and where it came from: the profile (its
    #: ``short_query_weight`` for a one-line query), or the user config's ``judge_weights``
    #: (``slm-rerank calibrate --write``); and where the profile's weight was measured
    #: ("" never: say so)
    judge_weight: float | None = None
    judge_weight_source: str | None = None
    weight_measured: str | None = None
    #: the query's intent, which chose the question the judge was asked (``model/intent.py``),
    #: and why; None when the profile asks one question whatever the intent
    intent: str | None = None
    intent_reason: str | None = None
    #: what the verdicts cost on the server (prompt tokens, of them cached, read) and what a
    #: budget or the cascade left unjudged (``model/judge_budget.TokenUse.to_dict``)
    tokens: dict[str, Any] | None = None

    @classmethod
    def of(cls, judgement: Any, threshold: float | None, judge_weight: float | None = None,
           judge_weight_source: str | None = None) -> ModelInfo:
        """How ``judgement`` ran; ``judge_weight`` and its source are what fusion chose
        (``fusion.apply_verdicts``), not read from the profile."""
        endpoint, profile = judgement.endpoint, judgement.profile
        return cls(
            endpoint=endpoint.base_url if endpoint else None,
            model_id=endpoint.model_id if endpoint else None,
            profile=profile.profile.name if profile else None,
            profile_reason=profile.reason if profile else None,
            scorer=judgement.scorer, scored=len(judgement.scores),
            cache_hits=judgement.cache_hits, threshold=threshold,
            endpoints=[EndpointInfo(u.url, u.scored, u.failed)
                       for u in getattr(judgement, "uses", [])],
            intent=judgement.intent.kind if getattr(judgement, "intent", None) else None,
            intent_reason=judgement.intent.why if getattr(judgement, "intent", None) else None,
            judge_weight=judge_weight, judge_weight_source=judge_weight_source,
            weight_measured=profile.profile.weight_measured if profile else None,
            tokens=judgement.tokens.to_dict() if hasattr(judgement, "tokens") else None,
        )


@dataclass
class Report:
    """The whole answer to one query."""

    query: str
    root: str
    mode: str
    results: list[Citation] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)
    degraded: Degraded | None = None
    #: things a person should know about (skipped files, unavailable sources); stderr only
    notes: list[str] = field(default_factory=list)
    #: how the model stage ran; None for --fast
    model: ModelInfo | None = None
    #: what was asked for and could not be done (``--dirty`` outside git); stderr always
    warnings: list[str] = field(default_factory=list)
    #: with ``--by-slice``: the slices in order of their best result (``slices.SliceGroup``)
    slices: list[Any] | None = None
    #: fewer results than asked for, and why; None when there are as many as asked for
    shortfall: Shortfall | None = None
    #: what ``score`` is (``SCORE_MEANINGS``): "fused" when the model's verdicts were fused
    #: into the order, else "learned" (the learned ranker's share) or "lexical" (the fixed
    #: order), for ``--fast`` or a run that degraded before any verdict
    score_kind: str = "lexical"
    #: how the searched root was chosen (``lexical.scope.RootChoice.source``): "given",
    #: "repository" (the git repository holding the working directory) or
    #: "working directory" (no git repository at or above it)
    root_source: str = "given"
    #: what ordered the candidate files (None: a report not made by a search)
    order: OrderInfo | None = None

    def shown_score(self, c: Citation) -> float | None:
        """``c``'s score as the output shows it: None for a result the model did not judge
        in a fused run (its internal 0.0 only places it below the judged ones)."""
        if self.score_kind == "fused" and c.model_score is None:
            return None
        return c.score

    def fused_score(self, c: Citation) -> float | None:
        """``c``'s fused P(relevant); None unless the model judged it and was fused."""
        return c.score if self.score_kind == "fused" and c.model_score is not None else None

    def _best_score(self, members: list[int]) -> float | None:
        """The best shown score of the results at ``members``; None when none has one."""
        shown = [self.shown_score(self.results[i]) for i in members]
        return max((score for score in shown if score is not None), default=None)

    def to_dict(self) -> dict[str, Any]:
        """The stable JSON document described in docs/output.md."""
        return {
            "version": SCHEMA_VERSION,
            "query": self.query,
            "root": self.root,
            "root_source": self.root_source,
            "mode": self.mode,
            "score_kind": self.score_kind,
            "score_meaning": SCORE_MEANINGS[self.score_kind],
            "order": None if self.order is None else vars(self.order).copy(),
            "results": [
                {
                    "rank": rank,
                    "path": c.path,
                    "start_line": c.start_line,
                    "end_line": c.end_line,
                    "symbol": c.symbol,
                    "score": _rounded(self.shown_score(c)),
                    "lexical_score": round(c.lexical_score, 4),
                    "model_score": _rounded(c.model_score),
                    "fused_score": _rounded(self.fused_score(c)),
                    "matched_terms": list(c.matched_terms),
                    "bounded": c.bounded,
                    "stub": _stub_dict(c.stub),
                    "slice": c.slice,
                    "dirty": c.dirty,
                    "kind": c.kind,
                    "prior": _rounded(c.prior),
                    "why": None if c.why is None else [
                        {"feature": r.feature, "effect": round(r.effect, 2), "says": r.says}
                        for r in c.why],
                }
                for rank, c in enumerate(self.results, 1)
            ],
            "timings": {k: round(v, 1) for k, v in self.timings.items()},
            "degraded": None if self.degraded is None else {"reason": self.degraded.reason},
            "model": None if self.model is None else {
                **vars(self.model), "endpoints": [vars(e).copy() for e in self.model.endpoints]},
            "slices": None if self.slices is None else [
                {"slice": g.name, "best_score": _rounded(self._best_score(g.members)),
                 "ranks": [i + 1 for i in g.members]}
                for g in self.slices
            ],
            "warnings": list(self.warnings),
            "shortfall": None if self.shortfall is None else vars(self.shortfall).copy(),
        }


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 4)


def _stub_dict(stub: Any) -> dict[str, Any] | None:
    if stub is None:
        return None
    return {"text": stub.text, "kept_lines": stub.kept_lines,
            "folded_lines": stub.folded_lines, "total_lines": stub.total_lines,
            "method": stub.method, "note": stub.note}
