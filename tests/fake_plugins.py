"""Plugins that tests register by hand, without entry points."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import slm_rerank
from slm_rerank.registrations import (
    CandidateSource,
    ModelProfile,
    OutputFormatter,
    QueryExpander,
    Scorer,
    SourceHits,
    SourceQuery,
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
                               lambda q: ["backoff"] if "retry" in q else []))


class Profiles:
    @slm_rerank.hookimpl
    def register_model_profiles(self, register: Callable[[ModelProfile], None]) -> None:
        register(ModelProfile("raw", "two-shot raw completion",
                              template="{instruction}\nQuery: {query}\nDoc: {document}\nRelevant:",
                              yes_words=(" yes",), no_words=(" no",), claims=(r"gemma",)))


class Scorers:
    @slm_rerank.hookimpl
    def register_scorers(self, register: Callable[[Scorer], None]) -> None:
        register(Scorer("overlap", "word overlap",
                        lambda query, documents, **_: [
                            1.0 if set(query.split()) & set(d.split()) else 0.0
                            for d in documents]))


class WrongType:
    @slm_rerank.hookimpl
    def register_scorers(self, register: Callable[[Scorer], None]) -> None:
        register("not a scorer")  # type: ignore[arg-type]
