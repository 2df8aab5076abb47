"""A whole `slm-rerank -q` against the real llama-server: reranks, caches, degrades."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from search_fixtures import cli, make_repo

FILES = {
    "net/retry.py": "def retry_backoff(attempt):\n    return 2 ** attempt\n",
    "net/client.py": "from net.retry import retry_backoff\n\ndef get(url):\n    return url\n",
    "ui/colour.py": "RED = 'red'\n",
}


@pytest.fixture
def small_repo(tmp_path: Path) -> Path:
    return make_repo(tmp_path / "repo", FILES)


def rerank(repo: Path, base_url: str, *extra: str) -> tuple[dict, str]:
    run = cli("-q", "retry backoff", "--format", "json", "-e", base_url, "--rerank-top", "2",
              "--threshold", "0", *extra, cwd=repo, timeout=300)
    assert run.returncode == 0, run.stderr
    return json.loads(run.stdout), run.stderr


def test_a_query_is_reranked_by_the_served_model_and_says_how(small_repo: Path,
                                                              llama_server) -> None:  # type: ignore[no-untyped-def]
    doc, stderr = rerank(small_repo, llama_server.base_url)

    assert doc["mode"] == "rerank" and doc["degraded"] is None, stderr
    model = doc["model"]
    assert model["endpoint"] == llama_server.base_url
    assert model["model_id"] == llama_server.model_id
    # the bundled Gemma 3 270M is a base model: the few-shot completion profile claims it
    assert model["profile"] == "gemma-base" and "claims" in model["profile_reason"]
    assert model["scorer"] == "yesno" and model["scored"] == 2
    assert model["endpoints"] == [{"url": llama_server.base_url, "scored": 2, "failed": None}]
    scored = [r for r in doc["results"] if r["model_score"] is not None]
    assert len(scored) == 2
    assert all(0.0 < r["model_score"] < 1.0 for r in scored)
    assert doc["timings"]["model_ms"] > 0


def test_a_second_run_is_answered_from_the_score_cache(small_repo: Path, llama_server) -> None:  # type: ignore[no-untyped-def]
    first, _ = rerank(small_repo, llama_server.base_url)
    second, _ = rerank(small_repo, llama_server.base_url)
    uncached, _ = rerank(small_repo, llama_server.base_url, "--no-cache")

    assert second["model"]["cache_hits"] == 2
    assert [r["model_score"] for r in second["results"]] == [
        r["model_score"] for r in first["results"]]
    assert uncached["model"]["cache_hits"] == 0


def test_a_killed_server_degrades_to_the_lexical_order(small_repo: Path,
                                                       llama_server_factory) -> None:  # type: ignore[no-untyped-def]
    server = llama_server_factory()
    server.kill()
    doc, stderr = rerank(small_repo, server.base_url)

    assert doc["degraded"]["reason"].startswith(f"the model server {server.base_url}")
    assert "degraded:" in stderr
    assert doc["results"][0]["path"] == "net/retry.py"
    assert all(r["model_score"] is None for r in doc["results"])


def test_an_unknown_model_profile_is_a_one_line_error(small_repo: Path, llama_server) -> None:  # type: ignore[no-untyped-def]
    run = cli("-q", "retry", "-e", llama_server.base_url, "--model", "nosuch", cwd=small_repo)
    assert run.returncode == 2  # a flag naming no installed profile is bad command-line input
    assert run.stderr.count("\n") == 1 and "unknown model profile 'nosuch'" in run.stderr


def test_a_threshold_that_drops_everything_says_so_with_v(small_repo: Path,
                                                           llama_server) -> None:  # type: ignore[no-untyped-def]
    run = cli("-q", "retry backoff", "--format", "json", "-e", llama_server.base_url,
              "--rerank-top", "2", "--threshold", "1", "-v", cwd=small_repo, timeout=300)
    assert run.returncode == 0, run.stderr
    # the judged chunks are dropped; the chunks the model never judged stay, unscored
    assert all(r["model_score"] is None for r in json.loads(run.stdout)["results"])
    assert "threshold 1 dropped 2 of 2 judged chunks" in run.stderr


def test_a_chunk_longer_than_the_prompt_budget_is_cut_and_the_run_says_so(
        tmp_path: Path, llama_server) -> None:  # type: ignore[no-untyped-def]
    body = "\n".join(f"    step_{i} = {i}" for i in range(80))
    repo = make_repo(tmp_path / "repo", {"net/retry.py": f"def retry_backoff():\n{body}\n"})
    (repo / ".slm-rerank.toml").write_text("prompt_chars = 200\n")
    run = cli("-q", "retry backoff", "--format", "json", "-e", llama_server.base_url,
              "--rerank-top", "1", "--threshold", "0", "-v", cwd=repo, timeout=300)
    assert run.returncode == 0, run.stderr
    assert "1 of 1 judged chunks were longer than prompt_chars = 200" in run.stderr
    assert json.loads(run.stdout)["model"]["scored"] == 1


def test_api_openai_chat_sends_real_messages_with_a_chat_profile(small_repo: Path,
                                                                 llama_server) -> None:  # type: ignore[no-untyped-def]
    doc, stderr = rerank(small_repo, llama_server.base_url, "--api", "openai-chat",
                         "--model", "gemma", "--no-cache", "-v")
    assert doc["degraded"] is None and doc["model"]["scored"] == 2
    assert f"asking {llama_server.base_url} as openai-chat (probed as llama.cpp)" in stderr


def test_api_openai_chat_with_a_profile_without_chat_turns_is_an_error(
        small_repo: Path, llama_server) -> None:  # type: ignore[no-untyped-def]
    run = cli("-q", "retry", "-e", llama_server.base_url, "--api", "openai-chat",
              "--model", "gemma-base", cwd=small_repo, timeout=300)
    assert run.returncode == 1
    assert "gemma-base" in run.stderr and run.stderr.count("\n") == 1
