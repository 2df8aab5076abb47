"""Dense text on a real llama-server's small slot: measured, shortened and judged, or
skipped alone when the server refuses it."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import pytest
import slm_rerank_gemma
import slm_rerank_yesno
from search_fixtures import cli, make_repo

import slm_rerank
from slm_rerank.config import Settings
from slm_rerank.host import Host
from slm_rerank.model.client import ModelClient
from slm_rerank.model.prompt_fit import measure
from slm_rerank.model.scoring import collect
from slm_rerank.registrations import Document, Endpoint, ScoreRequest

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


def yesno_request(server: Any, client: ModelClient, texts: list[str]) -> ScoreRequest:
    profile = next(p for p in Host.with_plugins(Settings(), slm_rerank_gemma)
                   .registry.profiles().values() if p.name == "gemma-base")
    endpoint = Endpoint(server.base_url, "llama.cpp", server.model_id, slots=server.slots,
                        context_tokens=server.ctx_per_slot)
    return ScoreRequest(query="where is the retry delay computed",
                        documents=[Document.of(str(i), t) for i, t in enumerate(texts)],
                        profile=profile, endpoint=endpoint, client=client,
                        deadline=time.monotonic() + 120)


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
