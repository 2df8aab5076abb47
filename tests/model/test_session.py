"""A model session keeps one client and the endpoint it found warm across queries."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from pytest_httpserver import HTTPServer
from search_fixtures import make_repo

from slm_rerank.host import Host
from slm_rerank.model.session import ModelSession
from slm_rerank.pipeline import SearchRequest, run_search

WIRE = Path(__file__).resolve().parent.parent / "fixtures" / "wire"


def recorded(name: str) -> Any:
    return copy.deepcopy(json.loads((WIRE / name).read_text())["exchanges"][0]["response"])


def serve_llama_cpp(httpserver: HTTPServer) -> str:
    props = recorded("llamacpp-props.json")
    props["total_slots"] = 1
    httpserver.expect_request("/v1/models").respond_with_json(
        recorded("llamacpp-v1-models.json"))
    httpserver.expect_request("/props").respond_with_json(props)
    httpserver.expect_request("/api/version").respond_with_data("", status=404)
    httpserver.expect_request("/tokenize").respond_with_data("", status=404)
    httpserver.expect_request("/completion").respond_with_json(
        recorded("llamacpp-completion.json"))
    return httpserver.url_for("/").rstrip("/")


def session_host(httpserver: HTTPServer, tmp_path: Path) -> tuple[Path, Host, ModelSession]:
    """A repository and a host on a fake llama.cpp server, with a model session."""
    url = serve_llama_cpp(httpserver)
    root = make_repo(tmp_path / "repo", {"net/retry.py": "def retry_backoff():\n    pass\n"})
    host = Host.from_environment(start=root, flags={"base_url": url, "rerank_top": 1,
                                                    "score_cache": False, "threshold": 0.0})
    host.model_session = ModelSession()
    return root, host, host.model_session


def test_a_second_query_reuses_the_client_and_the_endpoint_without_probing_again(
        httpserver: HTTPServer, tmp_path: Path) -> None:
    root, host, session = session_host(httpserver, tmp_path)
    client = session.client
    try:
        reports = [run_search(SearchRequest(query=q, root=root.resolve(), fast=False), host)
                   for q in ("retry backoff", "backoff of retries")]
    finally:
        session.close()

    assert all(r.degraded is None and r.model and r.model.scored == 1 for r in reports)
    probes = [r for r, _ in httpserver.log if r.path == "/v1/models"]
    assert len(probes) == 1  # the second query trusted the endpoint the first one found
    assert session.client is client
    assert any("kept from an earlier call" in n for n in reports[1].notes)


def test_a_failed_server_is_looked_for_again_on_the_next_query(
        httpserver: HTTPServer, tmp_path: Path) -> None:
    root, host, session = session_host(httpserver, tmp_path)
    try:
        run_search(SearchRequest(query="retry", root=root.resolve(), fast=False), host)
        httpserver.clear_all_handlers()
        httpserver.expect_request("/completion").respond_with_data("down", status=503)
        failed = run_search(SearchRequest(query="retry backoff", root=root.resolve(),
                                          fast=False), host)
        assert failed.degraded is not None
        httpserver.clear_all_handlers()
        serve_llama_cpp(httpserver)
        again = run_search(SearchRequest(query="retry", root=root.resolve(), fast=False), host)
    finally:
        session.close()

    assert again.degraded is None
    probes = [r for r, _ in httpserver.log if r.path == "/v1/models"]
    assert len(probes) == 2  # found on the first query, looked for again after the failure
