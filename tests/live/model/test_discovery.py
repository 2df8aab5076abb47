"""Finding a real llama-server: a probe reads its kind, model, slots and context; the scan
and --local find it."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from model_helpers import closed_ports, probe
from search_fixtures import REPO_FILES, cli, free_port, make_repo

from slm_rerank.model import discovery
from slm_rerank.registrations import Endpoint


def test_probe_of_a_real_llama_server_gives_its_kind_model_slots_and_context(
        llama_server: Any):
    found = probe(llama_server.base_url)

    assert found.endpoint == Endpoint(llama_server.base_url, "llama.cpp", llama_server.model_id,
                                      llama_server.slots,
                                      context_tokens=llama_server.ctx_per_slot)


def test_scan_finds_a_real_llama_server_among_closed_ports(llama_server: Any):
    port = int(llama_server.base_url.rsplit(":", 1)[1])
    ports = [*closed_ports(3), port]

    probes = asyncio.run(discovery.scan("127.0.0.1", ports))

    assert [p.reason for p in probes[:3]] == ["refused"] * 3
    assert probes[3].endpoint is not None and probes[3].endpoint.kind == "llama.cpp"
    assert probes[3].endpoint.slots == llama_server.slots


@pytest.mark.bundled_server
def test_a_managed_server_on_a_port_outside_the_scan_is_found_by_local_and_endpoints(
        cache: Path, tmp_path: Path):
    port = free_port()  # outside 8033-8040: a scan of those ports alone misses it
    repo = make_repo(tmp_path / "repo", REPO_FILES)
    started = cli("serve", "--background", "--port", str(port), cwd=tmp_path, timeout=240)
    assert started.returncode == 0, started.stderr
    url = f"http://127.0.0.1:{port}"

    run = cli("--local", "--format", "json", "--rerank-top", "1", "-q", "retry backoff",
              cwd=repo, timeout=240)
    listed = cli("endpoints", "--format", "json", cwd=tmp_path, timeout=60)

    assert run.returncode == 0, run.stderr
    assert run.json()["model"]["endpoint"] == url
    assert "pass --local" not in run.stdout + run.stderr
    rows = {row["url"]: row for row in json.loads(listed.stdout)}
    assert rows[url]["kind"] == "llama.cpp"
    assert cli("endpoints", cwd=tmp_path, timeout=60).stdout.startswith(
        f"{url}  llama.cpp")  # listed first, and marked as the managed one
