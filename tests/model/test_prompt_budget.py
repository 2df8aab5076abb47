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
from typing import Any

import pytest
import slm_rerank_gemma
import slm_rerank_ripgrep
import slm_rerank_yesno
from search_fixtures import cli, make_repo

import slm_rerank
from slm_rerank.config import Settings
from slm_rerank.errors import ContractError
from slm_rerank.host import Host
from slm_rerank.model.budget import measure
from slm_rerank.model.client import ModelClient
from slm_rerank.model.scoring import collect, over_context, spread
from slm_rerank.pipeline import SearchRequest, run_search
from slm_rerank.registrations import Document, DocumentScore, Endpoint, Scorer, ScoreRequest

WIRE = Path(__file__).resolve().parents[1] / "fixtures" / "wire"
#: CJK Extension B: no merges in Gemma's vocabulary, four byte-fallback tokens a character
CJK_B = "".join(chr(0x20000 + i) for i in range(300))
EMOJI = "😀🎉🚀🧪🔥" * 150
SLOT = 512


def lines(text: str, width: int) -> str:
    return "".join(text[i:i + width] + "\n" for i in range(0, len(text), width))


def dense_repo(root: Path) -> Path:
    return make_repo(root, {
        "net/retry.py": "def retry_backoff(attempt):\n    return 2 ** attempt\n",
        # glyphs under the query's words: a candidate, and far over 512 tokens (in short
        # lines: a line over 1000 characters marks a file as minified, and unsearched)
        "notes/glyphs.txt": "retry backoff notes\n" + lines(CJK_B + EMOJI, 60),
    })


@pytest.mark.parametrize("scorer", ["yesno", "graded", "listwise"])
def test_a_dense_chunk_on_a_512_token_slot_is_shortened_and_judged(
        scorer: str, tmp_path: Path, llama_server_factory: Any) -> None:
    server = llama_server_factory(slots=2, ctx_per_slot=SLOT)
    repo = dense_repo(tmp_path / "repo")

    run = cli("-q", "retry backoff", "--format", "json", "-v", "-e", server.base_url,
              "--scorer", scorer, "--rerank-top", "4", "--threshold", "0", "--no-cache",
              cwd=repo, timeout=300)

    assert run.returncode == 0, run.stderr
    assert "HTTP 400" not in run.stdout + run.stderr
    doc = json.loads(run.stdout)
    assert doc["degraded"] is None, doc["degraded"]
    by_path = {r["path"]: r for r in doc["results"]}
    assert by_path["notes/glyphs.txt"]["model_score"] is not None
    assert by_path["net/retry.py"]["model_score"] is not None
    assert "shortened after counting their tokens" in run.stderr  # -v prints the notes


def test_a_dense_document_is_shortened_judged_and_named_in_the_warnings(
        llama_server_factory: Any) -> None:
    server = llama_server_factory(slots=1, ctx_per_slot=SLOT)
    docs = ["To rotate an API key, open Settings > Security and press Rotate.",
            {"id": "glyphs", "text": "API key rotation glyphs: " + CJK_B * 2},
            "Our office is closed on public holidays."]

    result = slm_rerank.rerank_documents("how do I rotate an API key?", docs,
                                         base_url=server.base_url, cache=False)

    assert result.degraded is None, result.degraded
    assert all(r.score is not None for r in result)
    assert any("1 of 3 documents were shortened after counting their tokens" in w
               for w in result.warnings), result.warnings


def yesno_request(server: Any, client: ModelClient, texts: list[str]) -> ScoreRequest:
    profile = next(p for p in Host.with_plugins(Settings(), slm_rerank_gemma)
                   .registry.profiles().values() if p.name == "gemma-base")
    endpoint = Endpoint(server.base_url, "llama.cpp", server.model_id, slots=server.slots,
                        context_tokens=server.ctx_per_slot)
    return ScoreRequest(query="where is the retry delay computed",
                        documents=[Document.of(str(i), t) for i, t in enumerate(texts)],
                        profile=profile, endpoint=endpoint, client=client,
                        deadline=time.monotonic() + 120)


def test_a_prompt_the_real_server_refuses_as_too_long_skips_that_document_alone(
        llama_server_factory: Any) -> None:
    server = llama_server_factory(slots=2, ctx_per_slot=SLOT)
    texts = ["def retry_delay(n):\n    return 2 ** n", CJK_B,
             "RED = 'red'", "def backoff(attempt):\n    return min(2 ** attempt, 60)"]

    async def run() -> Any:
        async with ModelClient(timeout=60) as client:
            # unfitted on purpose: the batch of two holding the glyphs is refused whole
            return await collect(slm_rerank_yesno.YESNO, yesno_request(server, client, texts))

    outcome = asyncio.run(run())

    assert outcome.stopped is None, outcome.stopped
    assert sorted(outcome.scores) == [0, 2, 3]
    assert list(outcome.skipped) == [1]
    assert "exceeds the available context size" in outcome.skipped[1]


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


@pytest.mark.parametrize("text", [CJK_B, EMOJI, "deadbeef0123456789abcdef" * 60])
def test_every_kind_of_dense_text_is_measured_to_fit_the_real_slot(
        text: str, llama_server: Any) -> None:
    endpoint = Endpoint(llama_server.base_url, "llama.cpp", llama_server.model_id,
                        context_tokens=SLOT)

    async def run() -> tuple[Any, int]:
        async with ModelClient(timeout=60) as client:
            measured = await measure(client, endpoint, None, "where", [Document.of("0", text)])
            tokens = await client.tokenize(endpoint, "where" + measured.documents[0].text)
        return measured, len(tokens or [])

    measured, tokens = asyncio.run(run())

    assert measured.shortened == 1
    assert tokens <= SLOT - 32
    assert len(measured.documents[0].text) > 0


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
    assert [r.path for r in report.results] == ["a.py"]


def test_a_refused_chunks_file_name_reaches_the_warning_without_control_characters(
        tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", {"a.py": "def rotate_keys():\n    pass\n",
                                         "b\x1b[2J.txt": "rotate keys glyphs\n"})
    settings = dataclasses.replace(Settings(), scorer="refusing", score_cache=False)
    host = Host.with_plugins(settings, Refusing, slm_rerank_gemma, slm_rerank_ripgrep)

    report = run_search(SearchRequest(query="rotate keys", root=repo, fast=False), host)

    (warning,) = [w for w in report.warnings if "were not judged" in w]
    assert "\x1b" not in warning and "b\\x1b[2J.txt:1-1" in warning
