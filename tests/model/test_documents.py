"""The documents API: any documents, any scorer, the caller's objects back with signals;
what a careless caller passes is judged with a warning or refused saying what to pass."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
import slm_rerank_openai
from fake_plugins import LengthJudge, length_host

import slm_rerank
from slm_rerank.config import Settings
from slm_rerank.errors import TransientError
from slm_rerank.host import Host
from slm_rerank.registrations import DocumentScore, PluginOption, Scorer, ScoreRequest
from slm_rerank.rrf import fuse


class KeywordJudge:
    """A scorer plugin without a server: P(relevant) from how often the document says
    "rotate"; documents saying "flaky" make it fail as a server would."""

    seen: list[list[str]] = []

    @staticmethod
    @slm_rerank.hookimpl
    def register_scorers(register: Callable[[Scorer], None]) -> None:
        async def score(request: ScoreRequest) -> AsyncIterator[DocumentScore]:
            KeywordJudge.seen.append([d.text for d in request.documents])
            for i, document in enumerate(request.documents):
                if "flaky" in document.text:
                    raise TransientError("the judge's server went away", "http://judge")
                hits = document.text.lower().count("rotate")
                yield DocumentScore(i, min(0.2 + 0.3 * hits, 1.0), raw=float(hits))

        register(Scorer("keywords", "counts a word", score, needs_endpoint=False))


def keyword_host(tmp_path: Path) -> Host:
    settings = dataclasses.replace(Settings(), scorer="keywords", score_cache=False)
    return Host.with_plugins(settings, KeywordJudge, slm_rerank_openai)


@dataclasses.dataclass
class LangChainLike:
    """The shape of a LangChain ``Document``: page_content and metadata."""

    page_content: str
    metadata: dict[str, Any]


def test_results_keep_the_callers_objects_and_carry_the_signals(tmp_path: Path) -> None:
    docs: list[Any] = [
        "Billing happens monthly.",
        {"id": "faq-7", "text": "Rotate the key: rotate it in Settings, then rotate clients.",
         "metadata": {"url": "https://example.com/faq#7"}},
        LangChainLike("Keys rotate every 90 days.", {"id": "kb-3"}),
    ]

    result = slm_rerank.rerank_documents("how do I rotate the API key?", docs,
                                         host=keyword_host(tmp_path))

    assert [r.id for r in result] == ["faq-7", "kb-3", "0"]
    best = result[0]
    assert best.document is docs[1]  # the very object, metadata and all
    assert (best.rank, best.index, best.scorer) == (1, 1, "keywords")
    assert best.raw_score == 3.0 and best.score == pytest.approx(1.0)
    assert result[1].document is docs[2] and result[1].score == pytest.approx(0.5)
    assert result.degraded is None


def test_top_n_keeps_the_best_and_text_and_id_functions_read_other_shapes(
        tmp_path: Path) -> None:
    rows = [("a", "nothing here"), ("b", "rotate"), ("c", "rotate rotate")]

    result = slm_rerank.rerank_documents("rotate", rows, top_n=2, host=keyword_host(tmp_path),
                                         text=lambda r: r[1], id=lambda r, i: r[0])

    assert [(r.id, r.rank) for r in result] == [("c", 1), ("b", 2)]


def test_a_failing_judge_degrades_and_says_so_keeping_every_document(tmp_path: Path) -> None:
    docs = ["rotate the key", "flaky mirror", "rotate rotate"]

    result = slm_rerank.rerank_documents("rotate", docs, host=keyword_host(tmp_path))

    assert result.degraded is not None and "went away" in result.degraded
    assert "1 of 3 documents were scored, the rest follow in input order" in result.degraded
    assert len(result) == 3
    judged = [r for r in result if r.score is not None]
    assert [r.index for r in judged] == [0]  # what was judged before the fault, first
    assert [r.index for r in result if r.score is None] == [1, 2]  # then input order


def test_rrf_output_goes_in_as_it_is_and_keeps_its_upstream_score(tmp_path: Path) -> None:
    bm25 = [{"id": "a", "text": "rotate keys", "score": 11.0},
            {"id": "b", "text": "billing", "score": 4.0}]
    vector = [{"id": "b", "text": "billing", "score": 0.9},
              {"id": "c", "text": "rotate rotate", "score": 0.8}]
    merged = fuse([bm25, vector], score=lambda d: d["score"])

    result = slm_rerank.rerank_documents("rotate", merged, host=keyword_host(tmp_path),
                                         id=lambda f, i: str(f.id))

    assert [r.id for r in result] == ["c", "a", "b"]
    assert {r.id: r.upstream_score for r in result} == {"a": 11.0, "b": 4.0, "c": 0.8}


def test_a_nan_upstream_score_is_reported_as_none_with_a_warning(tmp_path: Path) -> None:
    docs = [{"id": "a", "text": "rotate keys", "score": float("nan")},
            {"id": "b", "text": "billing", "score": 2.0},
            {"id": "c", "text": "rotate", "score": float("-inf")}]

    result = slm_rerank.rerank_documents("rotate", docs, host=keyword_host(tmp_path))

    assert {r.index: r.upstream_score for r in result} == {0: None, 1: 2.0, 2: None}
    assert sorted(w for w in result.warnings if "upstream score" in w) == [
        "documents[0] has an upstream score of nan, which is not a finite number: its "
        "upstream_score is None",
        "documents[2] has an upstream score of -inf, which is not a finite number: its "
        "upstream_score is None"]


def test_a_text_or_id_callable_that_gives_no_str_is_a_type_error(tmp_path: Path) -> None:
    host = keyword_host(tmp_path)

    with pytest.raises(TypeError, match=r"documents\[0\]: text=\.\.\. gave int 5, not a str"):
        slm_rerank.rerank_documents("rotate", ["a"], host=host, text=lambda d: 5)
    with pytest.raises(TypeError, match=r"documents\[1\]: id=\.\.\. gave object"):
        slm_rerank.rerank_documents("rotate", ["a", "b"], host=host,
                                    id=lambda d, i: "x" if i == 0 else object())


def test_bad_arguments_are_clear_errors(tmp_path: Path) -> None:
    host = keyword_host(tmp_path)
    with pytest.raises(ValueError, match="query must be a non-empty string"):
        slm_rerank.rerank_documents("  ", ["x"], host=host)
    with pytest.raises(TypeError, match="documents must be a list"):
        slm_rerank.rerank_documents("q", "just one string", host=host)
    with pytest.raises(TypeError, match="has no text"):
        slm_rerank.rerank_documents("q", [{"body": "x"}], host=host)
    with pytest.raises(ValueError, match="top_n must be a positive integer"):
        slm_rerank.rerank_documents("q", ["x"], top_n=0, host=host)
    assert len(slm_rerank.rerank_documents("q", [], host=host)) == 0


def test_inside_a_running_loop_the_sync_call_says_to_await(tmp_path: Path) -> None:
    async def main() -> None:
        with pytest.raises(RuntimeError, match="await slm_rerank.arerank_documents"):
            slm_rerank.rerank_documents("q", ["x"], host=keyword_host(tmp_path))
        result = await slm_rerank.arerank_documents("rotate", ["rotate"],
                                                    host=keyword_host(tmp_path))
        assert result[0].score == pytest.approx(0.5)

    asyncio.run(main())


class WeightedJudge:
    """A cacheable scorer with a setting that changes its verdicts."""

    calls = 0

    @staticmethod
    @slm_rerank.hookimpl
    def register_scorers(register: Callable[[Scorer], None]) -> None:
        async def score(request: ScoreRequest) -> AsyncIterator[DocumentScore]:
            WeightedJudge.calls += 1
            for i, _ in enumerate(request.documents):
                yield DocumentScore(i, float(request.options["weight"]))

        register(Scorer("weighted", "says its weight", score, needs_endpoint=False,
                        options=(PluginOption("weight", 0.5, "the verdict"),)))


def test_a_scorer_setting_is_part_of_the_score_cache_key(tmp_path: Path) -> None:
    def run(weight: float) -> float | None:
        settings = dataclasses.replace(Settings(), scorer="weighted", score_cache=True,
                                       plugins={"weighted": {"weight": weight}})
        host = Host.with_plugins(settings, WeightedJudge, slm_rerank_openai)
        return slm_rerank.rerank_documents("q", ["doc"], host=host)[0].score

    WeightedJudge.calls = 0
    assert run(0.25) == 0.25
    assert run(0.25) == 0.25 and WeightedJudge.calls == 1  # answered from the cache
    assert run(0.75) == 0.75 and WeightedJudge.calls == 2  # a new setting: judged again


class PoolJudge:
    """Judges the first document and, as a rerank API beyond its pool, leaves the rest
    unsent with a score below it."""

    @staticmethod
    @slm_rerank.hookimpl
    def register_scorers(register: Callable[[Scorer], None]) -> None:
        async def score(request: ScoreRequest) -> AsyncIterator[DocumentScore]:
            yield DocumentScore(0, 0.8)
            for i in range(1, len(request.documents)):
                yield DocumentScore(i, 0.4, note="not sent: beyond the pool of 1")

        register(Scorer("pool", "a pool of one", score, needs_endpoint=False,
                        per_document=False))


def test_documents_beyond_a_scorers_pool_are_named_in_the_warnings(tmp_path: Path) -> None:
    settings = dataclasses.replace(Settings(), scorer="pool", score_cache=False)
    host = Host.with_plugins(settings, PoolJudge, slm_rerank_openai)

    result = slm_rerank.rerank_documents("q", ["a", "b", "c"], host=host)

    assert result.degraded is None
    assert "2 of 3 documents were beyond the scorer's pool and not sent" in result.warnings[0]
    assert [r.note for r in result][1:] == ["not sent: beyond the pool of 1"] * 2


def test_a_document_with_a_lone_surrogate_hashes() -> None:
    from slm_rerank.registrations import Document

    assert Document.of("1", "broken \ud800 text").content_hash


# --- odd input (a judge of document length) ---------------------------------------------


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


class InstructionRecorder:
    """A scorer without a server that records the instruction its profile asks with."""

    seen: list[str] = []

    @staticmethod
    @slm_rerank.hookimpl
    def register_scorers(register: Callable[[Scorer], None]) -> None:
        async def score(request: ScoreRequest) -> AsyncIterator[DocumentScore]:
            assert request.profile is not None
            InstructionRecorder.seen.append(request.profile.instruction)
            for i, _ in enumerate(request.documents):
                yield DocumentScore(i, 0.5)

        register(Scorer("recorder", "records the instruction", score, needs_endpoint=False))


def test_an_instruction_replaces_the_profiles_and_is_part_of_the_cache_key(
        tmp_path: Path) -> None:
    settings = dataclasses.replace(Settings(), scorer="recorder", score_cache=True,
                                   cache_dir=str(tmp_path))
    host = Host.with_plugins(settings, InstructionRecorder, slm_rerank_openai)
    InstructionRecorder.seen.clear()

    slm_rerank.rerank_documents("the claim", ["x = 1"], host=host)
    slm_rerank.rerank_documents("the claim", ["x = 1"], host=host,
                                instruction="Does the code prove the claim? Answer yes or no.")

    relevance = slm_rerank_openai.OPENAI.instruction
    assert InstructionRecorder.seen == [relevance,
                                        "Does the code prove the claim? Answer yes or no."]
