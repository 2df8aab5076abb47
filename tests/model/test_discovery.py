"""Finding model servers: what a probe makes of each server kind, the scan, the environment.

Fakes answer with payloads kept in tests/fixtures/wire/; tests/live/model/test_discovery.py
probes and scans a real llama-server.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from misbehaving_servers import misbehaving_server
from model_helpers import closed_ports, probe
from pytest_httpserver import HTTPServer
from search_fixtures import cli

from slm_rerank.errors import ConfigError
from slm_rerank.model import discovery
from slm_rerank.model.client import ModelClient
from slm_rerank.model.discovery import (
    Probe,
    check_base_url,
)
from slm_rerank.registrations import Endpoint

WIRE = Path(__file__).resolve().parent.parent / "fixtures" / "wire"


def wire(name: str) -> Any:
    return json.loads((WIRE / name).read_text(encoding="utf-8"))


def recorded(name: str, index: int = 0) -> Any:
    """The response of one exchange recorded from a real llama-server (record_wire.py)."""
    return wire(name)["exchanges"][index]["response"]


def base(httpserver: HTTPServer) -> str:
    return httpserver.url_for("/").rstrip("/")


def not_found(httpserver: HTTPServer, *paths: str) -> None:
    for path in paths:
        httpserver.expect_request(path).respond_with_json({"detail": "Not Found"}, status=404)


# --- probe ---------------------------------------------------------------------------------


def test_probe_of_llama_cpp_gives_its_model_and_slots(httpserver: HTTPServer):
    httpserver.expect_request("/v1/models").respond_with_json(
        recorded("llamacpp-v1-models.json"))
    httpserver.expect_request("/props").respond_with_json(recorded("llamacpp-props.json"))
    httpserver.expect_request("/api/version").respond_with_json(
        {"error": {"code": 404, "message": "File Not Found", "type": "not_found_error"}},
        status=404)

    found = probe(base(httpserver))

    assert found.endpoint == Endpoint(base(httpserver), "llama.cpp",
                                      "gemma-3-270m-q4_k_m.gguf", slots=4, context_tokens=2048)


def test_probe_of_vllm_gives_an_openai_completions_endpoint_with_its_model(
        httpserver: HTTPServer):
    httpserver.expect_request("/v1/models").respond_with_json(wire("vllm-v1-models.json"))
    not_found(httpserver, "/props", "/api/version")

    found = probe(base(httpserver))

    assert found == Probe(base(httpserver), Endpoint(base(httpserver), "openai-completions",
                                                     "Qwen/Qwen3-Reranker-0.6B", 1), None)


def test_probe_of_ollama_gives_an_ollama_endpoint_named_by_its_first_model(
        httpserver: HTTPServer):
    httpserver.expect_request("/v1/models").respond_with_json(wire("ollama-v1-models.json"))
    httpserver.expect_request("/api/version").respond_with_json(wire("ollama-api-version.json"))
    not_found(httpserver, "/props")

    found = probe(base(httpserver))

    assert found.endpoint == Endpoint(base(httpserver), "ollama", "qwen3:0.6b", 1)


def test_probe_of_ollama_reads_api_tags_when_v1_models_is_missing(httpserver: HTTPServer):
    httpserver.expect_request("/api/version").respond_with_json(wire("ollama-api-version.json"))
    httpserver.expect_request("/api/tags").respond_with_json(wire("ollama-api-tags.json"))
    not_found(httpserver, "/props", "/v1/models")

    found = probe(base(httpserver))

    assert found.endpoint is not None and found.endpoint.model_id == "qwen3:0.6b"


def test_probe_of_an_ollama_without_logprobs_says_to_upgrade(httpserver: HTTPServer):
    httpserver.expect_request("/v1/models").respond_with_json(wire("ollama-v1-models.json"))
    httpserver.expect_request("/api/version").respond_with_json(
        wire("ollama-api-version-0.12.3.json"))
    not_found(httpserver, "/props")

    found = probe(base(httpserver))

    assert found.endpoint is None
    assert found.reason is not None and "0.12.3 returns no logprobs" in found.reason


def test_probe_of_a_server_loading_its_model_says_still_loading(httpserver: HTTPServer):
    loading = recorded("llamacpp-health-loading.json")  # every endpoint says so while loading
    for path in ("/v1/models", "/props"):
        httpserver.expect_request(path).respond_with_json(loading, status=503)
    not_found(httpserver, "/api/version")

    assert probe(base(httpserver)) == Probe(base(httpserver), None, "still loading (503)")


def test_probe_of_a_web_server_that_is_not_a_model_server(httpserver: HTTPServer):
    not_found(httpserver, "/v1/models", "/props", "/api/version")

    found = probe(base(httpserver))

    assert found.endpoint is None
    assert found.reason == "not a model server (GET /v1/models: 404)"


def test_probe_of_a_closed_port_says_refused():
    [port] = closed_ports(1)

    assert probe(f"http://127.0.0.1:{port}").reason == "refused"


def test_probe_accepts_a_model_client(httpserver: HTTPServer):
    httpserver.expect_request("/v1/models").respond_with_json(wire("vllm-v1-models.json"))
    not_found(httpserver, "/props", "/api/version")

    async def main() -> Probe:
        async with ModelClient() as client:
            return await discovery.probe(client, base(httpserver))

    assert asyncio.run(main()).endpoint is not None


# --- scan ----------------------------------------------------------------------------------


def test_scan_of_closed_ports_reports_each_as_refused():
    ports = closed_ports(8)

    probes = asyncio.run(discovery.scan("127.0.0.1", ports))

    assert [p.url for p in probes] == [f"http://127.0.0.1:{port}" for port in ports]
    assert [p.reason for p in probes] == ["refused"] * 8


def test_scan_finds_a_model_server_among_closed_ports(httpserver: HTTPServer):
    httpserver.expect_request("/v1/models").respond_with_json(wire("vllm-v1-models.json"))
    not_found(httpserver, "/props", "/api/version")
    ports = [*closed_ports(2), httpserver.port]

    probes = asyncio.run(discovery.scan(httpserver.host, ports))

    assert [p.endpoint is not None for p in probes] == [False, False, True]


def test_the_default_scan_is_loopback_on_ports_8033_to_8040():
    assert discovery.DEFAULT_HOST == "127.0.0.1"
    assert list(discovery.PORTS) == list(range(8033, 8041))


# --- deadlines and size caps: a listener that trickles or floods ---------------------------

#: how long a test waits before calling a probe hung: far past every bound under test
HUNG = 20.0


def within(seconds: float, coroutine: Any) -> tuple[Any, float]:
    """The coroutine's result and how long it took; a TimeoutError if it ran past
    ``seconds`` (a hang fails the test instead of stalling the suite)."""
    async def main() -> tuple[Any, float]:
        started = time.monotonic()
        result = await asyncio.wait_for(coroutine, seconds)
        return result, time.monotonic() - started
    return asyncio.run(main())


async def probe_with_httpx(url: str, timeout: float) -> Probe:
    async with httpx.AsyncClient() as http:
        return await discovery.probe(http, url, timeout=timeout)


def test_a_probe_of_a_server_that_trickles_its_answer_ends_within_its_timeout():
    # one byte every 0.2 s: each read is quicker than the timeout, the answer never ends
    with misbehaving_server("trickle", interval=0.2) as server:
        found, took = within(HUNG, probe_with_httpx(server.url, timeout=1.0))

    assert found.endpoint is None and found.reason.startswith("timeout")
    assert not found.permanent  # a busy server may answer next time
    assert took < 5 * 1.0


def test_a_scan_with_a_trickling_port_ends_within_the_scan_deadline():
    with misbehaving_server("trickle", interval=0.2) as server:
        ports = [*closed_ports(2), server.port]
        probes, took = within(HUNG, discovery.scan("127.0.0.1", ports, timeout=1.0))

    assert [p.reason for p in probes[:2]] == ["refused"] * 2
    assert probes[2].reason.startswith("timeout")
    assert took < 5 * 1.0


def test_a_scan_timeout_names_the_configured_deadline_not_the_time_that_was_left():
    with misbehaving_server("trickle", interval=0.2) as server:
        ports = [*closed_ports(2), server.port]
        probes, _ = within(HUNG, discovery.scan("127.0.0.1", ports, timeout=0.5))

    assert probes[2].reason == "timeout (no whole answer within 0.5 s)"


def test_a_probe_stops_reading_an_answer_larger_than_its_cap():
    with misbehaving_server("flood", body_bytes=300_000_000) as server:
        found, _ = within(HUNG, probe_with_httpx(server.url, timeout=10.0))
        sent = server.sent

    assert found.endpoint is None
    assert f"sent more than {discovery.MAX_PROBE_BYTES // 1_000_000} MB" in found.reason
    assert found.permanent
    # the cap, not the server, ended the read: the client hung up long before 300 MB
    # (kernel socket buffers on both sides hold a few megabytes at most)
    assert sent < 50_000_000


def test_a_search_pinned_to_a_trickling_server_degrades_within_its_timeout(
        isolated_home: Path, repo: Path):
    with misbehaving_server("trickle", interval=0.2) as server:
        started = time.monotonic()
        # a real process, so that a hang is a TimeoutExpired and not a stalled suite
        run = cli("-q", "retry", "--root", str(repo), "-e", server.url, "--timeout", "1",
                  cwd=repo, timeout=HUNG)
        took = time.monotonic() - started

    assert run.returncode == 0, run.stderr
    assert "did not answer" in run.stderr and "timeout" in run.stderr
    assert took < 5 * 1.0 + 5  # the deadline, and the process and lexical search around it


# --- environment and URLs ------------------------------------------------------------------


@pytest.mark.parametrize("url, normalised", [
    ("http://127.0.0.1:8033/", "http://127.0.0.1:8033"),
    ("  https://gpu.example:443/llama/  ", "https://gpu.example:443/llama"),
    ("http://localhost:8000/v1", "http://localhost:8000"),
    ("http://[::1]:8033", "http://[::1]:8033"),
])
def test_base_urls_are_normalised(url: str, normalised: str):
    assert check_base_url(url) == normalised


@pytest.mark.parametrize("url", ["ftp://host:21", "localhost:8033", "http://", "http://h:port",
                                 "http://h:1/?x=1"])
def test_a_bad_base_url_is_a_config_error_naming_it(url: str):
    with pytest.raises(ConfigError, match="model server URL"):
        check_base_url(url)


# --- the managed server, wherever it listens -------------------------------------------------


def test_a_managed_server_record_that_hangs_is_given_up_within_the_deadline(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    from slm_rerank.llama import processes as serve

    release = threading.Event()
    # a state file on a FIFO, a /health that never ends: whatever it is, it does not return
    monkeypatch.setattr(serve, "running", lambda cache_dir: release.wait(60) and None)
    try:
        started = time.monotonic()
        url = discovery.managed_url(tmp_path, timeout=0.5)
        took = time.monotonic() - started
    finally:
        release.set()

    assert url is None
    assert took < 5 * 0.5


# --- the hint when nothing answers -------------------------------------------------------------

#: a loopback address the discovery ports are free on (tests and servers bind 127.0.0.1)
QUIET_HOST = "127.0.0.2"


def test_the_no_server_hint_names_commands_a_pip_install_has_not_docs_files(
        isolated_home: Path, repo: Path):
    run = cli("--format", "json", "-q", "retry", "--root", str(repo), "--host", QUIET_HOST,
              cwd=repo, timeout=60)
    listed = cli("endpoints", "--host", QUIET_HOST, cwd=repo, timeout=60)

    reason = run.json()["degraded"]["reason"]
    assert "docs/" not in reason and "docs/" not in listed.stdout  # a wheel has no docs/
    assert "pass --local" in reason and "slm-rerank serve --help" in reason
    assert "slm-rerank serve --help" in listed.stdout.splitlines()[-1]
    assert cli("serve", "--help", cwd=repo).returncode == 0


def test_the_no_server_hint_does_not_ask_for_local_when_it_was_passed(
        isolated_home: Path, repo: Path):
    run = cli("--local", "--format", "json", "-q", "retry", "--root", str(repo), "--host",
              QUIET_HOST, cwd=repo, timeout=60)

    reason = run.json()["degraded"]["reason"]
    assert "pass --local" not in reason and "-e URL" in reason
