"""The rerank-endpoint scorer against the real llama-server (Gemma 3 270M): what users see.

Gemma 3 270M is no reranker, but llama-server started with ``--reranking --embedding
--pooling rank`` serves ``/v1/rerank`` over it all the same: the score is the first value
of the pooled output, a meaningless number of the real shape. So these tests hold the
wire, not the ranking: a server without ``--reranking`` is a one-line error saying what
it needs; one with it gives every chunk a probability from one call; and the payload the
plugin's own tests replay (plugins/slm-rerank-rerank-endpoint/tests/fixtures) is still
what this server answers.
"""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest
from search_fixtures import cli, load_plugins, make_repo

FIXTURES = (Path(__file__).resolve().parents[3] / "plugins" / "slm-rerank-rerank-endpoint"
            / "tests" / "fixtures")
FILES = {
    "net/retry.py": "def retry_backoff(attempt):\n    return 2 ** attempt\n",
    "net/client.py": "from net.retry import retry_backoff\n\ndef get(url):\n    return url\n",
    "net/backoff.txt": "retry backoff notes\n",
    "ui/colour.py": "RED = 'red'\n",
}
RERANKING = ("--reranking", "--embedding", "--pooling", "rank")


@pytest.fixture
def small_repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    load_plugins(monkeypatch, "slm-rerank-rerank-endpoint")
    return make_repo(tmp_path / "repo", FILES)


def run(repo: Path, *args: str) -> tuple[int, str, str]:
    done = cli("-q", "retry backoff", "--format", "json", "--threshold", "0", "--no-cache",
               "--scorer", "rerank-endpoint", *args, cwd=repo, timeout=300)
    return done.returncode, done.stdout, done.stderr


def test_a_server_without_reranking_is_an_error_saying_what_it_needs(
        small_repo: Path, llama_server) -> None:  # type: ignore[no-untyped-def]
    code, stdout, stderr = run(small_repo, "-e", llama_server.base_url)

    assert code != 0 and stdout == ""
    message = stderr.strip()
    assert "\n" not in message, message
    assert f"{llama_server.base_url}/v1/rerank" in message
    assert "--reranking" in message and "reranker model" in message


def test_a_reranking_server_scores_every_chunk_of_the_head_in_one_call(
        small_repo: Path, llama_server_factory) -> None:  # type: ignore[no-untyped-def]
    server = llama_server_factory(slots=2, ctx_per_slot=1024, extra_args=RERANKING)

    code, stdout, stderr = run(small_repo, "-e", server.base_url, "--rerank-top", "3")

    assert code == 0, stderr
    doc = json.loads(stdout)
    assert doc["degraded"] is None, stderr
    assert doc["model"]["scorer"] == "rerank-endpoint" and doc["model"]["scored"] == 3
    scores = [r["model_score"] for r in doc["results"] if r["model_score"] is not None]
    assert len(scores) == 3 and all(0.0 <= s <= 1.0 for s in scores)


def test_the_recorded_payload_is_what_the_server_still_answers(
        llama_server_factory) -> None:  # type: ignore[no-untyped-def]
    recorded = json.loads((FIXTURES / "llamacpp-rerank-pooling-rank.json").read_text())
    server = llama_server_factory(slots=2, ctx_per_slot=2048, extra_args=RERANKING)

    answer = httpx.post(server.base_url + "/v1/rerank", json=recorded["request"]["body"],
                        timeout=60).json()

    expected = recorded["response"]["body"]
    assert set(answer) == set(expected)
    assert sorted(r["index"] for r in answer["results"]) == [0, 1, 2]
    # best first, as recorded; the values are this build's and may drift in the last digits
    assert [r["index"] for r in answer["results"]] == [r["index"] for r in expected["results"]]
    for got, kept in zip(answer["results"], expected["results"], strict=True):
        assert got["relevance_score"] == pytest.approx(kept["relevance_score"], abs=1e-2)


def test_the_recorded_refusal_is_what_a_server_without_reranking_answers(
        llama_server) -> None:  # type: ignore[no-untyped-def]
    recorded = json.loads((FIXTURES / "llamacpp-rerank-not-enabled.json").read_text())

    answer = httpx.post(llama_server.base_url + "/v1/rerank",
                        json=recorded["request"]["body"], timeout=60)

    assert answer.status_code == recorded["response"]["status"] == 501
    assert answer.json() == recorded["response"]["body"]
