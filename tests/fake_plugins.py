"""Plugins that tests register by hand, without entry points."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import slm_rerank_openai

import slm_rerank
from slm_rerank.config import Settings
from slm_rerank.host import Host
from slm_rerank.registrations import (
    CandidateSource,
    DocumentScore,
    ModelProfile,
    OutputFormatter,
    QueryExpander,
    Scorer,
    ScoreRequest,
    SourceHits,
    SourceQuery,
    Turn,
    WeightedTerm,
)


class Formats:
    @slm_rerank.hookimpl
    def register_output_formatters(self, register: Callable[[OutputFormatter], None]) -> None:
        register(OutputFormatter("paths", "one path per line",
                                 lambda report, tty=False: "".join(
                                     c.path + "\n" for c in report.results)))


class SameFormatAgain:
    @slm_rerank.hookimpl
    def register_output_formatters(self, register: Callable[[OutputFormatter], None]) -> None:
        register(OutputFormatter("paths", "also paths", lambda report, tty=False: ""))


class RaisesWhileRegistering:
    @slm_rerank.hookimpl
    def register_output_formatters(self, register: Callable[[OutputFormatter], None]) -> None:
        raise ValueError("boom")


class Sources:
    @slm_rerank.hookimpl
    def register_candidate_sources(self, register: Callable[[CandidateSource], None]) -> None:
        def search(query: SourceQuery) -> SourceHits:
            return SourceHits(files=["a.py"], body_counts={"a.py": {t: 1 for t in query.terms}})

        def unavailable(root: Path) -> str | None:
            return None

        register(CandidateSource("fixed", "always a.py", unavailable, search))


class Expanders:
    @slm_rerank.hookimpl
    def register_query_expanders(self, register: Callable[[QueryExpander], None]) -> None:
        register(QueryExpander("synonyms", "retry -> backoff",
                               lambda request: [WeightedTerm("backoff", 0.5)]
                               if "retr" in request.query else [],
                               needs_endpoint=False))


RAW_PROFILE = ModelProfile(
    "raw", "two-shot raw completion for a base model",
    instruction="Answer yes or no: is the document relevant to the query?",
    completion="{instruction}\nQuery: {query}\nDocument: {document}\nRelevant:",
    chat=(Turn("system", "{instruction}"),
          Turn("user", "Query: {query}\nDocument: {document}")),
    yes_words=(" yes",), no_words=(" no",), claims=(r"gemma",), judge_weight=0.3)


class Profiles:
    @slm_rerank.hookimpl
    def register_model_profiles(self, register: Callable[[ModelProfile], None]) -> None:
        register(RAW_PROFILE)
        register(dataclasses.replace(RAW_PROFILE, name="raw-it", claims=(r"gemma-\d.*-it",),
                                     judge_weight=1.0))


async def _overlap(request: ScoreRequest) -> AsyncIterator[DocumentScore]:
    words = set(request.query.split())
    for i, doc in enumerate(request.documents):
        await asyncio.sleep(0)
        yield DocumentScore(i, 1.0 if words & set(doc.text.split()) else 0.0)


class Scorers:
    @slm_rerank.hookimpl
    def register_scorers(self, register: Callable[[Scorer], None]) -> None:
        register(Scorer("overlap", "word overlap", _overlap, needs_endpoint=False))


class WrongType:
    @slm_rerank.hookimpl
    def register_scorers(self, register: Callable[[Scorer], None]) -> None:
        register("not a scorer")  # type: ignore[arg-type]


class LengthJudge:
    """P(relevant) from a document's length (longer is better), without a server; it
    records the texts it was asked about."""

    seen: list[str] = []

    @staticmethod
    @slm_rerank.hookimpl
    def register_scorers(register: Callable[[Scorer], None]) -> None:
        async def score(request: ScoreRequest) -> AsyncIterator[DocumentScore]:
            LengthJudge.seen.extend([request.query, *(d.text for d in request.documents)])
            for i, document in enumerate(request.documents):
                yield DocumentScore(i, min(len(document.text) / 100, 1.0))

        register(Scorer("length", "longer is better", score, needs_endpoint=False))


def length_host() -> Host:
    settings = dataclasses.replace(Settings(), scorer="length", score_cache=False)
    return Host.with_plugins(settings, LengthJudge, slm_rerank_openai)
