"""The Python API: `slm_rerank.search(...)` returns a Report, logs, and raises clearly."""

from __future__ import annotations

import asyncio
import json
import warnings
from pathlib import Path
from typing import Any

import pytest
from search_fixtures import cli

import slm_rerank
from slm_rerank.config import ConfigError, user_config_path
from slm_rerank.errors import QueryError, SearchError


def test_search_returns_ranked_citations(repo: Path) -> None:
    report = slm_rerank.search("where is the retry backoff", root=repo)
    assert report.mode == "fast" and report.degraded is None
    first = report.results[0]
    assert (first.path, first.start_line, first.symbol) == ("src/net/retry.py", 4, "backoff")
    assert first.model_score is None and first.lexical_score > 0
    assert report.score_kind == "learned" and 0 < first.score <= 1


def test_search_ranks_exactly_as_the_command_line_does(repo: Path) -> None:
    report = slm_rerank.search("where is the retry backoff", root=repo)
    printed = cli("-q", "where is the retry backoff", "--fast", "--format", "json",
                  cwd=repo).json()
    assert [(c.path, c.start_line, c.end_line, c.symbol) for c in report.results] == [
        (r["path"], r["start_line"], r["end_line"], r["symbol"]) for r in printed["results"]]


def test_search_honours_top_k_and_logs_the_python_caller(
        repo: Path, isolated_home: Path) -> None:
    report = slm_rerank.search("retry colour", root=str(repo), top_k=1)
    assert len(report.results) == 1
    entry = json.loads((isolated_home / "usage.jsonl").read_text())
    assert entry["caller"] == "python" and entry["query"] == "retry colour"


def test_search_raises_named_errors(repo: Path, tmp_path: Path) -> None:
    with pytest.raises(QueryError, match="stop words"):
        slm_rerank.search("the of and", root=repo)
    with pytest.raises(SearchError, match="does not exist"):
        slm_rerank.search("retry", root=tmp_path / "nowhere")
    user_config_path().parent.mkdir(parents=True, exist_ok=True)
    user_config_path().write_text("top_k = 'x'\n")  # a repository's file only warns
    with pytest.raises(ConfigError, match="key 'top_k' must be an integer"):
        slm_rerank.search("retry", root=repo)


def test_search_gives_stubs_slices_and_dirty_kinds_as_the_docs_show(repo: Path) -> None:
    report = slm_rerank.search("retry backoff", root=repo, top_k=2, stubs="stub",
                               by_slice=True, dirty=True)

    first = report.results[0]
    assert first.path == "src/net/retry.py"
    assert first.slice == "src/net" and first.dirty == "untracked"
    assert "def backoff(attempt):" in first.stub.text
    assert report.slices is not None
    assert report.results[report.slices[0].members[0]] is first


def test_search_refuses_an_unknown_stub_kind(repo: Path) -> None:
    with pytest.raises(ValueError, match="stubs must be None, 'stub' or 'skeleton', not"):
        slm_rerank.search("retry", root=repo, stubs="full")


def test_stubs_skeleton_folds_every_body_and_the_old_name_slice_is_refused(
        tmp_path: Path) -> None:
    (tmp_path / "store.py").write_text(
        "import json\n\n\ndef save_checkpoint(state):\n    json.dumps(state)\n    return 1\n")

    skeleton, stub = (slm_rerank.search("save checkpoint", root=tmp_path, top_k=1,
                                        stubs=kind).results[0].stub
                      for kind in ("skeleton", "stub"))

    assert skeleton is not None and "def save_checkpoint(state):" in skeleton.text
    with pytest.raises(ValueError, match="stubs must be None, 'stub' or 'skeleton', not 'slice'"):
        slm_rerank.search("save checkpoint", root=tmp_path, stubs="slice")
    assert "json.dumps(state)" in stub.text and "json.dumps(state)" not in skeleton.text


def test_a_path_outside_the_root_names_the_parameter_of_whoever_asked(
        repo: Path, tmp_path: Path) -> None:
    outside = str(tmp_path)  # the repo fixture lives below it

    with pytest.raises(SearchError, match="pass root= to search another"):
        slm_rerank.search("retry", repo, paths=[outside])
    run = cli("-q", "retry", "--fast", outside, cwd=repo)
    assert run.returncode != 0 and "pass --root to search another" in run.stderr


@pytest.mark.parametrize(("call", "says"), [
    (lambda root: slm_rerank.search(None, root), r"query=\.\.\.\) must be a str, not NoneType"),
    (lambda root: slm_rerank.search(b"retry", root), r"must be a str, not bytes"),
    (lambda root: slm_rerank.search("retry", root, paths="src"),
     r"paths=\.\.\.\) must be a list of str, not 'src'"),
    (lambda root: slm_rerank.search("retry", root, piped_paths="src/a.py"),
     r"piped_paths=\.\.\.\) must be a list of str"),
])
def test_arguments_of_the_wrong_type_are_a_type_error_naming_them(repo: Path, call, says) -> None:
    with pytest.raises(TypeError, match=says):
        call(repo)


# --- inside a running event loop (MCP servers, notebooks) -----------------------------------


@pytest.mark.parametrize("options", [
    {"fast": False, "stubs": "stub", "dirty": True, "by_slice": True},
    {"fast": True, "expand": True},
])
def test_search_that_needs_the_model_inside_an_event_loop_says_to_use_a_thread(
        repo: Path, options: dict[str, Any]) -> None:
    async def inside_a_loop() -> None:
        slm_rerank.search("retry backoff", repo, **options)

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no "coroutine ... was never awaited" either
        with pytest.raises(RuntimeError, match=r"inside a running event loop.*to_thread"):
            asyncio.run(inside_a_loop())


def test_a_fast_search_inside_an_event_loop_still_answers(repo: Path) -> None:
    async def inside_a_loop() -> slm_rerank.Report:
        return slm_rerank.search("retry backoff", repo, stubs="stub", dirty=True,
                                 by_slice=True)

    assert asyncio.run(inside_a_loop()).results


# --- --local (auto_serve) beside pinned servers ----------------------------------------------


@pytest.mark.parametrize("config", [
    'auto_serve = true\nendpoints = ["http://127.0.0.1:9", "http://127.0.0.1:10"]\n',
    'auto_serve = true\nmodel = "qwen"\n[endpoints]\nqwen = "http://127.0.0.1:9"\n',
])
def test_auto_serve_starts_nothing_when_the_config_pins_servers(
        repo: Path, monkeypatch: pytest.MonkeyPatch, config: str) -> None:
    from slm_rerank.model import local as serve

    started: list[Path] = []
    monkeypatch.setattr(serve, "ensure_local",
                        lambda cache_dir, *args, **kwargs: started.append(cache_dir))
    path = user_config_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(config)

    report = slm_rerank.search("retry backoff", repo, fast=False)

    assert started == []
    assert report.degraded is not None and "127.0.0.1:9" in report.degraded.reason


def test_a_warm_process_reuses_its_host_until_a_config_file_changes(
        repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from slm_rerank.host import Host

    built: list[Path | None] = []
    real = Host.from_environment.__func__  # type: ignore[attr-defined]

    def counting(cls: type[Host], start: Path | None = None, flags: Any = None) -> Host:
        built.append(start)
        return real(cls, start=start, flags=flags)

    monkeypatch.setattr(Host, "from_environment", classmethod(counting))
    monkeypatch.setattr("slm_rerank.warm.API_HOSTS._hosts", {})
    paths = [[c.path for c in slm_rerank.search("retry backoff", repo).results]]
    paths.append([c.path for c in slm_rerank.search("retry backoff", repo).results])
    assert len(built) == 1 and paths[0] == paths[1]  # the second call read nothing again

    # the repository's file appears, changes and goes: each call reads what is there now
    config = repo / ".slm-rerank.toml"
    config.write_text("max_file_bytes = 200\n")
    capped = [c.path for c in slm_rerank.search("retry backoff", repo).results]
    config.write_text("max_file_bytes = 100000\n")
    lifted = [c.path for c in slm_rerank.search("retry backoff", repo).results]
    config.unlink()
    again = [c.path for c in slm_rerank.search("retry backoff", repo).results]
    user_config_path().parent.mkdir(parents=True, exist_ok=True)
    user_config_path().write_text("max_file_bytes = 200\n")  # the user's file too
    user_capped = [c.path for c in slm_rerank.search("retry backoff", repo).results]

    assert "src/net/retry.py" in paths[0] and "src/net/retry.py" not in capped
    assert lifted == again == paths[0]
    assert "src/net/retry.py" not in user_capped
    # read again for each change; the file gone is the first state, its host kept
    assert len(built) == 4
