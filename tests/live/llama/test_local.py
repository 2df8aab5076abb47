"""`--local` (model/local.py): a query that finds no model server starts the bundled one
once, reuses it, starts it again after a crash, and starts nothing when a server is given."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
from search_fixtures import CLI, REPO_FILES, cli, make_repo
from serve_fixtures import server_json

from slm_rerank.llama import ports
from slm_rerank.model.discovery import PORTS

pytestmark = pytest.mark.bundled_server  # slm-rerank serve starts it


def scan_range_is_free() -> bool:
    return all(not ports.listening("127.0.0.1", port) for port in PORTS)


def test_local_starts_the_bundled_server_once_and_restarts_it_after_a_crash(
        cache: Path, tmp_path: Path) -> None:
    if not scan_range_is_free():
        pytest.skip("something listens on 127.0.0.1:8033-8040; --local would use it")
    repo = make_repo(tmp_path / "repo", REPO_FILES)
    query = ("--local", "--format", "json", "--rerank-top", "2", "-q", "retry backoff")

    first = cli(*query, cwd=repo, timeout=240)

    doc = first.json()
    assert "--local: no model server was running, so started the bundled model at " \
           "http://127.0.0.1:8035" in first.stderr
    assert doc["model"]["endpoint"] == "http://127.0.0.1:8035"
    assert doc["model"]["scored"] == 2
    second = cli(*query, cwd=repo, timeout=240)
    assert "--local:" not in second.stderr  # reused, silently
    assert second.json()["model"]["endpoint"] == "http://127.0.0.1:8035"

    # The server dies (as a crash would): its supervisor notices and clears the record ...
    os.kill(int(server_json(cache)["server_pid"]), signal.SIGKILL)
    deadline = time.monotonic() + 20
    while (cache / "serve" / "server.json").exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not (cache / "serve" / "server.json").exists()
    # ... and the next query starts it again.
    third = cli(*query, cwd=repo, timeout=240)
    assert "started the bundled model" in third.stderr
    assert third.json()["model"]["scored"] == 2


def test_a_query_whose_server_is_killed_mid_run_degrades(cache: Path, tmp_path: Path) -> None:
    if not scan_range_is_free():
        pytest.skip("something listens on 127.0.0.1:8033-8040; --local would use it")
    # enough for the judge to be busy for seconds: on a quiet machine the model judged the
    # few chunks of REPO_FILES in under the 1.5 s below, and nothing was left to degrade
    more = {f"net/client_{n}.py": f"def fetch_{n}(client, attempt):\n"
                                  f"    \"\"\"Retry the fetch with backoff {n}.\"\"\"\n"
                                  f"    return client.fetch(retry={n}, backoff=attempt * {n})\n"
            for n in range(60)}
    repo = make_repo(tmp_path / "repo", {**REPO_FILES, **more})
    started = cli("serve", "--background", cwd=tmp_path, timeout=240)
    assert started.returncode == 0, started.stderr
    victim = int(server_json(cache)["server_pid"])

    query = subprocess.Popen(
        [str(CLI), "--format", "json", "--full", "--no-cache", "--timeout", "120",
         "--rerank-top", "48", "-q", "retry backoff client fetch"],
        cwd=repo, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(1.5)  # the query has found the server and is being judged
    os.kill(victim, signal.SIGKILL)
    out, err = query.communicate(timeout=120)

    assert query.returncode == 0, err
    doc = json.loads(out)
    assert doc["degraded"] is not None
    assert doc["results"], "the lexical order is still given"


def test_without_local_no_server_is_started_and_the_hint_names_local(
        cache: Path, tmp_path: Path) -> None:
    if not scan_range_is_free():
        pytest.skip("something listens on 127.0.0.1:8033-8040")
    repo = make_repo(tmp_path / "repo", REPO_FILES)

    run = cli("--format", "json", "-q", "retry backoff", cwd=repo)

    doc = run.json()
    assert "pass --local to start the bundled model" in doc["degraded"]["reason"]
    assert doc["results"][0]["path"] == "src/net/retry.py"
    assert not (cache / "serve" / "server.json").exists()


def test_local_uses_a_server_given_with_e_and_starts_nothing(
        cache: Path, tmp_path: Path, llama_server: object) -> None:
    repo = make_repo(tmp_path / "repo", REPO_FILES)
    url = llama_server.base_url  # type: ignore[attr-defined]

    run = cli("--local", "-e", url, "--format", "json", "--rerank-top", "2", "-q",
              "retry backoff", cwd=repo, timeout=240)

    assert run.json()["model"]["endpoint"] == url
    assert "--local:" not in run.stderr
    assert not (cache / "serve" / "server.json").exists()


def test_two_local_queries_at_once_start_one_server(cache: Path, tmp_path: Path) -> None:
    if not scan_range_is_free():
        pytest.skip("something listens on 127.0.0.1:8033-8040; --local would use it")
    repo = make_repo(tmp_path / "repo", REPO_FILES)
    argv = [str(CLI), "--local", "--format", "json", "--rerank-top", "1", "-q", "retry backoff"]

    runs = [subprocess.Popen(argv, cwd=repo, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True) for _ in range(2)]
    outs = [run.communicate(timeout=300) for run in runs]

    assert [run.returncode for run in runs] == [0, 0], [err for _, err in outs]
    started = [err for _, err in outs if "so started the bundled model" in err]
    assert len(started) == 1, [err for _, err in outs]
    assert all(json.loads(out)["model"]["endpoint"] == "http://127.0.0.1:8035"
               for out, _ in outs)
    servers = subprocess.run(["pgrep", "-f", f"slm_rerank.llama --cache-dir {cache}"],
                             capture_output=True, text=True).stdout.split()
    assert len(servers) == 1
