"""Fusion: the model's verdict moves the lexical order by the judge's weight, no further."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest
import slm_rerank_ripgrep
from fake_plugins import RAW_PROFILE
from pytest_httpserver import HTTPServer
from search_fixtures import make_repo

import slm_rerank
from slm_rerank.config import Settings
from slm_rerank.errors import ContractError
from slm_rerank.host import Host
from slm_rerank.model.fusion import (
    Z_CLIP,
    apply_verdicts,
    fuse_scores,
    logit,
    sigmoid,
    standardise,
)
from slm_rerank.model.passages import cut_lines
from slm_rerank.model.profiles import ProfileChoice
from slm_rerank.pipeline import SearchRequest, run_search
from slm_rerank.registrations import DocumentScore, ModelProfile, Scorer, ScoreRequest
from slm_rerank.reranker import Reranker


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
    from slm_rerank.lexical.rank import Ranked, head
    from slm_rerank.lexical.scores import ScoredChunk

    ranked = Ranked([ScoredChunk(path, Chunk(i + 1, i + 1), 10.0 - i, [])
                     for i, path in enumerate(["a.py", "a.py", "b.py", "c.py", "b.py"])])
    assert head(ranked, 4) == [0, 2, 3, 1]
    assert head(ranked, 16) == [0, 2, 3, 1, 4]


# --- one fuse-and-threshold for both front doors ------------------------------------------

#: the fixed verdict for each file's chunks; "glyphs.txt" is refused as too long instead
FIXED = {"net/retry.py": 0.15, "net/client.py": 0.95, "net/policy.py": 0.7,
         "docs/retry.md": 0.6, "ui/colour.py": 0.05}
LONG = "\n".join(f"    step_{i} = retry_step({i})" for i in range(60))
FRONT_DOOR_FILES = {
    "net/retry.py": "def retry_backoff():\n    return backoff(retry)\n",
    "net/client.py": f"def send():\n    retry()\n{LONG}\n",
    "net/policy.py": "BACKOFF = 2\nRETRY = 3\n",
    "docs/retry.md": "# Retry\n\nA retry waits with backoff.\n",
    "ui/colour.py": "RED = 1  # no retry here\n",
    "glyphs.txt": "retry backoff glyphs\n",
}


class FixedVerdicts:
    """A scorer that needs no server: each file's chunks get ``FIXED``'s verdict, and a
    chunk of glyphs.txt is refused with llama-server's recorded over-context message."""

    @staticmethod
    @slm_rerank.hookimpl
    def register_scorers(register: Callable[[Scorer], None]) -> None:
        wire = Path(__file__).resolve().parents[1] / "fixtures" / "wire"
        recorded = json.loads((wire / "llamacpp-completion-too-long.json").read_text())
        said = recorded["exchanges"][0]["response"]["error"]["message"]

        async def score(request: ScoreRequest) -> AsyncIterator[DocumentScore]:
            if any(d.metadata["path"] == "glyphs.txt" for d in request.documents):
                raise ContractError("model server http://127.0.0.1:1/completion rejected "
                                    f"the request with HTTP 400: {said}")
            for i, document in enumerate(request.documents):
                yield DocumentScore(i, FIXED[str(document.metadata["path"])])

        register(Scorer("fixed", "fixed verdicts by file", score, needs_endpoint=False))

    @staticmethod
    @slm_rerank.hookimpl
    def register_model_profiles(register: Callable[[ModelProfile], None]) -> None:
        # a weight below 1 and a length exponent: a door that fused without the profile's
        # would order and cut differently
        register(dataclasses.replace(RAW_PROFILE, name="weighted", judge_weight=0.4,
                                     length_exponent=0.3))


@pytest.mark.parametrize("threshold", [0.0, 0.35])
def test_a_search_and_the_reranker_keep_the_same_fused_order_and_threshold_cut(
        tmp_path: Path, threshold: float) -> None:
    repo = make_repo(tmp_path / "repo", FRONT_DOOR_FILES)
    # the fixed first-stage order: the fixture's verdicts are set against it (the learned
    # ranker feeds fusion the same way, through the chunks' scores)
    settings = dataclasses.replace(Settings(), scorer="fixed", model="weighted", full=True,
                                   score_cache=False, threshold=threshold, chunks=True,
                                   top_k=100, learned_order=False)
    host = Host.with_plugins(settings, FixedVerdicts, slm_rerank_ripgrep)

    def asked(fast: bool) -> SearchRequest:
        return SearchRequest(query="retry backoff", root=repo.resolve(), fast=fast)

    lexical = run_search(asked(fast=True), host)
    searched = run_search(asked(fast=False), host)
    reranked = Reranker(plugin_host=host).rerank_sync("retry backoff", lexical)

    assert searched.degraded is None and reranked.degraded is None
    by_search = [(c.path, c.start_line, c.end_line, round(c.score, 9))
                 for c in searched.results]
    by_reranker = [(r.path, r.start_line, r.end_line, round(r.score, 9)) for r in reranked]
    assert by_search == by_reranker
    # the case is one where fusion and the cut matter: the model's order is not the
    # lexical one; the refused chunk (no verdict) is kept in both, after the judged ones
    paths = [p for p, *_ in by_search]
    assert paths[-1] == "glyphs.txt" and searched.results[-1].model_score is None
    judged = paths[:-1]
    assert judged != [c.path for c in lexical.results if c.path in judged]
    if threshold:
        assert 0 < len(judged) < len(FIXED), "the threshold should cut some judged chunks"
        # on the judge's own scale, not the fused score
        assert all(c.model_score is not None and c.model_score >= threshold
                   for c in searched.results[:-1])
    else:
        assert sorted(judged) == sorted(FIXED)


def test_apply_verdicts_places_the_heads_verdicts_in_the_ranking_and_cuts_below_threshold(
        ) -> None:
    from slm_rerank.model.stage import Judgement

    # a head of two chunks, judged as documents 0 and 1, that sit at 2 and 0 of the ranking
    judgement = Judgement(scores={0: DocumentScore(0, 0.99), 1: DocumentScore(1, 0.01,
                                                                           bounded="yes")})

    verdicts = apply_verdicts([9.0, 8.0, 7.0], judgement, Settings(), threshold=0.5, at=[2, 0])

    # the judged chunk the judge said no to is cut; the unjudged one (1) is kept after
    assert [f.index for f in verdicts.kept] == [2, 1]
    assert verdicts.kept[1].model is None
    assert (verdicts.judged, verdicts.dropped) == (2, 1)
    assert verdicts.best == 0.99


def test_the_threshold_is_on_the_judges_scale_not_the_fused_score() -> None:
    from slm_rerank.model.stage import Judgement

    # the judge says yes (0.7) to a chunk the lexical order puts last: its fused score
    # sinks below 0.65 with the lexical z, and it must still be kept at a threshold of 0.65
    judgement = Judgement(scores={0: DocumentScore(0, 0.2), 1: DocumentScore(1, 0.9),
                                  2: DocumentScore(2, 0.7)})

    verdicts = apply_verdicts([100.0, 95.0, 1.0], judgement, Settings(), threshold=0.65)

    kept = {f.index: f for f in verdicts.kept}
    assert set(kept) == {1, 2}
    assert kept[2].score < 0.65 <= (kept[2].model or 0)


def test_no_threshold_drops_nothing_and_keeps_the_unjudged_tail_in_lexical_order() -> None:
    from slm_rerank.model.stage import Judgement

    judgement = Judgement(scores={0: DocumentScore(0, 0.01), 1: DocumentScore(1, 0.99)})

    verdicts = apply_verdicts([9.0, 8.0, 7.0, 6.0], judgement, Settings(), threshold=None)

    assert [f.index for f in verdicts.kept] == [1, 0, 2, 3]
    assert verdicts.dropped == 0


def test_the_file_kind_prior_keeps_a_test_below_source_the_judge_likes_as_much() -> None:
    from slm_rerank.model.fusion import fuse_scores

    # equal lexical scores and equal verdicts: only the prior of chunk 0 (a test) differs
    fused = fuse_scores([50.0, 50.0], {0: 0.8, 1: 0.8}, 1.0, priors={0: -0.69, 1: 0.0})

    assert [f.index for f in fused] == [1, 0]
    assert fused[1].prior == -0.69 and fused[0].prior == 0.0


def test_apply_verdicts_keeps_every_chunk_of_a_degraded_run_judged_first() -> None:
    from slm_rerank.model.stage import Judgement

    judgement = Judgement(scores={1: DocumentScore(1, 0.01, bounded="yes")},
                          degraded="the server stopped answering")

    verdicts = apply_verdicts([9.0, 8.0, 7.0], judgement, Settings(), threshold=0.99)

    assert [(f.index, f.bounded) for f in verdicts.kept] == [(1, "yes"), (0, None), (2, None)]
    assert verdicts.judged is None and verdicts.dropped == 0


def test_a_profile_with_a_short_query_weight_uses_it_for_one_line_queries_only() -> None:
    from slm_rerank.model.fusion import profile_weight

    profile = dataclasses.replace(RAW_PROFILE, judge_weight=1.0, short_query_weight=0.1)
    issue = "Title of the issue\n\n" + "What happened, at length, with the steps. " * 10

    assert profile_weight(profile, "where are redirects resolved") == 0.1
    assert profile_weight(profile, issue) == 1.0
    assert profile_weight(dataclasses.replace(profile, short_query_weight=None),
                        "where are redirects resolved") == 1.0
    assert profile_weight(None, "anything") == 1.0


def test_a_title_moves_the_order_less_than_a_whole_issue_with_the_same_verdicts() -> None:
    from slm_rerank.model.stage import Judgement

    profile = dataclasses.replace(RAW_PROFILE, judge_weight=1.0, short_query_weight=0.1)
    judgement = Judgement(scores={0: DocumentScore(0, 0.3), 1: DocumentScore(1, 0.95)},
                          profile=ProfileChoice(profile, "asked for"))
    issue = "Title of the issue\n\n" + "What happened, at length, with the steps. " * 10

    title = apply_verdicts([100.0, 80.0], judgement, Settings(), threshold=None,
                           query="retry backoff fails")
    whole = apply_verdicts([100.0, 80.0], judgement, Settings(), threshold=None, query=issue)

    assert [f.index for f in title.kept] == [0, 1]
    assert [f.index for f in whole.kept] == [1, 0]


# --- a measured weight reaches every front door -------------------------------------------

#: the model id the fake server names, and the weight the user measured for it
MEASURED_MODEL = "org/measured-judge"
NOTES_FILE = "src/bababa_notes.py"
IMPL_FILE = "src/bababa_impl.py"
MEASURED_FILES = {
    # the decoy repeats the query's words: the lexical order puts it first
    NOTES_FILE: "# bababa zorblax widget\nNOTES = 'bababa zorblax'\n" * 4,
    IMPL_FILE: "def run():\n    return 'zorblax'\n",
}


class ByText:
    """A scorer of a real server's model (it needs the endpoint discovery found): no to the
    notes file, yes to the implementation, read from the text it is given."""

    @staticmethod
    @slm_rerank.hookimpl
    def register_scorers(register: Callable[[Scorer], None]) -> None:
        async def score(request: ScoreRequest) -> AsyncIterator[DocumentScore]:
            assert request.endpoint is not None
            for i, document in enumerate(request.documents):
                yield DocumentScore(i, 0.1 if "NOTES" in document.text else 0.9)

        register(Scorer("by-text", "no to notes, yes to the rest", score))

    @staticmethod
    @slm_rerank.hookimpl
    def register_model_profiles(register: Callable[[ModelProfile], None]) -> None:
        # the profile weighs its judge's verdicts 0: alone, the lexical order stands
        register(dataclasses.replace(RAW_PROFILE, name="unweighted", judge_weight=0.0,
                                     length_exponent=0.0))


def test_a_measured_weight_orders_the_search_the_reranker_and_documents_alike(
        tmp_path: Path, httpserver: HTTPServer) -> None:
    wire = Path(__file__).resolve().parents[1] / "fixtures" / "wire"
    models = json.loads((wire / "vllm-v1-models.json").read_text(encoding="utf-8"))
    models["data"][0]["id"] = models["data"][0]["root"] = MEASURED_MODEL
    httpserver.expect_request("/v1/models").respond_with_json(models)
    httpserver.expect_request("/props").respond_with_data("Not Found", status=404)
    httpserver.expect_request("/api/version").respond_with_data("Not Found", status=404)
    httpserver.expect_request("/tokenize").respond_with_json(
        json.loads((wire / "vllm-tokenize.json").read_text(encoding="utf-8")))
    repo = make_repo(tmp_path / "repo", MEASURED_FILES)
    settings = dataclasses.replace(
        Settings(), endpoints=[httpserver.url_for("/").rstrip("/")], scorer="by-text",
        model="unweighted", score_cache=False, cascade=False,
        judge_weights={MEASURED_MODEL: 4.0},
        origins={"judge_weights": "user: /u/config.toml"})
    host = Host.with_plugins(settings, ByText, slm_rerank_ripgrep)
    query = "bababa zorblax widget"

    def asked(fast: bool) -> SearchRequest:
        return SearchRequest(query=query, root=repo.resolve(), fast=fast)

    lexical = run_search(asked(fast=True), host)
    searched = run_search(asked(fast=False), host)
    reranked = Reranker(plugin_host=host).rerank_sync(query, lexical)
    documents = slm_rerank.rerank_documents(
        query, [MEASURED_FILES[c.path] for c in lexical.results], host=host)

    assert [c.path for c in lexical.results] == [NOTES_FILE, IMPL_FILE]
    assert searched.degraded is None and reranked.degraded is None
    assert documents.degraded is None
    # the measured weight lets the verdicts overrule the lexical order at every door
    assert [c.path for c in searched.results] == [IMPL_FILE, NOTES_FILE]
    assert [r.path for r in reranked] == [IMPL_FILE, NOTES_FILE]
    assert [lexical.results[d.index].path for d in documents.results] == [IMPL_FILE,
                                                                          NOTES_FILE]
    assert [round(c.score, 9) for c in searched.results] == [round(r.score, 9)
                                                             for r in reranked]
    # and each says which weight it fused by, and where it came from
    source = f"judge_weights['{MEASURED_MODEL}'] (user: /u/config.toml)"
    assert searched.model is not None
    assert (searched.model.judge_weight, searched.model.judge_weight_source) == (4.0, source)
    assert reranked.weight is not None
    assert (reranked.weight.weight, reranked.weight.source) == (4.0, source)
    assert f"judge weight 4 from {source}" in reranked.judgement.notes


def test_documents_without_lexical_evidence_are_ordered_by_the_verdict_whatever_the_weight(
        ) -> None:
    from slm_rerank.model.stage import Judgement

    # a profile weighing its verdicts 0 would fuse every document alike: with no lexical
    # order to move, the verdicts alone order the judged, the unjudged follow in input order
    profile = dataclasses.replace(RAW_PROFILE, judge_weight=0.0)
    judgement = Judgement(scores={0: DocumentScore(0, 0.2), 2: DocumentScore(2, 0.9)},
                          profile=ProfileChoice(profile, "asked for"))

    order = apply_verdicts(4, judgement, Settings(), threshold=None, query="rotate the key")

    assert [f.index for f in order.kept] == [2, 0, 1, 3]
    assert [f.model for f in order.kept] == [0.9, 0.2, None, None]
    assert (order.weight.weight, order.weight.source) == (0.0, "profile raw")
