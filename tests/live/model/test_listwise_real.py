"""The listwise scorer against the real llama-server (Gemma 3 270M base): what users see.

The bundled model is a weak base model: it copies the worked example's answer or counts
on, rarely a useful order. These tests hold what must be true whatever it answers: a
usable answer becomes rank probabilities, an unusable one leaves the lexical order with a
degraded reason, and neither is an exception. The recorded answer the plugin's own tests
replay (plugins/slm-rerank-listwise/tests/fixtures) is checked to still be what it says.
"""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest
from search_fixtures import cli, load_plugins, make_repo, user_config
from slm_rerank_listwise import prompt
from slm_rerank_listwise.answer import parse_ranking

FIXTURES = (Path(__file__).resolve().parents[3] / "plugins" / "slm-rerank-listwise" / "tests"
            / "fixtures")
FILES = {
    "net/retry.py": "def retry_backoff(attempt):\n    return 2 ** attempt\n",
    "net/client.py": "from net.retry import retry_backoff\n\ndef get(url):\n    return url\n",
    "net/backoff.txt": "retry backoff notes\n",
    "ui/colour.py": "RED = 'red'\n",
}


@pytest.fixture
def small_repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    load_plugins(monkeypatch, "slm-rerank-listwise")
    return make_repo(tmp_path / "repo", FILES)


def run(repo: Path, *args: str) -> tuple[dict, str]:
    done = cli("-q", "retry backoff", "--format", "json", "--threshold", "0", "--no-cache",
               *args, cwd=repo, timeout=300)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout), done.stderr


def paths(doc: dict) -> list[str]:
    return [r["path"] for r in doc["results"]]


def test_the_real_models_answer_is_a_ranking_or_the_lexical_order_with_a_reason(
        small_repo: Path, llama_server) -> None:  # type: ignore[no-untyped-def]
    fast, _ = run(small_repo, "--fast")
    doc, stderr = run(small_repo, "-e", llama_server.base_url, "--scorer", "listwise",
                      "--rerank-top", "3")

    assert doc["model"]["scorer"] == "listwise"
    scores = sorted((r["model_score"] for r in doc["results"]
                     if r["model_score"] is not None), reverse=True)
    if doc["degraded"] is None:
        # ranks 0, 1, 2 of 3 (the JSON rounds to 4 places)
        assert scores == pytest.approx([5 / 6, 1 / 2, 1 / 6], abs=1e-4), stderr
    else:
        assert doc["degraded"]["reason"].startswith("listwise: ")
        assert "kept the input order" in doc["degraded"]["reason"]
        assert scores == [] and paths(doc) == paths(fast)


def test_an_unusable_answer_keeps_the_lexical_order_and_says_degraded(
        small_repo: Path, llama_server) -> None:  # type: ignore[no-untyped-def]
    # One answer token cannot name three candidates: the answer is always unusable.
    user_config().write_text("[plugins.listwise]\nmax_tokens = 1\n")
    fast, _ = run(small_repo, "--fast")
    doc, stderr = run(small_repo, "-e", llama_server.base_url, "--scorer", "listwise",
                      "--rerank-top", "3")

    assert doc["mode"] == "rerank"
    reason = doc["degraded"]["reason"]
    assert reason.startswith("listwise: the answer was unusable (")
    assert "kept the input order" in reason
    assert "degraded:" in stderr
    assert paths(doc) == paths(fast)
    assert all(r["model_score"] is None for r in doc["results"])


def test_a_window_over_the_servers_context_is_cut_to_fit_not_refused(
        small_repo: Path, llama_server_factory) -> None:  # type: ignore[no-untyped-def]
    # 512 tokens of context: three candidates of 3,000 characters would not fit whole.
    big = "\n".join(f"retry_backoff_step_{i} = {i}  # backoff" for i in range(100))
    for name in ("net/a.py", "net/b.py", "net/c.py"):
        (small_repo / name).write_text(big + "\n")
    server = llama_server_factory(slots=1, ctx_per_slot=512)
    user_config().write_text("[plugins.listwise]\ndoc_chars = 3000\n")
    doc, stderr = run(small_repo, "-e", server.base_url, "--scorer", "listwise",
                      "--rerank-top", "3")

    reason = (doc["degraded"] or {}).get("reason", "")
    assert "context" not in reason, reason  # no "exceeds the available context size"


def test_the_recorded_answer_is_what_the_server_still_answers(llama_server) -> None:  # type: ignore[no-untyped-def]
    fixture = json.loads((FIXTURES / "gemma-270m-listwise-completion.json").read_text())
    recorded = fixture["exchanges"][0]
    answer = httpx.post(llama_server.url("/completion"), json=recorded["request"],
                        timeout=120).json()

    assert answer["content"] == recorded["response"]["content"], (
        "the served model answers the recorded listwise prompt differently now: record "
        "the fixture again (see its 'recorded' field) and update the tests that replay it")
    ranking = parse_ranking(prompt.ANSWER_CUE + answer["content"], len(fixture["documents"]))
    assert ranking.order is not None or ranking.problem
