"""The managed server's files in ``<cache>/serve/`` (llama/state.py): never followed through
a symlink, never opened or read in a way that blocks (a FIFO), never read without a size cap,
and a record of the wrong shape is no record.

A symlink planted at a state file must leave its target untouched (a pid written over it
was data loss); a FIFO must not hang `serve status`, `serve stop` or a start. Ports are
outside the range queries scan; a fake llama-server that exits at once stands in, so a
start that (wrongly) got past the refusal ends quickly instead of loading a model.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from search_fixtures import cli, free_port
from serve_fixtures import VICTIM_TEXT, record

from slm_rerank.llama import bundled, state

pytestmark = pytest.mark.bundled_server  # slm-rerank serve starts it


#: generous: each command ends in about a second when it refuses the file
BOUND = 60


@pytest.fixture
def exits_at_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A 'llama-server' that fails straight away: no start here may load a model."""
    script = tmp_path / "exits.sh"
    script.write_text("#!/bin/sh\necho 'fake llama-server exits'\nexit 3\n")
    script.chmod(0o755)
    monkeypatch.setenv(bundled.BINARY_ENV, str(script))
    return script


@pytest.fixture
def planted(cache: Path) -> Iterator[list[Path]]:
    """Paths a test planted in the serve folder, removed before the cache fixture's own
    `serve stop` runs (which would refuse them too)."""
    paths: list[Path] = []
    (cache / "serve").mkdir(parents=True, exist_ok=True)
    yield paths
    for path in paths:
        if path.is_symlink() or path.exists():
            path.unlink()


def plant(cache: Path, planted: list[Path], name: str, kind: str, victim: Path) -> Path:
    path = cache / "serve" / name
    if kind == "symlink":
        path.symlink_to(victim)
    else:
        os.mkfifo(path)
    planted.append(path)
    return path


def command(which: str) -> list[str]:
    if which == "start":
        return ["serve", "--background", "--port", str(free_port())]
    return ["serve", which]


CASES = [("server.pid", "status"), ("server.pid", "stop"), ("server.pid", "start"),
         ("server.json", "status"), ("server.json", "stop"),
         ("server.log", "start"), ("start.lock", "start")]


@pytest.mark.parametrize("kind", ["symlink", "fifo"])
@pytest.mark.parametrize(("name", "which"), CASES)
def test_a_state_file_that_is_a_symlink_or_fifo_is_refused_by_name_and_left_alone(
        cache: Path, tmp_path: Path, planted: list[Path], exits_at_once: Path,
        name: str, which: str, kind: str) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_text(VICTIM_TEXT)
    path = plant(cache, planted, name, kind, victim)

    run = cli(*command(which), cwd=tmp_path, timeout=BOUND)  # a hang raises TimeoutExpired

    assert run.returncode == 1, (run.stdout, run.stderr)
    assert f"refusing {path}" in run.stderr
    assert ("a symbolic link" if kind == "symlink" else "a FIFO") in run.stderr
    assert "Traceback" not in run.stderr
    assert victim.read_text() == VICTIM_TEXT


def test_a_symlinked_last_used_is_not_touched_through(cache: Path, tmp_path: Path,
                                                      planted: list[Path]) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_text(VICTIM_TEXT)
    os.utime(victim, (1_000_000, 1_000_000))
    plant(cache, planted, "last-used", "symlink", victim)

    state.touch(cache)

    assert victim.stat().st_mtime == 1_000_000
    assert victim.read_text() == VICTIM_TEXT


def test_a_fifo_at_last_used_neither_blocks_nor_fails_a_query_marking_it(
        cache: Path, tmp_path: Path, planted: list[Path]) -> None:
    plant(cache, planted, "last-used", "fifo", tmp_path)
    toucher = threading.Thread(target=state.touch, args=(cache,), daemon=True)

    toucher.start()
    toucher.join(timeout=BOUND)

    assert not toucher.is_alive(), "touch blocked on a FIFO at last-used"


def test_a_server_json_written_beside_a_planted_temp_symlink_leaves_its_target_alone(
        cache: Path, tmp_path: Path, planted: list[Path]) -> None:
    # the temp file's name was server.json.<pid>: guessable, and written through a symlink
    victim = tmp_path / "victim.txt"
    victim.write_text(VICTIM_TEXT)
    plant(cache, planted, f"server.json.{os.getpid()}", "symlink", victim)
    recorded = state.ServerState(pid=os.getpid(), server_pid=os.getpid(),
                                 url="http://127.0.0.1:1", host="127.0.0.1", port=1,
                                 model="m.gguf", slots=1, started=0.0, idle=0.0, log="")

    state.write_state(cache, recorded)

    assert victim.read_text() == VICTIM_TEXT
    assert state.read_state(cache) == recorded
    (cache / "serve" / "server.json").unlink()


def test_a_folder_at_a_state_file_written_to_is_refused_not_a_traceback(
        cache: Path, tmp_path: Path, planted: list[Path], exits_at_once: Path) -> None:
    folder = cache / "serve" / "start.lock"
    folder.mkdir()

    run = cli(*command("start"), cwd=tmp_path, timeout=BOUND)
    folder.rmdir()

    assert run.returncode == 1
    assert f"refusing {folder}: it is a directory" in run.stderr
    assert "Traceback" not in run.stderr


@pytest.mark.parametrize("fields", [{"pid": "x"}, {"pid": None}, {"port": [1]}, {"url": 3}])
def test_a_server_json_of_the_wrong_shape_is_no_record_not_a_traceback(
        cache: Path, tmp_path: Path, fields: dict[str, object]) -> None:
    record(cache, **fields)

    status = cli("serve", "status", cwd=tmp_path)
    stopped = cli("serve", "stop", cwd=tmp_path)

    assert (status.returncode, stopped.returncode) == (3, 0), status.stderr + stopped.stderr
    assert "Traceback" not in status.stderr + stopped.stderr
    assert stopped.stdout.startswith("not running")


@pytest.mark.parametrize("pid", [0, -1])
def test_a_pid_that_would_signal_a_whole_group_is_no_record(isolated_home: Path,
                                                            pid: int) -> None:
    # os.kill(0, ...) signals our own process group, os.kill(-1, ...) every process: this
    # test only reads the record, and removes it before anything could act on it.
    record(isolated_home, pid=pid, server_pid=pid)
    try:
        read = state.read_state(isolated_home)
    finally:
        (isolated_home / "serve" / "server.json").unlink()

    assert read is None
