"""A judge that knows each generated case's answer, for the calibration tests.

It stands in for ``slm_rerank.model.stage.judge`` (monkeypatched): the code under test is
what is done with verdicts, not how a server is asked for them (tests/live does that).
The generated cases name a unique word; the answer is ``src/<word>_impl.py`` and a decoy
``src/<word>_notes.py`` repeats the query's words, so the lexical order puts it first.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from fake_plugins import RAW_PROFILE
from git_history import History

from slm_rerank.model.profiles import ProfileChoice
from slm_rerank.model.stage import Judgement
from slm_rerank.registrations import DocumentScore, Endpoint

MODEL_ID = "oracle-judge"
PROFILE = dataclasses.replace(RAW_PROFILE, judge_weight=0.0)


def words(count: int) -> list[str]:
    """``count`` distinct letter-only words (query terms without digits)."""
    syllables = ["ba", "ce", "di", "fo", "gu", "ha", "je", "ki", "lo", "mu"]
    return ["".join(p) for p in itertools.islice(itertools.product(syllables, repeat=3),
                                                 count)]


def answer(word: str) -> str:
    return f"src/{word}_impl.py"


def seed_cases(repo: History, count: int) -> list[str]:
    """One setup commit, then ``count`` fixes, each of one ``_impl.py``; the words."""
    chosen = words(count)
    files: dict[str, str] = {}
    for word in chosen:
        files[f"src/{word}_notes.py"] = f"def {word}():\n    pass\n" + (
            f"# {word} zorblax widget frobnicate {word}\n"
            f"NOTES = '{word} zorblax widget frobnicate'\n") * 4
        files[answer(word)] = "def run():\n    return 'zorblax'\n"
    repo.commits([("lay out the modules of the widget", files)] + [
        (f"{word} zorblax widget must frobnicate",
         {answer(word): "def run():\n    return 'zorblax frobnicated'\n"}) for word in chosen])
    return chosen


class OracleJudge:
    """P(relevant) 0.9 for the case's answer, 0.1 for anything else; counts its calls."""

    def __init__(self, degraded: str | None = None, on_calls: set[int] | None = None,
                 blind: bool = False) -> None:
        self.calls = 0
        #: a judge that knows nothing: the same P(relevant) for every passage
        self.blind = blind
        #: calls a repository's measurement declined (nothing was judged)
        self.declined = 0
        #: why a run degrades, on the calls ``on_calls`` (1-based; None: every call)
        self.degraded = degraded
        self.on_calls = on_calls

    def __call__(self, query: str, passages: Sequence[Any], host: Any, settings: Any,
                 cache_dir: Path | None, intent: Any = None,
                 decisive: str | None = None, declined: Any = None) -> Judgement:
        self.calls += 1
        word = query.split()[0]
        # the cascade's decisive lexical order, or a judge the repository's measurement
        # declines, is judged as the stage does: not at all
        refused = declined([MODEL_ID]) if declined is not None else None
        if refused:
            self.declined += 1
        scores = {} if decisive or refused else {
            j: DocumentScore(j, 0.5 if self.blind else 0.9 if p.path == answer(word) else 0.1)
            for j, p in enumerate(passages)}
        degraded = self.degraded if self.on_calls is None or self.calls in self.on_calls \
            else None
        return Judgement(scores={} if degraded else scores,
                         endpoint=Endpoint("http://127.0.0.1:9", model_id=MODEL_ID),
                         profile=ProfileChoice(PROFILE, "the test's"), scorer="yesno",
                         degraded=degraded, notes=[f"0 judged, {refused}"] if refused else [])
