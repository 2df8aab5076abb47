"""The warm process that ``--fast`` searches and the prompt hook reuse (slm_rerank.warm_process).

Each test runs the installed ``slm-rerank`` in real processes. Where a real warm process is
wanted it is started the way a user's first command starts it; the faults (a stale socket,
another user's, a crash, a hang, a malformed answer) are played by a fake one listening on
the socket the command would use, in a thread of the test.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import stat
import struct
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from search_fixtures import Run, cli, make_repo, user_config

from slm_rerank.config import load_settings, write_setting
from slm_rerank.errors import ConfigError
from slm_rerank.warm_process import client, wire
from slm_rerank.warm_process.switch import user_switch

QUERY = ("-q", "where is the retry backoff", "--fast")
ON = {"SLM_RERANK_WARM_PROCESS": "1", "SLM_RERANK_WARM_IDLE": "120"}
OFF = {"SLM_RERANK_WARM_PROCESS": "0"}
#: on by default: only the user's config decides
USER_ONLY = {"SLM_RERANK_WARM_PROCESS": "", "SLM_RERANK_WARM_IDLE": "120"}


@pytest.fixture
def runtime(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A short runtime folder for the sockets (a Unix socket path has a length limit); any
    warm process started under it is stopped at the end."""
    folder = Path(tempfile.mkdtemp(prefix="wp-", dir="/tmp"))
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(folder))
    try:
        yield folder
    finally:
        cli("warm", "stop", "--all", cwd=folder, env=ON)
        shutil.rmtree(folder, ignore_errors=True)


def socket_of(env: dict[str, str]) -> str:
    return client.socket_path({**os.environ, **env})


def wait_for_warm(repo: Path, env: dict[str, str]) -> int:
    """Wait until the warm process of ``env`` answers a status request; its connection count."""
    for _ in range(300):
        status = cli("warm", "status", cwd=repo, env=env)
        served = re.search(r"(\d+) connections so far", status.stdout)
        if served:  # the status's first line (what the worker keeps follows it)
            return int(served.group(1))
        time.sleep(0.1)
    raise AssertionError(f"no warm process started: {status.stdout} {status.stderr}")


def worker_of(repo: Path, env: dict[str, str]) -> tuple[int, int]:
    """The pid of the warm process's worker and how many commands it has run, once it is
    idle: it answers a command first, then collects the command's garbage and checks what
    it left, and only then is done (one more command, or a fresh worker)."""
    from slm_rerank.cli.warm import _ask

    for _ in range(600):
        reply = _ask(socket_of(env), "status")
        if not isinstance(reply, dict) or reply.get("running") == 0:
            break
        time.sleep(0.05)
    status = cli("warm", "status", cwd=repo, env=env).stdout
    found = re.search(r"its worker pid (\d+) has run (\d+) commands", status)
    assert found is not None, status
    return int(found[1]), int(found[2])


def same(a: Run, b: Run) -> None:
    """The same exit code and bytes, but for the milliseconds a JSON answer reports (which
    differ between any two runs)."""
    def timeless(text: str) -> str:
        return re.sub(r'"(\w+_ms)": [0-9.]+', r'"\1": 0', text)

    assert (a.returncode, timeless(a.stdout), a.stderr) == (b.returncode, timeless(b.stdout),
                                                            b.stderr)


def hook_json(repo: Path, prompt: str = "where is the retry backoff computed in the code?") -> str:
    return json.dumps({"session_id": "t", "transcript_path": "/dev/null", "cwd": str(repo),
                       "hook_event_name": "UserPromptSubmit", "prompt": prompt})


# --- what a user sees with a real warm process ---

def test_answers_through_the_warm_process_are_byte_identical_to_a_run_in_process(
        repo: Path, runtime: Path) -> None:
    first = cli(*QUERY, "-v", cwd=repo, env=ON)
    said = [line for line in first.stderr.splitlines() if "warm process:" in line]
    assert said == ["slm-rerank: warm process: no warm process is running; searching in this "
                    "process", "slm-rerank: warm process: starting one in the background for "
                    "the next commands"]
    before = wait_for_warm(repo, ON)
    cases = [
        (QUERY, None),
        ((*QUERY, "--format", "json", "-k", "2"), None),
        ((*QUERY, "-v"), None),
        ((*QUERY, "--chunks", "--format", "jsonl"), None),
        (("search", "--fast", "-q", "backoff", "nosuch.py"), None),  # a path that is not there
        ((*QUERY, "--no-such-flag"), None),  # a usage error: its message and exit code
        (("hook", "claude-prompt"), hook_json(repo)),
        (("hook", "claude-prompt"), "not json"),
    ]
    worker, _ = worker_of(repo, ON)
    # twice over: the second round is answered by the same worker, from what it kept
    for _ in range(2):
        for args, stdin in cases:
            warm = cli(*args, cwd=repo, env=ON, stdin=stdin)
            alone = cli(*args, cwd=repo, env=OFF, stdin=stdin)
            same(warm, alone)
            if stdin == hook_json(repo):
                assert "retry.py" in warm.stdout  # the hook searched and gave context
    assert "backoff" in cli(*QUERY, cwd=repo, env=ON).stdout
    # every warm run above went through it (each status asks once more), in its one worker
    assert wait_for_warm(repo, ON) >= before + 2 * len(cases) + 3
    assert worker_of(repo, ON) == (worker, 2 * len(cases) + 1)


def test_config_changes_reach_the_next_warm_answer(repo: Path, runtime: Path) -> None:
    cli(*QUERY, cwd=repo, env=ON)
    wait_for_warm(repo, ON)
    assert len(cli(*QUERY, "--format", "json", cwd=repo, env=ON).paths()) > 1
    user_config().write_text("top_k = 1\n")
    assert len(cli(*QUERY, "--format", "json", cwd=repo, env=ON).paths()) == 1
    (repo / ".slm-rerank.toml").write_text("format = 'json'\n")
    warm = cli(*QUERY, cwd=repo, env=ON)
    same(warm, cli(*QUERY, cwd=repo, env=OFF))
    assert len(warm.paths()) == 1


def test_warm_stop_stops_it_and_the_user_config_turns_it_off(repo: Path, runtime: Path) -> None:
    cli(*QUERY, cwd=repo, env=ON)
    wait_for_warm(repo, ON)
    stopped = cli("warm", "stop", cwd=repo, env=ON)
    assert "stopped the warm process" in stopped.stdout
    assert "not running" in cli("warm", "status", cwd=repo, env=ON).stdout

    user_config().write_text("warm_process = false\n")
    first = cli(*QUERY, "-v", cwd=repo, env=USER_ONLY)
    assert first.returncode == 0 and "no warm process is running" in first.stderr
    assert "starting one" not in first.stderr
    time.sleep(1.0)  # a warm process would have bound its socket by now
    assert not os.path.exists(socket_of(USER_ONLY))


def test_a_running_warm_process_turned_off_refuses_and_the_search_runs_in_process(
        repo: Path, runtime: Path) -> None:
    cli(*QUERY, cwd=repo, env=USER_ONLY)
    wait_for_warm(repo, USER_ONLY)
    user_config().write_text("warm_process = false\n")
    run = cli(*QUERY, "-v", cwd=repo, env=USER_ONLY)
    assert "the warm process refused the request: the warm process is turned off" in run.stderr
    assert "backoff" in run.stdout


# --- trust: a repository's file can neither start it nor keep it ---

def test_a_repository_file_cannot_turn_the_warm_process_on_or_keep_it(
        repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (repo / ".slm-rerank.toml").write_text("warm_process = true\nwarm_process_idle = 86400\n")
    user_config().write_text("warm_process = false\n")
    settings = load_settings(start=repo)
    assert settings.warm_process is False and settings.warm_process_idle == 300.0
    said = capsys.readouterr().err
    assert ("key 'warm_process' ignored: a repository's .slm-rerank.toml may not set it "
            "(starts a process); set it in the user config instead") in said
    assert "key 'warm_process_idle' ignored" in said and "(how long a process lives)" in said
    os.chdir(repo)
    assert user_switch().on is False  # the switch reads the user's file and environment only
    with pytest.raises(ConfigError, match="may not set 'warm_process'"):
        write_setting(repo / ".slm-rerank.toml", "warm_process", "true", repo=True)


def test_the_environment_turns_it_off_and_nothing_connects(repo: Path, runtime: Path) -> None:
    with FakeWarm(socket_of(OFF), lambda conn: None) as fake:
        run = cli(*QUERY, "-v", cwd=repo, env=OFF)
    assert fake.connections == 0 and "warm process" not in run.stderr


# --- faults: each falls back to the search in this process, says so with -v ---

class FakeWarm:
    """A listener on the socket a command would use, answering as ``behave`` does."""

    def __init__(self, path: str, behave: Callable[[socket.socket], None],
                 mode: int = 0o600) -> None:
        self.path, self.behave, self.connections = path, behave, 0
        client.check_folder(os.path.dirname(path), create=True)
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.bind(path)
        os.chmod(path, mode)
        self.sock.listen(4)
        self.thread = threading.Thread(target=self._serve, daemon=True)

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.connections += 1
            with conn:
                self.behave(conn)

    def __enter__(self) -> FakeWarm:
        self.thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.sock.close()  # accept raises: the thread ends
        if os.path.lexists(self.path):
            os.unlink(self.path)


def read_request(conn: socket.socket) -> dict[str, object]:
    by = time.monotonic() + 5
    head = wire.receive_json(conn, by)
    wire.receive_frame(conn, wire.MAX_STDIN_BYTES, by)
    return head


def accept_then(after: Callable[[socket.socket], None]) -> Callable[[socket.socket], None]:
    def behave(conn: socket.socket) -> None:
        read_request(conn)
        wire.send_json(conn, {"accepted": True, "deadline": 5}, time.monotonic() + 5)
        after(conn)
    return behave


def crash(conn: socket.socket) -> None:
    conn.shutdown(socket.SHUT_RDWR)  # as a killed process's socket closes


def hang(conn: socket.socket) -> None:
    time.sleep(8)


def malformed(conn: socket.socket) -> None:
    conn.sendall(struct.pack(">I", 9) + b"not json!")


def too_large(conn: socket.socket) -> None:
    wire.send_json(conn, {"exit": 0}, time.monotonic() + 5)
    conn.sendall(struct.pack(">I", wire.MAX_STDOUT_BYTES + 1))


@pytest.mark.parametrize(("behave", "said"), [
    (accept_then(crash), "the connection closed before the whole message arrived"),
    (accept_then(malformed), "a malformed message (not JSON)"),
    (accept_then(too_large), "over the cap"),
    (lambda conn: (read_request(conn), malformed(conn)), "a malformed message (not JSON)"),
    (hang, "timed out"),  # never acknowledges: taken as hung after ACK_SECONDS
], ids=["crash-mid-request", "malformed-answer", "oversized-answer", "malformed-ack", "hung"])
def test_a_broken_warm_process_costs_a_note_and_never_changes_the_answer(
        repo: Path, runtime: Path, behave: Callable[[socket.socket], None], said: str) -> None:
    user_config().write_text("warm_process = false\n")  # no real one is started after
    alone = cli(*QUERY, "-v", cwd=repo, env=OFF)
    with FakeWarm(socket_of(ON), behave) as fake:
        run = cli(*QUERY, "-v", cwd=repo, env=ON)
    assert fake.connections == 1
    note = next(line for line in run.stderr.splitlines() if "warm process:" in line)
    assert said in note and note.endswith("; searching in this process")
    assert run.returncode == alone.returncode and run.stdout == alone.stdout
    assert [line for line in run.stderr.splitlines() if line != note] == alone.stderr.splitlines()
    quiet = cli(*QUERY, cwd=repo, env=ON)  # without -v: nothing said, the same answer
    assert "warm process" not in quiet.stderr and quiet.stdout == alone.stdout


def test_a_hook_whose_warm_process_hangs_still_ends_by_its_deadline(
        repo: Path, runtime: Path) -> None:
    user_config().write_text("warm_process = false\n")
    with FakeWarm(socket_of(ON), accept_then(hang)):
        started = time.monotonic()
        run = cli("hook", "claude-prompt", "--deadline", "1.5", cwd=repo, env=ON,
                  stdin=hook_json(repo), timeout=20)
        took = time.monotonic() - started
    assert run.returncode == 0
    assert took < 8  # the fake hangs 8 s: the deadline, not the hang, ended the wait


def test_a_hook_that_runs_in_its_own_process_says_why_in_its_usage_log_record(
        repo: Path, runtime: Path, isolated_home: Path) -> None:
    user_config().write_text("warm_process = false\n")  # no real one is started after
    with FakeWarm(socket_of(ON), accept_then(crash)) as fake:
        run = cli("hook", "claude-prompt", cwd=repo, env=ON, stdin=hook_json(repo))
    assert fake.connections == 1
    assert "retry.py" in run.stdout and run.stderr == ""  # its JSON and stderr as ever
    alone = cli("hook", "claude-prompt", cwd=repo, env=OFF, stdin=hook_json(repo))
    assert alone.stdout == run.stdout
    records = [json.loads(line)["hook"]
               for line in (isolated_home / "usage.jsonl").read_text().splitlines()]
    assert records[0]["warm_process"] == (
        "no usable answer from the warm process (the connection closed before the whole "
        "message arrived); the hook ran in its own process")
    assert "warm_process" not in records[1]  # the warm process is off: nothing to say


def test_a_stale_socket_is_removed_and_the_search_runs_in_process(
        repo: Path, runtime: Path) -> None:
    # off in the user's config and not forced on by the environment (ON would override it
    # and start a real warm process after the search, which may bind the path again)
    user_config().write_text("warm_process = false\n")
    path = socket_of(USER_ONLY)
    client.check_folder(os.path.dirname(path), create=True)
    dead = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    dead.bind(path)  # bound, never listening: as a killed warm process leaves it
    os.chmod(path, 0o600)
    dead.close()
    run = cli(*QUERY, "-v", cwd=repo, env=USER_ONLY)
    assert "removed a stale socket (nobody was listening)" in run.stderr
    assert "starting one" not in run.stderr
    assert "backoff" in run.stdout and not os.path.exists(path)


def test_a_socket_open_to_others_is_not_used(repo: Path, runtime: Path) -> None:
    with FakeWarm(socket_of(ON), accept_then(crash), mode=0o666) as fake:
        run = cli(*QUERY, "-v", cwd=repo, env=ON)
    assert fake.connections == 0
    assert "is open to other users (mode 666)" in run.stderr and "backoff" in run.stdout


def test_a_socket_folder_open_to_others_is_not_used(repo: Path, runtime: Path) -> None:
    folder = os.path.dirname(socket_of(ON))
    with FakeWarm(socket_of(ON), accept_then(crash)) as fake:
        os.chmod(folder, 0o755)
        run = cli(*QUERY, "-v", cwd=repo, env=ON)
    assert fake.connections == 0
    assert "is open to other users (mode 755)" in run.stderr and "backoff" in run.stdout


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a file to another user needs root")
def test_a_socket_of_another_user_is_not_used(repo: Path, runtime: Path) -> None:
    with FakeWarm(socket_of(ON), accept_then(crash)) as fake:
        os.chown(socket_of(ON), 12345, 12345)
        run = cli(*QUERY, "-v", cwd=repo, env=ON)
    assert fake.connections == 0
    assert "belongs to user 12345, not to this user" in run.stderr and "backoff" in run.stdout


@pytest.mark.skipif(os.geteuid() != 0, reason="acting as another user needs root")
def test_the_warm_process_refuses_a_connection_from_another_user(
        repo: Path, runtime: Path) -> None:
    cli(*QUERY, cwd=repo, env=ON)
    wait_for_warm(repo, ON)
    path = socket_of(ON)
    os.chmod(path, 0o666)  # as if the file's mode let anyone in: the server still checks
    os.chmod(os.path.dirname(path), 0o711)
    os.chmod(runtime, 0o711)
    pid = os.fork()
    if pid == 0:  # another user's process asks
        code = 1
        try:
            os.setuid(12345)
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            sock.connect(path)  # the file's mode lets it connect
            try:
                wire.send_json(sock, {"format": wire.FORMAT, "kind": "status"},
                               time.monotonic() + 3)
                wire.send_frame(sock, b"", time.monotonic() + 3)
                wire.receive_json(sock, time.monotonic() + 3)
            except wire.WireError:
                code = 0  # closed without a word
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0


def run_with_stdin(args: tuple[str, ...], repo: Path, env: dict[str, str], stdin: object,
                   feed: bytes = b"") -> Run:
    """The installed command with ``stdin`` as given (a file, or PIPE fed ``feed`` and left
    open until the command ends)."""
    import subprocess

    from slm_rerank.testing.helpers import CLI

    proc = subprocess.Popen([str(CLI), *args], cwd=repo, env={**os.environ, **env},
                            stdin=stdin, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if proc.stdin is not None:
        proc.stdin.write(feed)
        proc.stdin.flush()
    out, err = proc.communicate(timeout=60) if proc.stdin is None else _open_until_done(proc)
    return Run(proc.returncode, out.decode(), err.decode())


def _open_until_done(proc: Any) -> tuple[bytes, bytes]:
    out, err = proc.stdout.read(), proc.stderr.read()  # stdin still open: it went silent
    proc.stdin.close()
    proc.wait(timeout=60)
    return out, err


def test_a_search_with_file_names_or_its_query_on_stdin_is_answered_by_the_warm_process(
        repo: Path, runtime: Path, tmp_path: Path) -> None:
    import subprocess

    cli(*QUERY, cwd=repo, env=ON)
    wait_for_warm(repo, ON)
    _, before = worker_of(repo, ON)
    names = tmp_path / "names.txt"
    names.write_text("src/net/client.py\nREADME.md\n")
    cases = [(QUERY, "src/net/client.py\nREADME.md\n"),  # file names piped
             (("--query-file", "-", "--fast", "-v"), "where is the retry backoff"),
             ((*QUERY, "--no-such-flag"), "README.md\n")]
    for args, stdin in cases:
        same(cli(*args, cwd=repo, env=ON, stdin=stdin), cli(*args, cwd=repo, env=OFF, stdin=stdin))
    with names.open("rb") as warm_in, names.open("rb") as alone_in:  # a file on stdin
        same(run_with_stdin(QUERY, repo, ON, warm_in), run_with_stdin(QUERY, repo, OFF, alone_in))
    # an open pipe that goes silent mid-line: the same lines used, the same warning
    silent = [run_with_stdin((*QUERY, "--format", "json"), repo, env, subprocess.PIPE,
                             b"src/net/client.py\nREADME") for env in (ON, OFF)]
    same(*silent)
    assert "dropped the unfinished last line 'README'" in silent[0].stderr
    assert silent[0].paths() == ["src/net/client.py"]
    assert worker_of(repo, ON)[1] == before + len(cases) + 2  # each one went through it


def test_a_search_whose_warm_process_fails_uses_the_stdin_it_already_read(
        repo: Path, runtime: Path) -> None:
    user_config().write_text("warm_process = false\n")
    with FakeWarm(socket_of(ON), accept_then(crash)) as fake:
        run = cli(*QUERY, "--format", "json", cwd=repo, env=ON, stdin="README.md\n")
        query = cli("--query-file", "-", "--fast", cwd=repo, env=ON,
                    stdin="where is the retry backoff")
    assert fake.connections == 2
    same(run, cli(*QUERY, "--format", "json", cwd=repo, env=OFF, stdin="README.md\n"))
    assert run.paths() == ["README.md"]
    same(query, cli("--query-file", "-", "--fast", cwd=repo, env=OFF,
                    stdin="where is the retry backoff"))


def test_a_query_on_a_stdin_that_is_no_pipe_or_file_is_read_in_its_own_process(
        repo: Path, runtime: Path) -> None:
    with FakeWarm(socket_of(ON), accept_then(crash)) as fake:
        run = cli("--query-file", "-", "--fast", cwd=repo, env=ON)  # stdin /dev/null
    assert fake.connections == 0  # a terminal is read where the user types
    assert "the query is empty" in run.stderr


def test_the_command_side_writes_the_answer_before_importing_click(
        repo: Path, runtime: Path, tmp_path: Path) -> None:
    def answer(conn: socket.socket) -> None:
        head = read_request(conn)
        by = time.monotonic() + 5
        wire.send_json(conn, {"accepted": True, "deadline": 5}, by)
        wire.send_json(conn, {"exit": 3}, by)
        wire.send_frame(conn, f"out {head['args']}\n".encode(), by)
        wire.send_frame(conn, b"err\n", by)

    seen = tmp_path / "modules.json"
    probe = ("import atexit, json, sys\n"
             f"atexit.register(lambda: open({str(seen)!r}, 'w').write(json.dumps("
             "sorted(m for m in sys.modules if m.split('.')[0] in ('click', 'pluggy') "
             "or m in ('slm_rerank.host', 'slm_rerank.api')))))\n"
             "sys.argv = ['slm-rerank', '-q', 'x', '--fast']\n"
             "from slm_rerank.cli import main\nmain()\n")
    import subprocess
    import sys

    with FakeWarm(socket_of(ON), answer):
        done = subprocess.run([sys.executable, "-c", probe], cwd=repo, capture_output=True,
                              env={**os.environ, **ON}, stdin=subprocess.DEVNULL, timeout=30)
    assert (done.returncode, done.stdout, done.stderr) == (
        3, b"out ['-q', 'x', '--fast']\n", b"err\n")
    assert json.loads(seen.read_text()) == []


def test_the_installed_command_asks_the_warm_process_without_importing_re(
        repo: Path, runtime: Path) -> None:
    # `re` (and `enum` with it) is 5 ms of a process's start: the wrapper installers write
    # for a console-script entry point imports it first, so the command is a script of its
    # own (slm_rerank/cli/slm-rerank), run here as installed, with no site imports to hide
    # what it loads
    import subprocess
    import sys

    import slm_rerank

    def answer(conn: socket.socket) -> None:
        read_request(conn)
        by = time.monotonic() + 5
        wire.send_json(conn, {"accepted": True, "deadline": 5}, by)
        wire.send_json(conn, {"exit": 0}, by)
        wire.send_frame(conn, b"out\n", by)
        wire.send_frame(conn, b"", by)

    package = Path(slm_rerank.__file__).parent
    script = package / "cli" / "slm-rerank"
    assert script.read_text().startswith("#!python\n")  # installers write the interpreter
    env = {**ON, "PYTHONPATH": str(package.parent)}  # which names the warm process asked
    with FakeWarm(socket_of(env), answer) as fake:
        done = subprocess.run([sys.executable, "-S", "-X", "importtime", str(script), "-q",
                               "x", "--fast"], cwd=repo, capture_output=True, timeout=30,
                              env={**os.environ, **env}, stdin=subprocess.DEVNULL)
    assert fake.connections == 1 and (done.returncode, done.stdout) == (0, b"out\n")
    loaded = {line.rsplit("|", 1)[-1].strip() for line in done.stderr.decode().splitlines()
              if line.startswith("import time:")}
    assert "slm_rerank.warm_process.client" in loaded
    assert not loaded & {"re", "enum", "click", "pluggy"}, sorted(loaded)


def test_the_socket_folder_is_made_private(runtime: Path) -> None:
    path = socket_of(ON)
    client.check_folder(os.path.dirname(path), create=True)
    assert stat.S_IMODE(os.lstat(os.path.dirname(path)).st_mode) == 0o700


def test_concurrent_commands_from_two_repositories_each_get_their_own_answer(
        repo: Path, runtime: Path, tmp_path: Path) -> None:
    other = make_repo(tmp_path / "other", {"cache.py": "def evict_backoff():\n    pass\n",
                                           "README.md": "the cache evicts with a backoff\n"})
    cli(*QUERY, cwd=repo, env=ON)
    wait_for_warm(repo, ON)
    expected = {root: cli(*QUERY, "--format", "json", cwd=root, env=OFF) for root in (repo, other)}
    results: list[tuple[Path, Run]] = []

    def ask(root: Path) -> None:
        results.append((root, cli(*QUERY, "--format", "json", cwd=root, env=ON)))

    threads = [threading.Thread(target=ask, args=(root,)) for root in (repo, other) * 4]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(results) == 8
    for root, run in results:  # the fifth at once may run in its own process: the same answer
        same(run, expected[root])
        assert run.json()["root"] == str(root)


def test_the_environment_that_shapes_settings_names_another_warm_process() -> None:
    base = {"HOME": "/home/u", "PATH": "/usr/bin", "SLM_RERANK_CACHE_DIR": "/c"}
    assert client.key(base) == client.key({**base, "OLDPWD": "/elsewhere", "SHLVL": "3"})
    for name, value in (("SLM_RERANK_CACHE_DIR", "/d"), ("SLM_RERANK_LOAD_PLUGINS", "x"),
                        ("XDG_CONFIG_HOME", "/cfg"), ("PATH", "/opt/bin"), ("LC_ALL", "C"),
                        ("GIT_DIR", "/g"), ("PYTHONPATH", "/p"), ("RIPGREP_CONFIG_PATH", "/r")):
        assert client.key({**base, name: value}) != client.key(base), name


def test_an_idle_warm_process_stops_itself_and_removes_its_socket(
        repo: Path, runtime: Path) -> None:
    quick = {**ON, "SLM_RERANK_WARM_IDLE": "1"}
    cli(*QUERY, cwd=repo, env=quick)
    path = socket_of(quick)
    for _ in range(300):  # started: its socket appears
        if os.path.exists(path):
            break
        time.sleep(0.1)
    assert os.path.exists(path), "no warm process started"
    for _ in range(300):  # a second without a request: it stops
        if not os.path.exists(path):
            break
        time.sleep(0.1)
    assert not os.path.exists(path)
    assert "not running" in cli("warm", "status", cwd=repo, env=quick).stdout
