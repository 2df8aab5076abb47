"""A pure rerank API (Jina's hosted one) is usable through ``-e URL``.

Such a server answers none of the probes (``/v1/models``, ``/props``, ``/api/version``);
the fake here answers them 404, as a server without those routes does, refuses an empty
``POST /v1/rerank`` as invalid (422, FastAPI's validation shape), and answers a real one
in the documented Jina shape (tests/fixtures/jina-rerank-documented.json).
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import httpx
import pytest
from pytest_httpserver import HTTPServer
from werkzeug import Request, Response

from slm_rerank.testing import probe
from slm_rerank.testing.helpers import cli, load_plugins, make_repo, user_config
from slm_rerank.testing.isolation import isolate

KEY = "jina_test_key"
FILES = {
    "net/retry.py": "def retry_backoff(attempt):\n    return 2 ** attempt\n",
    "net/client.py": "from net.retry import retry_backoff\n\ndef get(url):\n    return url\n",
    "ui/colour.py": "RED = 'red'  # retry colour\n",
}


def jina(request: Request) -> Response:
    """Jina's /v1/rerank: the score of a document is how often it says "retry_backoff"."""
    if request.headers.get("Authorization") != f"Bearer {KEY}":
        return Response('{"detail": "Unauthorized"}', status=401)
    body = request.get_json(silent=True) or {}
    if "query" not in body or "documents" not in body:
        return Response(json.dumps({"detail": [{"loc": ["body", "query"],
                                                "msg": "field required"}]}), status=422,
                        content_type="application/json")
    results = sorted(({"index": i, "relevance_score": min(0.9, 0.1 + 0.4 * d.count("retry_b"))}
                      for i, d in enumerate(body["documents"])),
                     key=lambda r: -r["relevance_score"])
    return Response(json.dumps({"model": body.get("model"), "usage": {"total_tokens": 9},
                                "results": results}), content_type="application/json")


def rerank_api(httpserver: HTTPServer) -> str:
    for path in ("/v1/models", "/props", "/api/version"):
        httpserver.expect_request(path).respond_with_json({"detail": "Not Found"}, status=404)
    httpserver.expect_request("/v1/rerank", method="POST").respond_with_handler(jina)
    return httpserver.url_for("/").rstrip("/")


def test_a_server_that_refuses_an_empty_rerank_request_is_a_rerank_endpoint(
        httpserver: HTTPServer):
    url = rerank_api(httpserver)

    async def main():  # type: ignore[no-untyped-def]
        async with httpx.AsyncClient() as http:
            return await probe(http, url, api_key=KEY)

    found = asyncio.run(main())

    assert found.endpoint is not None and found.endpoint.base_url == url
    assert found.endpoint.api_key == KEY and found.endpoint.model_id is None


def test_slm_rerank_e_url_scorer_rerank_endpoint_ranks_with_a_pure_rerank_api(
        httpserver: HTTPServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    isolate(monkeypatch, tmp_path)
    load_plugins(monkeypatch, "slm-rerank-rerank-endpoint")
    repo = make_repo(tmp_path / "repo", FILES)
    user_config().write_text('[plugins.rerank-endpoint]\napi = "jina"\n')

    done = cli("-q", "retry backoff", "--format", "json", "--threshold", "0", "--no-cache",
               "-e", rerank_api(httpserver), "--scorer", "rerank-endpoint", cwd=repo,
               env={"SLM_API_KEY": KEY})

    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert doc["degraded"] is None and doc["model"]["scorer"] == "rerank-endpoint"
    assert doc["results"][0]["path"] == "net/retry.py"
    asked = [json.loads(r.get_data()) for r, _ in httpserver.log if r.path == "/v1/rerank"]
    assert asked[-1]["model"] == "jina-reranker-v2-base-multilingual"
