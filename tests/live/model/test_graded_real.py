"""The graded judge (plugins/slm-rerank-graded) against the real llama-server."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from search_fixtures import cli, load_plugins, make_repo, user_config

from slm_rerank.model.client import ModelClient
from slm_rerank.registrations import Endpoint

FILES = {
    "net/retry.py": "def retry_backoff(attempt):\n    return 2 ** attempt\n",
    "net/client.py": "from net.retry import retry_backoff\n\ndef get(url):\n    return url\n",
    "ui/colour.py": "RED = 'red'\n",
}
RECORDED = (Path(__file__).resolve().parents[3] / "plugins" / "slm-rerank-graded" / "tests"
            / "fixtures" / "llamacpp-graded-logprobs.json")


@pytest.fixture(autouse=True)
def graded_installed(monkeypatch: pytest.MonkeyPatch) -> None:
    """The CLI runs load the graded plugin beside the built-ins (tests load no others)."""
    load_plugins(monkeypatch, "slm-rerank-graded")


@pytest.fixture
def small_repo(tmp_path: Path) -> Path:
    return make_repo(tmp_path / "repo", FILES)


def graded(repo: Path, base_url: str) -> dict:
    run = cli("-q", "retry backoff", "--format", "json", "-e", base_url, "--scorer", "graded",
              "--rerank-top", "2", "--threshold", "0", "--no-cache", cwd=repo, timeout=300)
    assert run.returncode == 0, run.stderr
    return json.loads(run.stdout)


def test_the_cli_reranks_with_grades_from_the_served_model(small_repo: Path,
                                                           llama_server) -> None:  # type: ignore[no-untyped-def]
    doc = graded(small_repo, llama_server.base_url)

    assert doc["degraded"] is None
    assert doc["model"]["scorer"] == "graded" and doc["model"]["scored"] == 2
    scores = [r["model_score"] for r in doc["results"] if r["model_score"] is not None]
    # an expected grade over the digits 0..10, divided by 10
    assert len(scores) == 2 and all(0.0 < s < 1.0 for s in scores)


def test_a_localised_instruction_from_the_user_config_is_used(small_repo: Path,
                                                              llama_server) -> None:  # type: ignore[no-untyped-def]
    user_config().write_text(
        "[plugins.graded]\n"
        'instruction = "Bewerte, wie relevant das Dokument für die Anfrage ist, von 0 bis '
        '{max}. Antworte nur mit der Zahl."\n'
        "max_grade = 5\n")
    doc = graded(small_repo, llama_server.base_url)

    assert doc["degraded"] is None and doc["model"]["scored"] == 2


def test_the_server_still_answers_the_space_before_the_digits_as_recorded(
        llama_server) -> None:  # type: ignore[no-untyped-def]
    # The plugin's fixtures (and its whitespace step) rest on this: Gemma splits digits
    # off, so after "Score:" its likeliest token is a space alone, and the digits follow.
    recording = json.loads(RECORDED.read_text())
    prompt = next(e["request"]["prompt"] for e in recording["exchanges"]
                  if e["request"]["prompt"].endswith("Score:"))
    endpoint = Endpoint(llama_server.base_url, kind="llama.cpp",
                        model_id=llama_server.model_id)

    async def ask() -> tuple[str, list[str]]:
        async with ModelClient(timeout=120) as client:
            (first,) = await client.next_token(endpoint, [prompt], top_k=20)
            (second,) = await client.next_token(endpoint, [prompt + " "], top_k=20)
        likeliest = max(first.top, key=lambda c: c.logprob).token
        return likeliest, [c.token for c in second.top]

    likeliest, after_space = asyncio.run(ask())
    assert likeliest == " "
    assert {str(d) for d in range(10)} <= set(after_space)
