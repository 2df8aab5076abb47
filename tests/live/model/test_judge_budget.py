"""A search's token budget and cascade on a real llama-server: what the JSON says it spent
is what the server counted, a budget judges less and loses no result, the prefix that
every prompt shares is read once per slot."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from search_fixtures import cli, free_port, make_repo

#: eight files about retries: every one is a candidate, each prompt holds one of them
FILES = {f"net/retry{i}.py": f"def retry_backoff_{i}(attempt):\n"
         f"    # retry backoff, variant {i}\n    return {i + 2} ** attempt\n"
         for i in range(8)}


@pytest.fixture
def retry_repo(tmp_path: Path) -> Path:
    return make_repo(tmp_path / "repo", FILES)


def search(repo: Path, base_url: str, *extra: str) -> dict:
    # a generous model deadline: a busy machine makes the 270M slow, and a deadline that
    # passes would stop the judging this test counts
    run = cli("-q", "how is the retry backoff computed", "--format", "json", "-e", base_url,
              "--rerank-top", "8", "--no-cache", "--timeout", "600", *extra, cwd=repo,
              timeout=900)
    assert run.returncode == 0, run.stderr
    return json.loads(run.stdout)


@pytest.mark.bundled_server  # slm-rerank serve starts it
def test_the_json_says_what_the_prompts_cost_and_the_shared_prefix_is_cached(
        retry_repo: Path, cache: Path) -> None:
    port = free_port()
    started = cli("serve", "--background", "--port", str(port), "--slots", "1",
                  cwd=retry_repo, timeout=240)
    assert started.returncode == 0, started.stderr
    try:
        doc = search(retry_repo, f"http://127.0.0.1:{port}")
    finally:
        cli("serve", "stop", cwd=retry_repo, timeout=60)

    tokens = doc["model"]["tokens"]
    assert doc["model"]["scored"] == 8 and doc["degraded"] is None, doc
    assert tokens["estimated"] == 0  # llama.cpp counted every prompt
    # one slot of the managed server (Gemma 3, served with --swa-full): the first prompt
    # reads the instruction and query, the next seven take them from the slot's cache
    assert tokens["cached"] > 0 and tokens["read"] == tokens["prompt"] - tokens["cached"]
    assert tokens["cached"] >= 7 * 20
    assert tokens["stopped"] is None and tokens["unjudged"] == 0


def test_a_token_budget_judges_fewer_passages_and_keeps_every_result(
        retry_repo: Path, llama_server_factory) -> None:  # type: ignore[no-untyped-def]
    server = llama_server_factory(slots=1, ctx_per_slot=2048, extra_args=("--swa-full",))
    whole = search(retry_repo, server.base_url)
    # the first prompt reads the shared prefix and its passage, the others their passage:
    # 60 % of the whole is the first prompt and a few more
    per_prompt = whole["model"]["tokens"]["prompt"] // 8
    budget = whole["model"]["tokens"]["read"] * 6 // 10

    doc = search(retry_repo, server.base_url, "--budget", str(budget))

    tokens = doc["model"]["tokens"]
    assert 0 < doc["model"]["scored"] < 8, tokens
    assert tokens["read"] <= budget + per_prompt  # an estimate may be one prompt off
    assert tokens["unjudged"] == 8 - doc["model"]["scored"] and tokens["saved"] > 0
    assert "budget" in tokens["stopped"]
    assert doc["degraded"] is None  # a planned stop
    assert len(doc["results"]) == len(whole["results"])  # nothing is lost
    unjudged = [r for r in doc["results"] if r["model_score"] is None]
    assert len(unjudged) == tokens["unjudged"]


def test_a_bad_budget_is_a_usage_error_naming_the_flag(retry_repo: Path) -> None:
    run = cli("-q", "retry", "--budget", "lots", cwd=retry_repo)

    assert run.returncode == 2 and "--budget" in run.stderr


#: one file all about retry backoff, one that mentions a retry once: the lexical first
#: file leads the next far past the cascade's DECISIVE_LEAD
DECISIVE = {
    "net/backoff.py": "".join(f"def retry_backoff_{i}(attempt):\n    # retry backoff\n"
                              f"    return retry_backoff_delay(attempt) * {i}\n\n"
                              for i in range(6)),
    "ui/colour.py": "RED = 'red'\n# retry once\n",
}


def test_the_cascade_asks_the_server_nothing_when_the_lexical_order_is_decisive(
        tmp_path: Path, llama_server) -> None:  # type: ignore[no-untyped-def]
    repo = make_repo(tmp_path / "decisive", DECISIVE)
    fast = cli("-q", "how is the retry backoff computed", "--fast", "--format", "json",
               cwd=repo)
    assert fast.returncode == 0, fast.stderr

    doc = search(repo, llama_server.base_url, "--cascade")
    judged = search(repo, llama_server.base_url)

    tokens = doc["model"]["tokens"]
    assert doc["model"]["endpoint"] == llama_server.base_url and doc["degraded"] is None
    assert doc["model"]["scored"] == 0 and tokens["prompt"] == 0, tokens
    assert "decisive" in tokens["stopped"] and tokens["unjudged"] > 1 and tokens["saved"] > 0
    assert [r["path"] for r in doc["results"]] == [
        r["path"] for r in json.loads(fast.stdout)["results"]]
    # the same query without the cascade: the server judges the head the cascade left
    assert judged["model"]["scored"] == tokens["unjudged"]
    assert judged["model"]["tokens"]["prompt"] > 0
