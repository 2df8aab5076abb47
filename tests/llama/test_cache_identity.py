"""A managed server belongs to its cache folder (llama/state.py, processes.py, control.py):
a copied or restored cache folder brings the original's records along, and `serve status`
and `serve stop` there neither report that server as the copy's nor stop it.

A real supervisor (`slm-rerank serve --background`) runs a stand-in llama-server (a small
HTTP server answering /health, started with llama-server's arguments) in cache folder A;
B is a copy of A made while it runs.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from search_fixtures import Run, cli, free_port
from serve_fixtures import wait_gone

from slm_rerank.llama import bundled, ports

FAKE_LLAMA = """\
import http.server, json, sys

args = sys.argv[1:]
host, port = args[args.index("--host") + 1], int(args[args.index("--port") + 1])


class Answer(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = json.dumps({"/health": {"status": "ok"}, "/slots": []}.get(
            self.path, {"data": [{"id": "stand-in.gguf"}]})).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


http.server.HTTPServer((host, port), Answer).serve_forever()
"""


@dataclass
class Original:
    """Cache folder A, whose server runs, and what a command run for a folder needs."""

    folder: Path
    url: str
    supervisor: int
    llama: int
    env: dict[str, str]

    def serve(self, folder: Path, *args: str) -> Run:
        return cli("serve", *args, cwd=folder.parent,
                   env={**self.env, "SLM_RERANK_CACHE_DIR": str(folder)}, timeout=60)


@pytest.fixture
def original(tmp_path: Path) -> Iterator[Original]:
    script = tmp_path / "llama-server"
    script.write_text(f"#!{sys.executable}\n{FAKE_LLAMA}")
    script.chmod(0o755)
    model = tmp_path / "stand-in.gguf"
    model.write_bytes(b"GGUF" + bytes(60))
    folder = tmp_path / "cache-a"
    port = free_port()
    env = {bundled.BINARY_ENV: str(script)}
    started = cli("serve", "--background", "--port", str(port), "--model-file", str(model),
                  cwd=tmp_path, env={**env, "SLM_RERANK_CACHE_DIR": str(folder)}, timeout=120)
    assert started.returncode == 0, started.stderr
    record = json.loads((folder / "serve" / "server.json").read_text())
    running = Original(folder, started.stdout.strip(), record["pid"], record["server_pid"], env)
    try:
        yield running
    finally:  # as serve stop does, without starting one more command
        for pid in (running.supervisor, running.llama):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)
            if not wait_gone(pid, 5):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)


def copy_of(original: Path, copy: Path, how: str) -> None:
    if how == "hard-linked":  # cp -al, rsync --link-dest: the files are the same inodes
        shutil.copytree(original, copy, copy_function=os.link)
        return
    shutil.copytree(original, copy)
    if how == "copied-older-record":  # server.json as a version that named no folder wrote
        path = copy / "serve" / "server.json"
        record = json.loads(path.read_text())
        del record["cache_dir"]
        path.write_text(json.dumps(record))


@pytest.mark.parametrize("how", ["copied", "hard-linked", "copied-older-record"])
def test_stop_in_a_copied_cache_folder_leaves_the_originals_server_running(
        original: Original, tmp_path: Path, how: str) -> None:
    copy = tmp_path / "cache-b"
    copy_of(original.folder, copy, how)

    stopped = original.serve(copy, "stop")

    assert stopped.returncode == 0, stopped.stderr
    assert stopped.stdout.startswith("not running"), stopped.stdout
    assert ports.healthy(original.url), f"serve stop in {copy} stopped {original.folder}'s server"
    status = original.serve(original.folder, "status")
    assert status.returncode == 0 and status.stdout.startswith("running:"), status.stdout


def test_status_in_a_copied_cache_folder_names_the_original_not_a_reused_pid(
        original: Original, tmp_path: Path) -> None:
    copy = tmp_path / "cache-b"
    copy_of(original.folder, copy, "copied")

    status = original.serve(copy, "status")
    stopped = original.serve(copy, "stop")

    assert status.returncode == 3
    assert "reused pid" not in status.stdout and "another process now" not in status.stdout
    assert f"written for the cache folder {original.folder.resolve()}" in status.stdout
    assert f"its supervisor (pid {original.supervisor}) still runs, serving that folder" \
        in status.stdout
    assert "stops it" not in status.stdout  # nothing here for serve stop to stop
    assert stopped.stdout.startswith("not running (removed a record copied from the cache "
                                     f"folder {original.folder.resolve()}")
    assert not (copy / "serve" / "server.json").exists()
    assert ports.healthy(original.url)
