"""``--local`` starts the model the user's ``serve_model`` names; a repository cannot choose it.

No server is started: the scan finds nothing and the detached start is a recorder. The
live ``--local`` tests (a real llama-server) are in tests/live/llama/test_local.py.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import pytest
from search_fixtures import user_config

import slm_rerank
from slm_rerank.config import load_settings
from slm_rerank.errors import ServeError
from slm_rerank.llama import judge_model
from slm_rerank.llama.judge_model import PartedGguf
from slm_rerank.llama.state import ServerState
from slm_rerank.model import local

WHOLE = b"GGUF" + b"\x03\x00\x00\x00" + b"weights" * 20
SMALL = PartedGguf(package="slmtest-judge-part{n}", parts=1, file_name="judge-test.gguf",
                   size=len(WHOLE), sha256=hashlib.sha256(WHOLE).hexdigest())


@pytest.fixture
def nothing_runs(monkeypatch: pytest.MonkeyPatch) -> list[tuple[Any, list[str]]]:
    """No server answers the scan and every port is free; what a start was given."""
    from slm_rerank.model import discovery

    starts: list[tuple[Any, list[str]]] = []

    async def no_server(host: str, also: Any = ()) -> list[Any]:
        return []

    def start(options: Any, cache_dir: Path, argv: list[str], say: Any) -> ServerState:
        starts.append((options, argv))
        return ServerState(pid=1, server_pid=2, url="http://127.0.0.1:8035", host="127.0.0.1",
                           port=8035, model=str(options.model_file), slots=1, started=0.0,
                           idle=0.0, log="")

    monkeypatch.setattr(discovery, "scan", no_server)
    monkeypatch.setattr(local, "running", lambda cache_dir: None)
    monkeypatch.setattr(local, "clear_stale", lambda cache_dir: None)
    monkeypatch.setattr(local, "listening", lambda host, port: False)
    monkeypatch.setattr(local, "start_background", start)
    monkeypatch.setattr(judge_model, "JUDGE", SMALL)
    monkeypatch.setattr(judge_model, "download", lambda *a, **k: pytest.fail("pip was run"))
    return starts


def test_local_with_serve_model_judge_starts_the_cached_judge(
        isolated_home: Path, nothing_runs: list[tuple[Any, list[str]]]) -> None:
    (isolated_home / "models").mkdir(parents=True)
    judge = isolated_home / "models" / "judge-test.gguf"
    judge.write_bytes(WHOLE)

    said = local.ensure_local(isolated_home, 0.0, serve_model="judge")

    ((options, argv),) = nothing_runs
    assert options.model_file == judge
    assert argv[argv.index("--model-file") + 1] == str(judge)
    assert said is not None and "started the judge model at http://127.0.0.1:8035" in said


def test_local_by_default_starts_the_bundled_model(
        isolated_home: Path, nothing_runs: list[tuple[Any, list[str]]]) -> None:
    said = local.ensure_local(isolated_home, 0.0)

    ((options, argv),) = nothing_runs
    assert options.model_file is None and "--model-file" not in argv
    assert said is not None and "started the bundled model" in said


def test_local_with_the_judge_not_there_fetches_nothing_and_names_the_command(
        isolated_home: Path, nothing_runs: list[tuple[Any, list[str]]]) -> None:
    with pytest.raises(ServeError) as raised:
        local.ensure_local(isolated_home, 0.0, serve_model="judge")

    assert nothing_runs == []
    assert 'serve_model = "judge"' in str(raised.value)
    assert "`slm-rerank serve --judge --fetch`" in str(raised.value)
    assert not (isolated_home / "models").exists()


def test_a_search_hands_the_users_serve_model_to_local(
        repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from slm_rerank import api
    from slm_rerank.report import Report

    asked: list[dict[str, Any]] = []
    monkeypatch.setattr(local, "ensure_local",
                        lambda cache_dir, idle, host, **kwargs: asked.append(kwargs))
    # the model stage is not the point, and must not find another program's server
    monkeypatch.setattr(api, "run_search",
                        lambda request, host: Report(request.query, str(repo), "model"))
    user_config().write_text('auto_serve = true\nserve_model = "judge"\n')

    slm_rerank.search("retry backoff", repo, fast=False)

    assert asked == [{"serve_model": "judge"}]


def test_a_repositorys_file_cannot_choose_the_model_local_starts(
        repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (repo / ".slm-rerank.toml").write_text('serve_model = "judge"\n')

    settings = load_settings(start=repo)

    assert settings.serve_model == "bundled"
    assert "serve_model" in settings.repo_refusals
    assert "serve_model" in capsys.readouterr().err


def test_serve_model_takes_bundled_or_judge_only(tmp_path: Path) -> None:
    from slm_rerank.errors import ConfigError

    user_config().write_text('serve_model = "/tmp/evil.gguf"\n')

    with pytest.raises(ConfigError, match="serve_model' must be one of bundled, judge"):
        load_settings(start=tmp_path)
