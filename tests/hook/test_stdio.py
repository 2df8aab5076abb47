"""The prompt hook's standard streams: reading stdin counts against its deadline (a caller
that leaves the pipe open does not hold the prompt), and it says at most one line on stderr
whatever else would have been written there."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from search_fixtures import CLI, user_config

#: generous bounds over a 2 s deadline: a loaded machine starts Python slowly
DEADLINE = 2.0
BOUND = 20.0
#: an open pipe the unfixed hook waited on: far longer than BOUND
HELD_OPEN = 60.0


def hook_input(prompt: str, cwd: Path) -> bytes:
    return json.dumps({"session_id": "s", "cwd": str(cwd), "prompt": prompt,
                       "hook_event_name": "UserPromptSubmit"}).encode()


def run_with_open_stdin(data: bytes, cwd: Path) -> tuple[float, bytes, bytes]:
    """The hook with ``data`` written on a pipe that stays open: (seconds to exit, out, err)."""
    hook = subprocess.Popen([str(CLI), "hook", "claude-prompt", "--deadline", str(DEADLINE)],
                            cwd=cwd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    assert hook.stdin is not None and hook.stdout is not None and hook.stderr is not None
    started = time.monotonic()
    try:
        hook.stdin.write(data)
        hook.stdin.flush()
        try:
            hook.wait(timeout=BOUND)
        except subprocess.TimeoutExpired:
            pytest.fail(f"the hook still waits for its stdin to close after {BOUND:g} s "
                        f"(deadline {DEADLINE:g} s)")
        took = time.monotonic() - started
        return took, hook.stdout.read(), hook.stderr.read()
    finally:
        hook.kill()
        hook.wait()
        hook.stdin.close()


def test_a_complete_object_on_a_pipe_left_open_is_answered_within_the_deadline(
        repo: Path) -> None:
    took, out, err = run_with_open_stdin(hook_input("where is backoff defined", repo), repo)

    assert took < DEADLINE + 5, took
    context = json.loads(out)["hookSpecificOutput"]["additionalContext"]
    assert "retry.py:" in context
    assert err == b""


def test_half_an_object_on_a_pipe_left_open_ends_at_the_deadline_in_one_line(
        repo: Path) -> None:
    took, out, err = run_with_open_stdin(b'{"prompt": "where is backoff', repo)

    assert DEADLINE - 0.5 < took < DEADLINE + 5, took
    assert out == b""
    assert err.count(b"\n") == 1
    assert err.startswith(b"slm-rerank hook: stdin was left open without a complete JSON "
                          b"object")


#: four keys a repository's own file may not set: a search warned once for each
REFUSED = ('auto_serve = true\nbase_url = "http://127.0.0.1:1"\n'
           'endpoints = ["http://127.0.0.1:2"]\ntimeout = 500\n')


def run_hook(data: bytes, cwd: Path) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([str(CLI), "hook", "claude-prompt"], input=data, cwd=cwd,
                          capture_output=True, timeout=60)


def user_config_broken() -> None:
    user_config().write_text("top_k = [\n")


@pytest.mark.parametrize(("stdin", "setup"), [
    ("code", None),
    ("chat", None),
    ("malformed", None),
    ("code", user_config_broken),
], ids=["context-given", "not-code", "unreadable-input", "broken-user-config"])
def test_a_repository_file_with_four_refused_keys_costs_one_stderr_line(
        repo: Path, stdin: str, setup: Any) -> None:
    (repo / ".slm-rerank.toml").write_text(REFUSED)
    if setup is not None:
        setup()
    data = {"code": hook_input("where is backoff defined", repo),
            "chat": hook_input("thanks, that looks good", repo),
            "malformed": b"{not json"}[stdin]

    done = run_hook(data, repo)

    assert done.returncode == 0
    lines = done.stderr.decode().splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith("slm-rerank hook: ")
    if stdin == "code" and setup is None:
        assert b"additionalContext" in done.stdout  # held back, not lost: context still given
        assert "key 'auto_serve' ignored" in lines[0]
        assert lines[0].endswith("(and 3 more lines held back)")
