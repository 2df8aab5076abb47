"""What a careless RAG developer or a hostile client sends to the documents API and to
`slm-rerank serve-api`, and what each must get back: a ranking that says what it changed,
or an error that says what to fix; never a traceback, a hang or a silent guess."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator, Callable

import pytest
import slm_rerank_openai

import slm_rerank
from slm_rerank.config import Settings
from slm_rerank.host import Host
from slm_rerank.registrations import DocumentScore, Scorer, ScoreRequest


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


# --- the documents API ---------------------------------------------------------------

def test_lone_surrogates_in_documents_or_query_are_judged_as_replacement_characters() -> None:
    LengthJudge.seen = []
    # json.loads('"\\ud800"') makes such strings: what a JSON body or a bad decode hands over
    docs = ["ab\ud800cd", "plain", "\ud83d\ude00 a pair split in a str"]

    result = slm_rerank.rerank_documents("key\udfff", docs, host=length_host())

    assert len(result) == 3 and all(r.score is not None for r in result)
    assert {id(r.document) for r in result} == {id(d) for d in docs}  # the caller's own
    assert "ab\ufffdcd" in LengthJudge.seen and "key\ufffd" in LengthJudge.seen
    assert "\U0001f600 a pair split in a str" in LengthJudge.seen
    assert any(w.startswith("2 of 3 documents held UTF-16 surrogates") for w in
               result.warnings), result.warnings
    assert any(w.startswith("the query held UTF-16 surrogates") for w in result.warnings)


def test_a_document_cut_to_fit_the_prompt_is_a_warning_of_the_result() -> None:
    result = slm_rerank.rerank_documents("q", ["x" * 10_000_000, "short"], host=length_host())

    assert len(result) == 2
    assert any(w.startswith("1 of 2 documents were cut to their first") for w in
               result.warnings), result.warnings


def test_top_n_true_is_refused_not_read_as_one() -> None:
    with pytest.raises(ValueError, match="top_n must be a positive integer, not True"):
        slm_rerank.rerank_documents("q", ["a", "b"], top_n=True, host=length_host())


def test_metadata_that_is_not_a_mapping_does_not_hide_the_document() -> None:
    docs = [{"text": "a", "metadata": ["tag"]}, {"text": "bb", "metadata": None},
            {"text": "ccc", "metadata": {"id": "m-3"}}]

    result = slm_rerank.rerank_documents("q", docs, host=length_host())

    assert sorted(r.id for r in result) == ["0", "1", "m-3"]


def test_a_generator_of_documents_is_refused_with_what_to_pass() -> None:
    with pytest.raises(TypeError, match=r"not generator; pass list\(documents\)"):
        slm_rerank.rerank_documents("q", (d for d in ["a"]), host=length_host())


def test_an_upstream_score_of_any_real_number_type_is_kept_and_nan_is_none() -> None:
    from fractions import Fraction  # a numbers.Real that is no float, as numpy's float32

    docs = [{"text": "a", "score": Fraction(9, 10)}, {"text": "bb", "score": float("nan")},
            {"text": "ccc", "score": True}]

    result = slm_rerank.rerank_documents("q", docs, host=length_host())

    assert {r.index: r.upstream_score for r in result} == {0: 0.9, 1: None, 2: None}
