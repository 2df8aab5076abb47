"""A search on a real llama-server in a repository where calibrate --write found that the
server's model adds nothing: the server is found, no chunk is sent, -v says why, and
--ask-judge asks it all the same."""

from __future__ import annotations

import json
from pathlib import Path

from search_fixtures import cli, make_repo

from slm_rerank.model.repository_judge import JudgeFinding, findings_path, write_finding

FILES = {"net/retry.py": "def retry_backoff(attempt):\n    return 2 ** attempt\n",
         "net/pool.py": "def pool_size():\n    # retry pool\n    return 4\n"}


def search(repo: Path, base_url: str, *extra: str) -> tuple[dict, str]:
    run = cli("-q", "how is the retry backoff computed", "--format", "json", "-e", base_url,
              "--no-cache", "--timeout", "600", "-v", *extra, cwd=repo, timeout=900)
    assert run.returncode == 0, run.stderr
    return json.loads(run.stdout), run.stderr


def test_a_judge_found_useless_here_is_not_asked_unless_the_user_says_so(
        tmp_path: Path, cache: Path, llama_server) -> None:  # type: ignore[no-untyped-def]
    repo = make_repo(tmp_path / "repo", FILES)
    fast = json.loads(cli("-q", "how is the retry backoff computed", "--format", "json",
                          "--fast", cwd=repo).stdout)
    write_finding(findings_path(cache, repo), JudgeFinding(
        llama_server.model_id, False, None, "MRR@10 0.600 without it, at most 0.550 fused "
        "(w=1), 40 cases", 40, "2026-12-02"))

    declined, said = search(repo, llama_server.base_url)

    model = declined["model"]
    assert model["model_id"] == llama_server.model_id  # the server was found ...
    assert model["scored"] == 0 and declined["degraded"] is None  # ... and asked nothing
    assert model["tokens"]["unjudged"] == 2 and model["tokens"]["saved"] > 0
    assert f"calibrate --write measured that {llama_server.model_id} adds nothing in this " \
           "repository (MRR@10 0.600 without it" in said
    assert "pass --ask-judge to ask it anyway" in said
    assert [r["path"] for r in declined["results"]] == [r["path"] for r in fast["results"]]

    asked, _ = search(repo, llama_server.base_url, "--ask-judge")

    assert asked["model"]["scored"] == 2 and asked["degraded"] is None


def test_a_finding_for_another_model_changes_nothing(
        tmp_path: Path, cache: Path, llama_server) -> None:  # type: ignore[no-untyped-def]
    repo = make_repo(tmp_path / "repo", FILES)
    write_finding(findings_path(cache, repo), JudgeFinding(
        "some-other-model", False, None, "MRR@10 0.6 without it", 40, "2026-12-02"))

    doc, _ = search(repo, llama_server.base_url)

    assert doc["model"]["scored"] == 2
