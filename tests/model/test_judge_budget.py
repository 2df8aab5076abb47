"""The budget and the cascade (``model/judge_budget.py``, ``model/cascade.py``): what a
query's judge may spend, what it spent, and that what it leaves unjudged is the lexical
tail, not lost.

The rounds are specified with a scorer that needs no server and reports a prompt cost the
way llama.cpp does (``tokens_evaluated`` and ``timings.cache_n``, carried on each
``DocumentScore``); a whole search against a real llama-server is in
tests/live/model/test_judge_budget.py.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from slm_rerank.errors import ConfigError
from slm_rerank.model.cascade import CASCADE_FIRST
from slm_rerank.model.judge_budget import (
    Budget,
    TokenUse,
    judge_in_rounds,
    parse_budget,
)
from slm_rerank.model.scoring import ScoreOutcome, spread
from slm_rerank.registrations import Document, DocumentScore, Endpoint, Scorer, ScoreRequest

PREFIX = 300  # characters of instruction and query around each document


class Costly:
    """A scorer whose verdicts cost what a llama.cpp slot would charge: the shared prefix
    once per slot, then only the document; ``probabilities`` by document id."""

    def __init__(self, probabilities: dict[str, float] | None = None, slots: int = 2,
                 delay: float = 0.0, counts: bool = True) -> None:
        self.probabilities = probabilities or {}
        self.slots = slots
        self.delay = delay
        self.counts = counts
        self.asked: list[str] = []
        self.warm = 0

    async def score(self, request: ScoreRequest) -> AsyncIterator[DocumentScore]:
        for i, doc in enumerate(request.documents):
            await asyncio.sleep(self.delay)
            self.asked.append(doc.id)
            prefix = PREFIX // 3
            doc_tokens = len(doc.text) // 3
            cached = prefix if self.warm >= self.slots else 0
            self.warm += 1
            yield DocumentScore(i, self.probabilities.get(doc.id, 0.3),
                                prompt_tokens=(prefix + doc_tokens) if self.counts else None,
                                cached_tokens=cached if self.counts else None)

    def scorer(self) -> Scorer:
        return Scorer(name="costly", description="test", score=self.score)


def documents(n: int, chars: int = 600) -> list[Document]:
    return [Document.of(str(i), f"chunk {i} " + "x" * chars) for i in range(n)]


def run_rounds(costly: Costly, docs: list[Document], budget: Budget | None = None,
               cascade: bool = False, slots: int = 2, deadline: float | None = None
               ) -> tuple[ScoreOutcome, TokenUse]:
    use = TokenUse()
    budget = budget if budget is not None else Budget()
    endpoint = Endpoint("http://judge", slots=slots)
    request = ScoreRequest(query="q", documents=docs, deadline=deadline)

    async def run(batch: list[int], ends: float) -> ScoreOutcome:
        sub = ScoreRequest(query="q", documents=[docs[i] for i in batch], deadline=ends)
        return await spread(costly.scorer(), sub, [endpoint])

    async def main() -> ScoreOutcome:
        return await judge_in_rounds(run, request.documents, range(len(docs)), PREFIX,
                                     slots, budget, cascade, use, lambda *_: None,
                                     deadline=deadline if deadline is not None else math.inf)

    return asyncio.run(main()), use


# --- what a budget reads ------------------------------------------------------------------


@pytest.mark.parametrize(("text", "tokens", "seconds"), [
    ("2000", 2000, None), ("2000t", 2000, None), ("1500 tokens", 1500, None),
    ("20s", None, 20.0), ("2.5 seconds", None, 2.5), ("off", None, None)])
def test_a_budget_is_tokens_by_default_or_seconds_with_an_s(text: str, tokens: int | None,
                                                             seconds: float | None) -> None:
    assert parse_budget(text) == Budget(tokens, seconds)


@pytest.mark.parametrize("text", ["lots", "-5", "1.5", "20m", "0s", "2000 tokens please", "",
                                  "  "])
def test_a_budget_that_is_neither_tokens_nor_seconds_is_an_error_naming_the_flag(
        text: str) -> None:
    with pytest.raises(ConfigError, match="--budget"):
        parse_budget(text)


@pytest.mark.parametrize("text", ["9" * 400, "9" * 400 + "s", "9" * 5000])
def test_a_budget_too_large_for_a_number_is_an_error_naming_the_flag_not_a_crash(
        text: str) -> None:
    with pytest.raises(ConfigError, match="--budget"):
        parse_budget(text)


@pytest.mark.parametrize("text", ["\u0662\u0660\u0660\u0660", "\uff12\uff10s",
                                  "2\u0660\u0660"])
def test_a_budget_in_digits_other_than_ascii_is_an_error(text: str) -> None:
    # "٢٠٠٠" read as 2000 is a number the person cannot check against what they typed
    with pytest.raises(ConfigError, match="--budget"):
        parse_budget(text)


def test_a_large_token_budget_is_kept_exactly_not_rounded_through_a_float() -> None:
    assert parse_budget("9007199254740993") == Budget(tokens=9007199254740993)


# --- the rounds ---------------------------------------------------------------------------


def test_without_a_budget_every_document_is_judged_and_its_cost_summed() -> None:
    costly = Costly()

    outcome, use = run_rounds(costly, documents(6))

    assert sorted(outcome.scores) == list(range(6)) and use.stopped is None
    # each document: 100 prefix tokens + 202 of its own; the two slots read the prefix
    # once each, the other four prompts take it from the cache
    assert use.prompt == 6 * (100 + 202)
    assert use.cached == 4 * 100
    assert use.read == use.prompt - use.cached
    assert use.unjudged == 0 and use.saved == 0


def test_a_token_budget_stops_before_the_round_that_would_pass_it() -> None:
    costly = Costly()

    outcome, use = run_rounds(costly, documents(10), Budget(tokens=1000))

    assert use.read <= 1000
    judged = len(outcome.scores)
    assert 0 < judged < 10
    assert costly.asked == [str(i) for i in range(judged)]  # in head order
    assert use.unjudged == 10 - judged and use.saved > 0
    assert "budget of 1000 prompt tokens" in (use.stopped or "")
    assert outcome.stopped is None  # a planned stop, not a fault


def test_a_budget_smaller_than_one_prompt_judges_nothing_and_says_so() -> None:
    outcome, use = run_rounds(Costly(), documents(4), Budget(tokens=50))

    assert outcome.scores == {}
    assert use.unjudged == 4 and "budget of 50" in (use.stopped or "")


def test_the_cascade_stops_after_its_first_passages_when_one_has_a_clear_yes() -> None:
    costly = Costly({"1": 0.93})

    outcome, use = run_rounds(costly, documents(12), cascade=True)

    assert sorted(outcome.scores) == list(range(CASCADE_FIRST))
    assert use.unjudged == 12 - CASCADE_FIRST
    assert "clear yes" in (use.stopped or "")


def test_the_cascade_goes_on_while_no_passage_has_a_clear_yes() -> None:
    costly = Costly({"9": 0.9})

    outcome, use = run_rounds(costly, documents(12), cascade=True)

    # rounds of two after the first four: the yes of document 9 ends the round 8-9
    assert sorted(outcome.scores) == list(range(10))
    assert use.unjudged == 2


def test_the_cascade_judges_the_whole_head_when_no_yes_comes() -> None:
    outcome, use = run_rounds(Costly(), documents(9), cascade=True)

    assert sorted(outcome.scores) == list(range(9)) and use.stopped is None


def test_a_seconds_budget_bounds_the_round_in_flight_and_keeps_what_came() -> None:
    costly = Costly(delay=0.4)  # the first round alone takes 0.8 s

    started = time.monotonic()
    outcome, use = run_rounds(costly, documents(40), Budget(seconds=0.5),
                              deadline=time.monotonic() + 60)

    assert time.monotonic() - started < 5  # the budget, not the 60 s deadline
    assert sorted(outcome.scores) == [0]  # the verdict that came before the budget's end
    assert use.stopped == "the budget of 0.5 s was reached"
    assert outcome.stopped is None  # planned: not degraded


def test_a_server_that_does_not_count_tokens_gets_an_estimate_marked_as_one() -> None:
    outcome, use = run_rounds(Costly(counts=False), documents(3))

    assert len(outcome.scores) == 3
    assert use.estimated == 3 and use.prompt > 0


class Lying(Costly):
    """A server whose counts are broken: each verdict reports these prompt and cached
    tokens whatever it read."""

    def __init__(self, prompt: int, cached: int) -> None:
        super().__init__()
        self.reported = (prompt, cached)

    async def score(self, request: ScoreRequest) -> AsyncIterator[DocumentScore]:
        for i, doc in enumerate(request.documents):
            self.asked.append(doc.id)
            yield DocumentScore(i, 0.3, prompt_tokens=self.reported[0],
                                cached_tokens=self.reported[1])


@pytest.mark.parametrize(("prompt", "cached"), [(-100_000, 0), (300, -100_000),
                                                (-5, -100_000)])
def test_a_server_reporting_negative_token_counts_does_not_lift_the_token_budget(
        prompt: int, cached: int) -> None:
    # a negative count would make what was read go down, and the budget never be reached
    outcome, use = run_rounds(Lying(prompt, cached), documents(40), Budget(tokens=1000))

    assert 0 < len(outcome.scores) < 40
    assert use.prompt >= 0 and use.cached >= 0 and 0 <= use.read
    assert "budget of 1000 prompt tokens" in (use.stopped or "")


def test_a_seconds_budget_does_not_start_a_round_its_pace_says_would_pass_it() -> None:
    costly = Costly(delay=0.15)  # two passages a round: 0.3 s a round

    outcome, use = run_rounds(costly, documents(20), Budget(seconds=0.8),
                              deadline=time.monotonic() + 60)

    # two rounds fit 0.8 s; the third would end at about 0.9 s and is not started, so no
    # verdict is lost to a round cut off in flight
    assert len(outcome.scores) == 4
    assert "would be passed by the next round" in (use.stopped or "")
    assert costly.asked == [str(i) for i in range(4)]


def test_the_deadline_passing_in_a_round_is_a_fault_counted_over_the_whole_head() -> None:
    costly = Costly(delay=0.3)

    outcome, use = run_rounds(costly, documents(10), cascade=True,
                              deadline=time.monotonic() + 1.0)

    assert outcome.fault == "deadline" and use.stopped is None
    assert outcome.stopped == (f"the deadline passed after {len(outcome.scores)} of 10 "
                               "documents were scored")


class SlowTokenizer:
    """A client whose tokenize endpoint answers only after ``delay`` seconds."""

    def __init__(self, delay: float) -> None:
        self.delay = delay

    async def tokenize(self, endpoint: Endpoint, text: str) -> list[int]:
        await asyncio.sleep(self.delay)
        return list(range(len(text) // 3))


class Prompt:
    def render_completion(self, query: str, document: str) -> str:
        return "Query: " + query + "\nDocument:\n" + document


def test_a_seconds_budget_is_a_total_that_counts_the_prefix_tokenize_too() -> None:
    # tokens and seconds both set: the tokenize that sizes the token budget is part of the
    # seconds the query's judge may take, not spent before the seconds budget's clock starts
    import dataclasses as dc

    from slm_rerank.config import Settings
    from slm_rerank.model.asking import run_scorer
    from slm_rerank.model.progress import Progress

    docs = documents(6)
    endpoint = Endpoint("http://judge", slots=2)
    request = ScoreRequest(query="q", documents=docs, endpoint=endpoint,
                           profile=Prompt(),  # type: ignore[arg-type]
                           client=SlowTokenizer(20.0), deadline=time.monotonic() + 60)
    settings = dc.replace(Settings(), budget_tokens=100_000, budget_seconds=0.5)
    use = TokenUse()

    started = time.monotonic()
    prefix = Prompt().render_completion("q", "").ljust(PREFIX)
    asyncio.run(run_scorer(Costly().scorer(), request, [endpoint], True, settings, use, prefix,
                       Progress(len(docs), stream=None)))

    assert time.monotonic() - started < 5  # 10x the budget, far below the 20 s tokenize
    assert use.stopped is not None and "0.5 s" in use.stopped


@pytest.mark.parametrize("given, expected", [("off", (None, None)), ("20s", (None, 20.0)),
                                             ("500", (500, None))])
def test_a_budget_flag_replaces_the_configured_budget(
        given: str, expected: tuple[int | None, float | None], tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    # "--budget off" lifts the user's budget_tokens; "--budget 20s" is the budget, not an
    # addition to the configured tokens
    from search_fixtures import isolate, user_config

    from slm_rerank.host import Host
    from slm_rerank.overrides import overrides

    isolate(monkeypatch, tmp_path)
    user_config().write_text("budget_tokens = 60\n")

    settings = Host.from_environment(start=tmp_path, flags=overrides(budget=given)).settings

    assert (settings.budget_tokens, settings.budget_seconds) == expected
