"""A last attack round on the features together: what a user meets first, combined."""

from __future__ import annotations

import asyncio
import threading
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

import slm_rerank
from slm_rerank.cli.commands import cli
from slm_rerank.config import user_config_path


def run(*args: str, **kwargs) -> Result:  # type: ignore[no-untyped-def]
    return CliRunner().invoke(cli, list(args), **kwargs)


# --- config set refuses what a search would refuse when it reads the file ------------------


@pytest.mark.parametrize(("key", "value", "message"), [
    ("base_url", "notaurl", "config set base_url: model server URL 'notaurl' is not an http(s)"),
    ("endpoints", '["ftp://x"]', "model server URL 'ftp://x' is not an http(s) URL"),
    ("endpoints", '["http://a:1", "http://a:1/v1"]', "http://a:1 is listed twice"),
    ("endpoints", '{qwen = "notaurl"}', "model server URL 'notaurl' is not an http(s) URL"),
    ("plugins", '{graded = {foo = 1}}', "[plugins.graded]: unknown key 'foo'"),
    ("plugins", '{listwise = {window = "many"}}', "[plugins.listwise]: key 'window'"),
    ("plugins", '{nosuch = {a = 1}}', "nothing named 'nosuch' is registered"),
])
def test_config_set_refuses_urls_and_plugin_options_that_would_fail_when_read(
        key: str, value: str, message: str) -> None:
    result = run("config", "set", key, value)

    assert result.exit_code == 1, result.output
    assert message in result.stderr
    assert f"config set {key}" in result.stderr
    assert not user_config_path().exists()


def test_config_set_still_takes_good_urls_and_plugin_options() -> None:
    assert run("config", "set", "endpoints", '["http://a:1", "http://b:2/v1"]').exit_code == 0
    assert run("config", "set", "base_url", "http://gpu:8000").exit_code == 0
    assert run("config", "set", "plugins", '{graded = {max_grade = 5}}').exit_code == 0
    assert "max_grade = 5" in user_config_path().read_text()


# --- the Python API inside a running event loop (MCP servers, notebooks) -------------------


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


def test_rerank_sync_inside_an_event_loop_says_to_await_rerank() -> None:
    reranker = slm_rerank.Reranker(base_url="http://127.0.0.1:9")

    async def inside_a_loop() -> None:
        reranker.rerank_sync("retry", [slm_rerank.Candidate("a.py", 1, 2, "def retry(): ...",
                                                             lexical_score=1.0)])

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(RuntimeError, match=r"inside a running event loop.*await "
                                               r"reranker\.rerank"):
            asyncio.run(inside_a_loop())


# --- the MCP server --------------------------------------------------------------------------


def test_mcp_takes_local_as_the_degraded_note_tells_its_user(
        repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from slm_rerank.servers import mcp as mcp_server

    served: list[mcp_server.RerankService] = []

    class NotServed:
        def run(self, transport: str) -> None:
            pass

    def build(service: mcp_server.RerankService) -> NotServed:
        served.append(service)
        return NotServed()

    monkeypatch.setattr(mcp_server, "build_server", build)
    monkeypatch.chdir(repo)

    result = run("mcp", "--local")

    assert result.exit_code == 0, result.output
    assert served[0].host_for(served[0].default_root).settings.auto_serve is True


# --- --local (auto_serve) beside pinned servers ----------------------------------------------


@pytest.mark.parametrize("config", [
    'auto_serve = true\nendpoints = ["http://127.0.0.1:9", "http://127.0.0.1:10"]\n',
    'auto_serve = true\nmodel = "qwen"\n[endpoints]\nqwen = "http://127.0.0.1:9"\n',
])
def test_auto_serve_starts_nothing_when_the_config_pins_servers(
        repo: Path, monkeypatch: pytest.MonkeyPatch, config: str) -> None:
    from slm_rerank.llama import local as serve

    started: list[Path] = []
    monkeypatch.setattr(serve, "ensure_local",
                        lambda cache_dir, *args, **kwargs: started.append(cache_dir))
    path = user_config_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(config)

    report = slm_rerank.search("retry backoff", repo, fast=False)

    assert started == []
    assert report.degraded is not None and "127.0.0.1:9" in report.degraded.reason


# --- one process, many threads ---------------------------------------------------------------


def run_at_once(work: Callable[[], object], threads: int = 16) -> list[BaseException]:
    """Run ``work`` in ``threads`` threads released together; the exceptions they raised."""
    gate = threading.Barrier(threads)
    failures: list[BaseException] = []

    def one() -> None:
        gate.wait()
        try:
            work()
        except BaseException as exc:  # noqa: BLE001 - collected for the assertion
            failures.append(exc)

    workers = [threading.Thread(target=one) for _ in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    return failures


def test_threads_proving_one_cache_folder_writable_do_not_trip_over_each_other(
        tmp_path: Path) -> None:
    from slm_rerank.cache_folder import ensure_writable

    def prove() -> None:
        for _ in range(200):
            ensure_writable(tmp_path / "cache")

    assert run_at_once(prove) == []


def test_threads_sharing_a_host_all_see_the_installed_plugins() -> None:
    from slm_rerank.host import Host

    def first_look(host: Host, seen: list[list[str]]) -> None:
        seen.append(sorted(host.registry.scorers()))

    for _ in range(5):
        host, seen = Host.from_environment(), []
        assert run_at_once(lambda h=host, s=seen: first_look(h, s)) == []
        assert all("yesno" in names for names in seen), seen
