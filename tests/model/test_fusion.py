"""Fusion: the model's verdict moves the lexical order by the judge's weight, no further."""

from __future__ import annotations

import pytest

from slm_rerank.model.fusion import Z_CLIP, fuse_scores, logit, sigmoid, standardise
from slm_rerank.model.passages import cut_lines


def test_without_a_spread_lexical_scores_say_nothing() -> None:
    # five chunks within a point of each other on the 0-100 scale: noise, z stays near 0
    assert all(abs(z) < 0.4 for z in standardise([100.0, 99.5, 99.2, 99.0, 98.8]))


def test_z_is_clipped() -> None:
    zs = standardise([100.0] + [0.1] * 50)
    assert zs[0] == Z_CLIP


def test_a_strong_judge_overrules_a_small_lexical_lead() -> None:
    lexical = [10.0, 9.0, 8.0]
    fused = fuse_scores(lexical, {0: 0.05, 1: 0.95, 2: 0.5}, weight=1.0)
    assert [f.index for f in fused] == [1, 2, 0]


def test_a_weak_judge_only_nudges_the_lexical_order() -> None:
    lexical = [10.0, 6.0, 2.0]
    fused = fuse_scores(lexical, {0: 0.3, 1: 0.7, 2: 0.9}, weight=0.25)
    assert [f.index for f in fused] == [0, 1, 2]


def test_scored_chunks_rank_above_the_unscored_tail_which_keeps_its_order() -> None:
    fused = fuse_scores([9.0, 8.0, 7.0, 6.0], {2: 0.01, 3: 0.02}, weight=1.0)
    assert [f.index for f in fused] == [2, 3, 0, 1]
    assert [f.model for f in fused[2:]] == [None, None]
    assert fused[2].score == 0.0


@pytest.mark.parametrize("p", [0.0, 1.0, 0.5, 1e-12])
def test_logit_and_sigmoid_are_finite_at_the_edges(p: float) -> None:
    assert 0.0 <= sigmoid(logit(p)) <= 1.0


def test_a_long_chunk_is_cut_around_its_best_matching_lines() -> None:
    lines = [f"line {i} filler filler filler" for i in range(200)]
    lines[150] = "def retry_backoff(): return RETRY"
    text, cut = cut_lines(lines, ["retry", "backoff"], budget=300)
    assert cut and "retry_backoff" in text and len(text) <= 300
    assert "line 0 " not in text


def test_a_short_chunk_is_sent_whole() -> None:
    assert cut_lines(["a", "b"], ["a"], budget=300) == ("a\nb", False)


def test_a_long_chunk_needs_a_surer_verdict_than_a_short_one() -> None:
    # equal lexical evidence, equal verdicts: the chunk eight times the reference loses
    fused = fuse_scores([5.0, 5.0], {0: 0.7, 1: 0.7}, weight=1.0,
                        lengths={0: 3200, 1: 300}, exponent=0.12)
    assert [f.index for f in fused] == [1, 0]
    assert fused[0].model == fused[1].model == 0.7  # the reported model score stays raw
    unnormalised = fuse_scores([5.0, 5.0], {0: 0.7, 1: 0.7}, weight=1.0,
                               lengths={0: 3200, 1: 300}, exponent=0.0)
    assert unnormalised[0].score == unnormalised[1].score


def test_a_long_query_and_chunks_are_cut_to_fit_a_small_context() -> None:
    from fake_plugins import RAW_PROFILE

    from slm_rerank.model.passages import Passage, fit_context
    from slm_rerank.registrations import Endpoint

    code = "\n".join(f"line {i} " + "x" * 40 for i in range(100))
    passages = [Passage("a.py", 1, 100, None, code)]
    small = Endpoint("http://s:1", "llama.cpp", "m", 1, context_tokens=512)
    notes: list[str] = []

    asked, fitted = fit_context("retry " * 2000, passages, small, RAW_PROFILE, notes)

    prompt = RAW_PROFILE.render_completion(asked, fitted[0].document(0).text)
    assert len(prompt) <= 512 * 3
    assert asked.startswith("retry retry") and fitted[0].cut
    assert any("query was cut" in n for n in notes) and any("chunks were cut" in n
                                                             for n in notes)
    # a server that does not say its context gets the passages as they are
    assert fit_context("q", passages, Endpoint("http://s:1"), RAW_PROFILE, []) == (
        "q", passages)


def test_the_head_takes_the_best_chunk_of_each_leading_file_first() -> None:
    from slm_rerank.lexical.chunking import Chunk
    from slm_rerank.lexical.scores import ScoredChunk
    from slm_rerank.pipeline import Ranked, head

    ranked = Ranked([ScoredChunk(path, Chunk(i + 1, i + 1), 10.0 - i, [])
                     for i, path in enumerate(["a.py", "a.py", "b.py", "c.py", "b.py"])])
    assert head(ranked, 4) == [0, 2, 3, 1]
    assert head(ranked, 16) == [0, 2, 3, 1, 4]
