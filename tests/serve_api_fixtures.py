"""serve-api run as a real subprocess on a free port, for the tests with a fake judge and
the ones with the real llama-server alike."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from search_fixtures import free_port

CLI = Path(sys.executable).parent / "slm-rerank"
QUERY = "how do I rotate an API key?"
DOCS = ["To rotate an API key, open Settings > Security and press Rotate.",
        "Our office is closed on public holidays.",
        "API keys expire after 90 days unless rotated."]
KEY = "s3cret-key-for-tests"


@dataclasses.dataclass
class ApiServer:
    url: str
    process: subprocess.Popen[str]

    def stderr(self) -> str:
        self.process.terminate()
        return self.process.communicate(timeout=10)[1]


@pytest.fixture
def serve_api(tmp_path: Path) -> Iterator[Callable[..., ApiServer]]:
    """Start `slm-rerank serve-api ARGS` on a free port; every one is stopped at the end."""
    started: list[subprocess.Popen[str]] = []

    def start(*args: str, env: dict[str, str] | None = None) -> ApiServer:
        port = free_port()
        environ = {**os.environ, "SLM_RERANK_CACHE_DIR": str(tmp_path / "cache"),
                   "XDG_CONFIG_HOME": str(tmp_path / "config"), **(env or {})}
        environ.pop("SLM_ENDPOINT", None)
        process = subprocess.Popen([str(CLI), "serve-api", "--port", str(port), *args],
                                   cwd=tmp_path, env=environ, stdin=subprocess.DEVNULL,
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        started.append(process)
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if process.poll() is not None:
                pytest.fail(f"serve-api exited {process.returncode}: "
                            f"{process.communicate()[1]}")
            try:
                if httpx.get(url + "/health", timeout=2).status_code == 200:
                    return ApiServer(url, process)
            except httpx.TransportError:
                time.sleep(0.1)
        pytest.fail("serve-api did not answer /health within 60 s")

    try:
        yield start
    finally:
        for process in started:
            process.terminate()
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def post(server: ApiServer, body: Any, path: str = "/v1/rerank", **kwargs: Any
         ) -> httpx.Response:
    return httpx.post(server.url + path, json=body, timeout=300, **kwargs)


@pytest.fixture
def in_process_api() -> Iterator[Callable[..., tuple[str, int]]]:
    """``start(host, **options)`` runs serve-api's HTTP server in this process for ``host``
    with ``ApiOptions(**options)`` on a free port outside the scanned range, and returns
    (url, port); every server started is shut down after the test."""
    import threading

    from slm_rerank.servers.rerank_api import ApiOptions, RerankApiService, make_server

    running: list[tuple[Any, RerankApiService]] = []

    def start(host: Any, **options: Any) -> tuple[str, int]:
        service = RerankApiService(host, ApiOptions(port=free_port(), **options))
        server = make_server(service)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        running.append((server, service))
        port = server.server_address[1]
        return f"http://127.0.0.1:{port}", port

    try:
        yield start
    finally:
        for server, service in running:
            server.shutdown()
            server.server_close()
            service.close()

