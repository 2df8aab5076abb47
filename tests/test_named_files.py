"""Files the user names on the command line (safefile.read_named): `--query-file`, `bench
--cases` and `serve-api --api-key-file` never wait for ever on a FIFO nobody writes, refuse
a device or a folder in one line, and still read a pipe a program fills and closes."""

from __future__ import annotations

import os
import subprocess
import threading
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from search_fixtures import cli, free_port

from slm_rerank import safefile
from slm_rerank.cli.commands import cli as main
from slm_rerank.model import progress
from slm_rerank.servers import api_key

#: generous: each refusal here comes after a deadline of half a second
BOUND = 30


def invoke_in_time(args: list[str]) -> Result:
    """The command in this process, in a thread: a test that hangs fails instead."""
    done: list[Result] = []
    worker = threading.Thread(target=lambda: done.append(CliRunner().invoke(main, args)),
                              daemon=True)
    worker.start()
    worker.join(BOUND)
    assert not worker.is_alive(), f"slm-rerank {' '.join(args)} still waits on the FIFO"
    return done[0]


def error_line(result: Result) -> str:
    """The error's line (in this process click adds its usage lines; the installed command
    prints the error alone, as the subprocess tests below show)."""
    assert result.exit_code in (1, 2), result.output
    assert "Traceback" not in result.output, result.output
    lines = [line for line in result.output.splitlines() if "rror" in line]
    assert len(lines) == 1, result.output
    return lines[0]


@pytest.mark.parametrize("command", [
    ["search", "--fast", "--query-file"],
    ["bench", "--fast", "--cases"],
    ["serve-api", "--port", "PORT", "--api-key-file"],
])
def test_a_fifo_nobody_writes_is_a_one_line_error_within_its_deadline(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, command: list[str]) -> None:
    monkeypatch.setattr(safefile, "PIPE_SECONDS", 0.5)
    monkeypatch.setattr(api_key, "KEY_PIPE_SECONDS", 0.5)
    monkeypatch.setattr(progress, "QUIET", progress.QUIET)  # serve-api sets it, in-process
    monkeypatch.chdir(tmp_path)
    fifo = tmp_path / "named.fifo"
    os.mkfifo(fifo)

    args = [str(free_port()) if word == "PORT" else word for word in command]

    said = error_line(invoke_in_time([*args, str(fifo)]))

    assert str(fifo) in said
    assert "within 0.5 s" in said


@pytest.mark.parametrize("command", [["--fast", "--query-file"], ["bench", "--fast", "--cases"],
                                     ["serve-api", "--api-key-file"]])
@pytest.mark.parametrize(("named", "what"), [("/dev/zero", "a character device"),
                                             ("folder", "a directory")])
def test_a_device_or_a_folder_is_refused_in_one_line_naming_it(
        tmp_path: Path, command: list[str], named: str, what: str) -> None:
    if named == "folder":
        (tmp_path / named).mkdir()
    args = [*command, named] + (["--port", str(free_port())] if "serve-api" in command else [])

    run = cli(*args, cwd=tmp_path, timeout=BOUND)

    assert run.returncode in (1, 2)
    assert run.stderr.count("\n") == 1 and "Traceback" not in run.stderr, run.stderr
    assert named in run.stderr and what in run.stderr


def test_a_fifo_a_program_fills_and_closes_is_read_as_the_query(repo: Path) -> None:
    fifo = repo.parent / "query.fifo"
    os.mkfifo(fifo)
    writer = subprocess.Popen(["sh", "-c", f"printf 'retry backoff' > '{fifo}'"])
    try:
        run = cli("--query-file", str(fifo), "--fast", "--format", "json", cwd=repo,
                  timeout=BOUND)
    finally:
        writer.kill()
        writer.wait()

    assert run.returncode == 0, run.stderr
    assert run.json()["query"] == "retry backoff"
