"""Dense text (emoji, CJK Extension B, long hex) never makes a query fail on a small slot.

Prompts are sized by characters (3 a token); a chunk of CJK Extension B runs at about 4
tokens a character on Gemma, so its prompt is over a 512-token slot and llama-server
refuses it with HTTP 400. The host counts the tokens of such prompts and shortens them;
and when a server still refuses one prompt as too long, that one chunk is named as not
judged while the others are.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import slm_rerank_gemma
import slm_rerank_ripgrep
from search_fixtures import make_repo

import slm_rerank
from slm_rerank.config import Settings
from slm_rerank.errors import ContractError
from slm_rerank.host import Host
from slm_rerank.model.prompt_fit import measure
from slm_rerank.model.scoring import collect, over_context, spread
from slm_rerank.pipeline import SearchRequest, run_search
from slm_rerank.registrations import Document, DocumentScore, Endpoint, Scorer, ScoreRequest

WIRE = Path(__file__).resolve().parents[1] / "fixtures" / "wire"


def test_the_recorded_over_context_refusal_is_recognised_and_other_refusals_are_not() -> None:
    recorded = json.loads((WIRE / "llamacpp-completion-too-long.json").read_text())
    answer = recorded["exchanges"][0]
    said = answer["response"]["error"]["message"]
    as_raised = ContractError("model server http://127.0.0.1:1/completion rejected the "
                              f"request with HTTP {answer['status']}: {said}")

    assert answer["status"] == 400
    assert answer["response"]["error"]["type"] == "exceed_context_size_error"
    assert over_context(as_raised)
    assert over_context(ContractError("... HTTP 400: This model's maximum context length is "
                                      "2048 tokens. However, you requested 2400 tokens"))
    assert not over_context(ContractError("... HTTP 400: 'n_probs' must be a number"))
    assert not over_context(RuntimeError(said))


class NoTokenize:
    """A client that must not be asked to count tokens."""

    async def tokenize(self, endpoint: Endpoint, text: str) -> list[int] | None:
        raise AssertionError(f"tokenize was called for {text[:40]!r}")


def test_prompts_that_cannot_overflow_by_their_bytes_are_not_tokenized() -> None:
    endpoint = Endpoint("http://127.0.0.1:1", context_tokens=4096)
    docs = [Document.of(str(i), "def f(x):\n    return x\n" * 40) for i in range(16)]

    measured = asyncio.run(measure(NoTokenize(), endpoint, None,  # type: ignore[arg-type]
                                   "where is f", docs))

    assert measured.documents == docs and measured.shortened == 0


def refusing_scorer(per_document: bool) -> Scorer:
    """A scorer whose server refuses, as llama-server does (the recorded message), every
    request holding a document that says "glyphs"."""
    recorded = json.loads((WIRE / "llamacpp-completion-too-long.json").read_text())
    said = recorded["exchanges"][0]["response"]["error"]["message"]

    async def score(request: ScoreRequest) -> AsyncIterator[DocumentScore]:
        if any("glyphs" in d.text for d in request.documents):
            raise ContractError("model server http://127.0.0.1:1/completion rejected the "
                                f"request with HTTP 400: {said}")
        for i, _ in enumerate(request.documents):
            yield DocumentScore(i, 0.5)

    return Scorer("refusing", "refuses dense prompts", score, per_document=per_document)


def fake_request(texts: list[str], endpoint: Endpoint) -> ScoreRequest:
    return ScoreRequest(query="q", documents=[Document.of(str(i), t) for i, t in enumerate(texts)],
                        endpoint=endpoint, deadline=time.monotonic() + 30)


def test_over_several_servers_only_the_refused_document_goes_without_a_verdict() -> None:
    servers = [Endpoint("http://127.0.0.1:1", slots=2), Endpoint("http://127.0.0.1:2", slots=2)]
    texts = ["a", "b", "glyphs", "c", "d", "e"]

    outcome = asyncio.run(spread(refusing_scorer(True), fake_request(texts, servers[0]),
                                 servers))

    assert outcome.stopped is None, outcome.stopped
    assert sorted(outcome.scores) == [0, 1, 3, 4, 5]
    assert list(outcome.skipped) == [2]
    assert not any(use.failed for use in outcome.uses)


def test_a_scorer_comparing_documents_degrades_when_its_prompt_is_refused_as_too_long() -> None:
    endpoint = Endpoint("http://127.0.0.1:1")

    outcome = asyncio.run(collect(refusing_scorer(False),
                                  fake_request(["a", "glyphs"], endpoint)))

    assert outcome.scores == {} and outcome.fault == "too-long"
    assert outcome.stopped and "exceeds the available context size" in outcome.stopped


class Refusing:
    """The refusing scorer as a plugin, judging without a server."""

    @staticmethod
    @slm_rerank.hookimpl
    def register_scorers(register: Callable[[Scorer], None]) -> None:
        scorer = refusing_scorer(True)
        register(dataclasses.replace(scorer, needs_endpoint=False))


def test_a_document_refused_as_too_long_is_named_in_the_warnings_and_the_rest_are_judged(
        ) -> None:
    settings = dataclasses.replace(Settings(), scorer="refusing", score_cache=False)
    host = Host.with_plugins(settings, Refusing, slm_rerank_gemma)
    docs = ["keys rotate", {"id": "faq-glyphs", "text": "glyphs"}, "holidays"]

    result = slm_rerank.rerank_documents("rotate keys", docs, host=host)

    assert result.degraded is None
    assert {r.id: r.score is None for r in result} == {"0": False, "faq-glyphs": True,
                                                       "2": False}
    (warning,) = [w for w in result.warnings if "were not judged" in w]  # said once
    assert "1 of 3 documents were not judged ('faq-glyphs')" in warning
    assert "exceeds the available context size" in warning


def test_a_chunk_refused_as_too_long_is_named_in_the_search_warnings(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", {"a.py": "def rotate_keys():\n    pass\n",
                                         "b.txt": "rotate keys glyphs\n"})
    settings = dataclasses.replace(Settings(), scorer="refusing", score_cache=False,
                                   threshold=0.0)
    host = Host.with_plugins(settings, Refusing, slm_rerank_gemma, slm_rerank_ripgrep)
    request = SearchRequest(query="rotate keys", root=repo, cache_dir=None, fast=False)

    report = run_search(request, host)

    assert report.degraded is None
    assert any("were not judged (b.txt:1-1)" in w for w in report.warnings), report.warnings
    # the refused chunk has no verdict, and stays after the judged one with none invented
    assert [(r.path, r.model_score is None) for r in report.results] == [("a.py", False),
                                                                        ("b.txt", True)]


def test_a_refused_chunks_file_name_reaches_the_warning_without_control_characters(
        tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", {"a.py": "def rotate_keys():\n    pass\n",
                                         "b\x1b[2J.txt": "rotate keys glyphs\n"})
    settings = dataclasses.replace(Settings(), scorer="refusing", score_cache=False)
    host = Host.with_plugins(settings, Refusing, slm_rerank_gemma, slm_rerank_ripgrep)

    report = run_search(SearchRequest(query="rotate keys", root=repo, fast=False), host)

    (warning,) = [w for w in report.warnings if "were not judged" in w]
    assert "\x1b" not in warning and "b\\x1b[2J.txt:1-1" in warning
