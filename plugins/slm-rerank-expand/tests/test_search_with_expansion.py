"""A search with ``--expand``: what the expanded words may and may not do to the results.

The model server is faked with pytest-httpserver answering as llama-server does (recorded
payloads of slm_rerank.testing.recordings); the rest of the pipeline is real.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import slm_rerank_expand
from pytest_httpserver import HTTPServer
from werkzeug import Request, Response

import slm_rerank
from slm_rerank.registrations import ExpandRequest, QueryExpander, WeightedTerm
from slm_rerank.testing import Host, SearchRequest, Settings, run_search
from slm_rerank.testing.recordings import recorded_answer as recorded


def llama_server(httpserver: HTTPServer, answer: str) -> str:
    """A fake llama-server whose /completion generates ``answer``; its base URL."""
    httpserver.expect_request("/v1/models").respond_with_json(recorded("llamacpp-v1-models.json"))
    httpserver.expect_request("/props").respond_with_json(recorded("llamacpp-props.json"))
    httpserver.expect_request("/api/version").respond_with_data("", status=404)
    body = recorded("llamacpp-completion.json")
    body["content"] = answer
    httpserver.expect_request("/completion", method="POST").respond_with_json(body)
    return httpserver.url_for("/").rstrip("/")


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    (root / "app").mkdir(parents=True)
    # Named by the query: "session" and "closed" are both in it.
    (root / "app" / "session.py").write_text(
        "def close_session(session):\n    session.closed = True\n    session.save()\n")
    # Only the model's word finds this one.
    (root / "app" / "auth.py").write_text("def logoff_view(request):\n    request.user = None\n")
    (root / "app" / "colours.py").write_text("RED = '#f00'\n")
    return root.resolve()


def search(root: Path, base_url: str | None, expand: bool, fast: bool = True
           ) -> tuple[list[str], list[str]]:
    settings = Settings(sources=["ripgrep"], base_url=base_url)
    host = Host.with_plugins(settings, slm_rerank_expand, *_sources())
    report = run_search(SearchRequest(query="where is the session closed", root=root,
                                      fast=fast, expanders=["llm"] if expand else []), host)
    return [c.path for c in report.results], report.notes


def _sources() -> list[Any]:
    import slm_rerank_git
    import slm_rerank_ripgrep

    return [slm_rerank_ripgrep, slm_rerank_git]


def test_a_synonym_adds_a_candidate_but_never_displaces_one_the_query_named(
        httpserver: HTTPServer, repo: Path) -> None:
    url = llama_server(httpserver, " logoff_view, logoff")
    plain, _ = search(repo, None, expand=False)
    expanded, notes = search(repo, url, expand=True)
    assert "app/auth.py" not in plain
    assert expanded[0] == plain[0] == "app/session.py"
    assert "app/auth.py" in expanded
    assert any("expander llm added: logoff_view, logoff" in n for n in notes)


def test_fast_expansion_asks_the_server_only_to_expand_and_says_so(
        httpserver: HTTPServer, repo: Path) -> None:
    url = llama_server(httpserver, " logoff_view")
    _, notes = search(repo, url, expand=True, fast=True)
    assert any("asked only to expand the query" in n for n in notes)
    assert [r.path for r, _ in httpserver.log if r.method == "POST"] == ["/completion"]


def test_prose_from_the_model_leaves_recall_unchanged_with_a_note(
        httpserver: HTTPServer, repo: Path) -> None:
    url = llama_server(httpserver, " The session is closed in the session module of the app.")
    plain, _ = search(repo, None, expand=False)
    expanded, notes = search(repo, url, expand=True)
    assert expanded == plain
    assert any(n.startswith("expander llm failed") and "prose" in n for n in notes)


def test_a_server_that_fails_mid_request_leaves_recall_unchanged_with_a_note(
        httpserver: HTTPServer, repo: Path) -> None:
    llama_probe_only(httpserver)
    url = httpserver.url_for("/").rstrip("/")
    plain, _ = search(repo, None, expand=False)
    expanded, notes = search(repo, url, expand=True)
    assert expanded == plain
    assert any(n.startswith("expander llm failed") for n in notes)


def llama_probe_only(httpserver: HTTPServer) -> None:
    """Probes answer as llama-server does; /completion fails with HTTP 500."""
    httpserver.expect_request("/v1/models").respond_with_json(recorded("llamacpp-v1-models.json"))
    httpserver.expect_request("/props").respond_with_json(recorded("llamacpp-props.json"))
    httpserver.expect_request("/api/version").respond_with_data("", status=404)

    def boom(request: Request) -> Response:
        return Response('{"error": {"code": 500, "message": "boom"}}', status=500,
                        content_type="application/json")

    httpserver.expect_request("/completion", method="POST").respond_with_handler(boom)


def test_no_model_server_leaves_recall_unchanged_with_a_note(repo: Path) -> None:
    plain, _ = search(repo, None, expand=False)
    expanded, notes = search(repo, "http://127.0.0.1:9", expand=True)
    assert expanded == plain
    assert any(n.startswith("query expansion has no model") for n in notes)


class Broken:
    @slm_rerank.hookimpl
    def register_query_expanders(self, register: Any) -> None:
        def crash(request: ExpandRequest) -> list[WeightedTerm]:
            raise RuntimeError("plugin bug")

        register(QueryExpander("broken", "always fails", crash))


def test_an_expander_that_crashes_leaves_recall_unchanged_with_a_note(repo: Path) -> None:
    host = Host.with_plugins(Settings(sources=["ripgrep"], base_url="http://127.0.0.1:9"),
                             Broken(), *_sources())
    report = run_search(SearchRequest(query="where is the session closed", root=repo,
                                      expanders=["broken"]), host)
    assert [c.path for c in report.results][0] == "app/session.py"
    assert any("expander broken failed" in n and "plugin bug" in n for n in report.notes)
