"""A search abandoned at its deadline leaves none of the tools it started running."""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from search_fixtures import CLI

from slm_rerank.lexical.matches import kill_tools, live_tools, start_tool, stream_output


def _running(pid: int) -> bool:
    """True while ``pid`` is a process that has not ended (a zombie has ended)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            return handle.read().rsplit(b")", 1)[1].split()[0] != b"Z"
    except (FileNotFoundError, ProcessLookupError):
        return False


def _slow_rg(tmp_path: Path, pids: Path) -> str:
    """A stand-in for rg that records its pid, then takes a minute (exec keeps the pid)."""
    path = tmp_path / "slow-rg"
    path.write_text(f"#!/bin/sh\necho $$ >> '{pids}'\nexec sleep 60\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


def _recorded(pids: Path) -> list[int]:
    return [int(line) for line in pids.read_text().split()] if pids.exists() else []


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc")
def test_the_hook_past_its_deadline_kills_the_tools_the_search_started(
        repo: Path, isolated_home: Path, tmp_path: Path) -> None:
    pids = tmp_path / "rg.pids"
    (repo / ".slm-rerank.toml").write_text('sources = ["ripgrep"]\n')
    prompt = json.dumps({"prompt": "where is backoff defined", "cwd": str(repo)})
    env = {**os.environ, "SLM_RERANK_RG": _slow_rg(tmp_path, pids)}
    try:
        # The deadline must pass while rg runs, so rg must have started by then: on a busy
        # machine the hook's start-up alone can take a second, so the deadline doubles
        # until the slow rg was reached (it sleeps a minute: any of these ends first).
        for deadline_s in (1, 2, 4, 8, 16):
            done = subprocess.run([str(CLI), "hook", "claude-prompt", "--deadline",
                                   str(deadline_s)], input=prompt.encode(), cwd=repo,
                                  env=env, capture_output=True, timeout=60)
            assert done.returncode == 0
            started = _recorded(pids)
            if started:
                break
        assert started, "the slow rg never ran: the test proves nothing"
        # Killed processes are reaped by whoever inherited them: give that a moment.
        deadline = time.monotonic() + 10
        while any(map(_running, started)) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert [pid for pid in started if _running(pid)] == []
    finally:
        for pid in _recorded(pids):
            if _running(pid):
                os.kill(pid, signal.SIGKILL)


def test_kill_tools_ends_every_live_tool_and_forgets_it() -> None:
    procs = [start_tool(["sleep", "60"]) for _ in range(2)]
    try:
        assert {p.pid for p in procs} <= set(live_tools())
        assert set(kill_tools()) >= {p.pid for p in procs}
        assert all(p.poll() is not None for p in procs)
        assert not {p.pid for p in procs} & set(live_tools())
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
            proc.communicate()


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc")
def test_the_git_sources_work_tree_probe_is_a_tool_kill_tools_ends(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import threading

    import slm_rerank_git

    pids = tmp_path / "git.pids"
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "git").symlink_to(_slow_rg(tmp_path, pids))  # the same slow stand-in
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    answers: list[str | None] = []
    probe = threading.Thread(target=lambda: answers.append(slm_rerank_git.unavailable(tmp_path)),
                             daemon=True)
    probe.start()
    try:
        deadline = time.monotonic() + 30
        while not _recorded(pids) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _recorded(pids), "the slow git never ran: the test proves nothing"
        kill_tools()
        probe.join(timeout=30)
        # killed while it read the filter driver names (git_runner), before rev-parse
        assert not probe.is_alive() and answers and "killed by signal 9" in answers[0]
        assert [pid for pid in _recorded(pids) if _running(pid)] == []
    finally:
        for pid in _recorded(pids):
            if _running(pid):
                os.kill(pid, signal.SIGKILL)


def _gits_in(repo: Path) -> list[int]:
    """The running git processes started with ``-C repo``."""
    marker = b"\0-C\0" + os.fsencode(repo) + b"\0"
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                command = (entry / "cmdline").read_bytes()
            except OSError:
                continue
            if marker in command and _running(int(entry.name)):
                found.append(int(entry.name))
    return found


def _repo_reading_a_fifo(tmp_path: Path) -> Path:
    """A repository whose configuration includes a FIFO nobody writes: git blocks on it."""
    repo = tmp_path / "repo"
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    os.mkfifo(tmp_path / "config.fifo")
    subprocess.run(["git", "-C", str(repo), "config", "include.path",
                    str(tmp_path / "config.fifo")], check=True)
    return repo


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc")
def test_a_bounded_git_call_is_a_tool_kill_tools_ends(tmp_path: Path) -> None:
    # --dirty's git status runs through git_output: mcp, when its client closed stdin during
    # it, exited and left git blocked for ever (kill_tools did not know it)
    import threading

    from slm_rerank.git_runner import GitError, git_output

    repo = _repo_reading_a_fifo(tmp_path)
    errors: list[BaseException] = []

    def call() -> None:
        try:
            git_output(repo, ["status"], timeout=20)
        except GitError as exc:
            errors.append(exc)

    worker = threading.Thread(target=call, daemon=True)
    worker.start()
    try:
        deadline = time.monotonic() + 10
        while not _gits_in(repo) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _gits_in(repo), "git never ran: the test proves nothing"
        kill_tools()
        worker.join(timeout=5)
        assert not worker.is_alive() and errors  # the call ends as a GitError, at once
        assert _gits_in(repo) == []
    finally:
        for pid in _gits_in(repo):
            os.kill(pid, signal.SIGKILL)


class _FullDisk:
    def write(self, data: bytes) -> int:
        raise OSError(28, "No space left on device")


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc")
def test_a_bounded_git_call_that_fails_on_its_side_leaves_no_git_running(
        tmp_path: Path) -> None:
    from slm_rerank.git_runner import git_stream

    repo = tmp_path / "repo"
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    (repo / "big.bin").write_bytes(os.urandom(4_000_000))  # more than a pipe holds
    subprocess.run(["git", "-C", str(repo), "add", "-A"], check=True)
    subprocess.run(["git", "-C", str(repo), "-c", "user.email=t@example.com", "-c",
                    "user.name=t", "commit", "-qm", "big"], check=True)
    try:
        with pytest.raises(OSError, match="No space"):
            git_stream(repo, ["archive", "--format=tar", "HEAD"], _FullDisk())  # type: ignore[arg-type]
        # git, blocked writing into the pipe nobody reads any more, was ended with it
        assert _gits_in(repo) == []
    finally:
        for pid in _gits_in(repo):
            os.kill(pid, signal.SIGKILL)


def test_a_streamed_tool_that_fills_both_pipes_is_read_to_its_end() -> None:
    # 2 MB on each pipe, in turns: reading stdout alone would leave the tool blocked on a
    # full stderr, and this waiting for it
    script = ("import sys\nfor _ in range(2000):\n"
              "    sys.stdout.buffer.write(b'o' * 1023 + b'\\n')\n"
              "    sys.stderr.buffer.write(b'e' * 1023 + b'\\n')\n")
    proc = start_tool([sys.executable, "-c", script])
    parts: list[bytes] = []
    done: list[bytes] = []
    reader = threading.Thread(target=lambda: done.append(stream_output(proc, parts.append)),
                              daemon=True)
    reader.start()
    reader.join(60)
    if reader.is_alive():
        proc.kill()
        pytest.fail("stream_output did not return: the tool blocked on a pipe")
    assert b"".join(parts) == (b"o" * 1023 + b"\n") * 2000
    assert done == [(b"e" * 1023 + b"\n") * 2000]
    assert proc.returncode == 0 and proc.pid not in live_tools()


def test_a_failing_feed_kills_and_reaps_the_streamed_tool() -> None:
    proc = start_tool(["yes", "retry"])  # prints for ever
    fed: list[int] = []

    def feed(data: bytes) -> None:
        fed.append(len(data))
        if len(fed) == 3:
            raise MemoryError("while counting")

    with pytest.raises(MemoryError):
        stream_output(proc, feed)
    assert len(fed) == 3
    assert proc.returncode == -signal.SIGKILL  # killed, and reaped: no zombie left
    assert not _running(proc.pid) and proc.pid not in live_tools()
