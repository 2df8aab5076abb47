"""The warm process's worker: commands run one after another in one process, each isolated
from the next, and a command that misbehaves ends only the worker.

A real warm process is started as a user's first command starts it. The misbehaving and
state-reporting commands are played by a probe on ``PYTHONPATH``
(``tests/fixtures/warm_probe/sitecustomize.py``): inside a warm process, a ``--fast``
search whose query holds ``probe <word>`` does what the word says; in the command's own
process it is an ordinary search.
"""

from __future__ import annotations

import json
import os
import re
import threading
import time
from pathlib import Path

import pytest
from search_fixtures import Run, cli, make_repo, user_config
from test_warm_process import (  # noqa: F401 - runtime is a fixture
    OFF,
    ON,
    QUERY,
    hook_json,
    runtime,
    same,
    wait_for_warm,
    worker_of,
)

PROBE = str(Path(__file__).resolve().parents[1] / "fixtures" / "warm_probe")
#: the probe ahead of the code under test (a checkout on PYTHONPATH stays on it)
_PATH = os.pathsep.join(p for p in (PROBE, os.environ.get("PYTHONPATH", "")) if p)
WARM = {**ON, "PYTHONPATH": _PATH}
ALONE = {**OFF, "PYTHONPATH": _PATH}
pytestmark = pytest.mark.usefixtures("runtime")  # each test's own socket folder, stopped after


def started(repo: Path) -> int:
    """Start a warm process with the probe; its worker's pid."""
    cli(*QUERY, cwd=repo, env=WARM)
    wait_for_warm(repo, WARM)
    return worker_of(repo, WARM)[0]


def probe(word: str, repo: Path, *more: str, env: dict[str, str] | None = None) -> Run:
    return cli("-q", f"probe {word} retry backoff", "--fast", *more, cwd=repo,
               env={**WARM, **(env or {})})


# --- what it keeps between commands, as warm status says ---

def test_warm_status_says_how_much_the_worker_keeps_of_the_files_it_sliced(
        tmp_path: Path) -> None:
    from slm_rerank.lexical.chunk_memory import MAX_BYTES
    from slm_rerank.memory_budget import BUDGET_BYTES, KEEP_CHUNK_BYTES

    # 60 files of about 130 KB, each found by one of three queries: what their chunks take
    # is about as much as the chunk memory may keep
    body = "".join(f"def step_{i}(value):\n    return value * {i} + {i}\n\n"
                   for i in range(2400))
    words = ["kettle", "lantern", "meadow"]
    files = {f"pkg/{words[n % 3]}_{n}.py": f"# the {words[n % 3]} module\n" + body
             for n in range(60)}
    repo = make_repo(tmp_path / "many", files)
    cli(*QUERY, cwd=repo, env=WARM)
    wait_for_warm(repo, WARM)
    for word in words:
        found = cli("-q", f"where is the {word}", "--fast", cwd=repo, env=WARM)
        assert found.returncode == 0 and f"{word}_" in found.stdout, found.stderr
    worker_of(repo, WARM)
    status = cli("warm", "status", cwd=repo, env=WARM).stdout
    kept = re.search(r"its worker keeps the chunk memory: (\d+) files, about ([\d.]+) "
                     r"MiB \(at most (\d+) MiB\)", status)
    assert kept is not None, status
    assert int(kept[1]) > 0 and float(kept[2]) > 1.0, status
    # at most its cap; once over its budget, the worker's floor from then on
    assert float(kept[2]) <= int(kept[3]), status
    assert int(kept[3]) in (MAX_BYTES >> 20, KEEP_CHUNK_BYTES >> 20), status
    # and how its resident size stood against its budget after the last command
    budget = re.search(r"its worker keeps its memory within a budget: ([\d.]+) MiB resident "
                       r"after the last command \(budget (\d+) MiB between commands\)",
                       status)
    assert budget is not None, status
    assert 10 < float(budget[1]) < 1024 and int(budget[2]) == BUDGET_BYTES >> 20, status
    if int(kept[3]) < MAX_BYTES >> 20:
        assert "; it was " in status, status  # it was over its budget


# --- nothing of one command reaches the next ---

def test_what_a_command_changes_in_the_worker_is_gone_for_the_next(
        repo: Path, tmp_path: Path) -> None:
    other = make_repo(tmp_path / "other", {"cache.py": "def evict_backoff():\n    pass\n"})
    worker = started(repo)
    before = probe("look", other, env={"PROBE_CALLER": "second"})
    assert before.returncode == 0, before.stderr
    dirty = probe("dirty", repo, env={"PROBE_CALLER": "first"})
    assert dirty.stdout == "dirty\n"
    after = probe("look", other, env={"PROBE_CALLER": "second"})
    assert json.loads(after.stdout) == json.loads(before.stdout)
    seen = json.loads(after.stdout)
    assert seen["left"] is None and seen["caller"] == "second"
    assert seen["cwd"] == str(other) and seen["stdin"] == "/dev/null"
    assert seen["argv"] == ["slm-rerank", "-q", "probe look retry backoff", "--fast"]
    assert seen["usr1"] == "<Handlers.SIG_DFL: 0>" and seen["warned"] == []
    assert seen["gc"] == [[700, 10, 10], 0, 0, 0]  # the collector's settings, as at start
    assert worker_of(repo, WARM)[0] == worker  # put back in place, not a fresh worker


def test_a_repository_config_reaches_only_its_own_commands(
        repo: Path, tmp_path: Path) -> None:
    other = make_repo(tmp_path / "other", {"retry.py": "def backoff():\n    pass\n",
                                           "notes.md": "the retry backoff doubles\n"})
    started(repo)
    (repo / ".slm-rerank.toml").write_text("top_k = 1\nformat = 'json'\n")
    mine = cli(*QUERY, cwd=repo, env=WARM)
    same(mine, cli(*QUERY, cwd=repo, env=ALONE))
    assert len(mine.paths()) == 1
    theirs = cli(*QUERY, cwd=other, env=WARM)
    same(theirs, cli(*QUERY, cwd=other, env=ALONE))
    assert not theirs.stdout.startswith("{")  # the text format: the other's json is not here
    user_config().write_text("top_k = 1\n")  # the user's config is read again at once
    assert len(cli(*QUERY, "--format", "json", cwd=other, env=WARM).paths()) == 1


def test_a_command_that_leaves_a_thread_running_is_answered_then_a_fresh_worker_serves(
        repo: Path) -> None:
    worker = started(repo)
    run = probe("thread", repo)
    assert run.returncode == 0 and "retry.py" in run.stdout
    fresh, commands = worker_of(repo, WARM)
    assert fresh != worker and commands == 0
    assert "backoff" in cli(*QUERY, cwd=repo, env=WARM).stdout
    assert worker_of(repo, WARM) == (fresh, 1)


def test_a_command_that_leaves_a_descriptor_open_is_answered_then_a_fresh_worker_serves(
        repo: Path) -> None:
    # the first descriptor a command opens gets the lowest free number: the check of what
    # was open before the command must not count its own listing of /proc/self/fd
    worker = started(repo)
    run = probe("leakfd", repo)
    assert run.returncode == 0 and "retry.py" in run.stdout
    fresh, commands = worker_of(repo, WARM)
    assert fresh != worker and commands == 0
    same(cli(*QUERY, cwd=repo, env=WARM), cli(*QUERY, cwd=repo, env=ALONE))
    assert worker_of(repo, WARM) == (fresh, 1)


def test_files_held_only_by_garbage_are_collected_before_the_check_and_the_worker_stays(
        repo: Path) -> None:
    worker = started(repo)
    run = probe("cyclefd", repo)
    assert run.returncode == 0 and "retry.py" in run.stdout
    assert worker_of(repo, WARM) == (worker, 1)
    same(cli(*QUERY, cwd=repo, env=WARM), cli(*QUERY, cwd=repo, env=ALONE))
    assert worker_of(repo, WARM) == (worker, 2)


@pytest.mark.parametrize("word", ["gcfreeze", "gcunfreeze"])
def test_a_command_that_freezes_the_collector_s_objects_is_answered_then_a_fresh_worker_serves(
        repo: Path, word: str) -> None:
    # gc.freeze() keeps all the command made so far (the collector is off while it runs)
    # for the worker's life, gc.unfreeze() has what the worker keeps scanned again: neither
    # can be put back
    worker = started(repo)
    run = probe(word, repo)
    assert run.returncode == 0 and "retry.py" in run.stdout
    fresh, commands = worker_of(repo, WARM)
    assert fresh != worker and commands == 0
    same(cli(*QUERY, cwd=repo, env=WARM), cli(*QUERY, cwd=repo, env=ALONE))
    assert worker_of(repo, WARM) == (fresh, 1)


# --- a command that misbehaves ends only the worker; its caller falls back ---

@pytest.mark.parametrize(("word", "said"), [
    ("crash", "the warm process failed: the command was ended by signal 11"),
    ("memory", "the warm process failed: the command used more than 1024 MiB"),
])
def test_a_worker_that_crashes_or_blows_its_memory_falls_back_and_is_forked_again(
        repo: Path, word: str, said: str) -> None:
    worker = started(repo)
    run = probe(word, repo, "-v")
    alone = cli("-q", f"probe {word} retry backoff", "--fast", "-v", cwd=repo, env=ALONE)
    assert f"slm-rerank: warm process: {said}; searching in this process" in run.stderr
    assert (run.returncode, run.stdout) == (alone.returncode, alone.stdout)
    fresh, _ = worker_of(repo, WARM)
    assert fresh != worker
    same(cli(*QUERY, cwd=repo, env=WARM), cli(*QUERY, cwd=repo, env=ALONE))
    assert worker_of(repo, WARM) == (fresh, 1)


def test_a_command_that_calls_os_exit_answers_what_it_left_as_its_own_process_would(
        repo: Path) -> None:
    worker = started(repo)
    run = probe("exit", repo)
    assert (run.returncode, run.stdout) == (3, "partial\n")
    assert worker_of(repo, WARM)[0] != worker
    assert "backoff" in cli(*QUERY, cwd=repo, env=WARM).stdout


def test_a_hook_that_hangs_in_the_worker_ends_by_its_deadline_and_the_worker_is_replaced(
        repo: Path) -> None:
    worker = started(repo)
    began = time.monotonic()
    run = cli("hook", "claude-prompt", "--deadline", "2", cwd=repo, env=WARM,
              stdin=hook_json(repo, "probe hang: where is the retry backoff computed?"),
              timeout=60)
    took = time.monotonic() - began
    assert run.returncode == 0 and took < 20  # the probe sleeps 120 s
    fresh, _ = worker_of(repo, WARM)
    assert fresh != worker
    hook = cli("hook", "claude-prompt", cwd=repo, env=WARM, stdin=hook_json(repo))
    assert "retry.py" in hook.stdout
    assert worker_of(repo, WARM) == (fresh, 1)


def test_a_search_arriving_while_the_worker_is_busy_gets_its_own_answer_from_a_fork(
        repo: Path, tmp_path: Path) -> None:
    other = make_repo(tmp_path / "other", {"cache.py": "def evict_backoff():\n    pass\n",
                                           "README.md": "the cache evicts with a backoff\n"})
    started(repo)
    expected = cli(*QUERY, "--format", "json", cwd=other, env=ALONE)
    hung: list[object] = []
    hanging = threading.Thread(target=lambda: hung.append(cli(
        "hook", "claude-prompt", "--deadline", "4", cwd=repo, env=WARM,
        stdin=hook_json(repo, "probe hang: where is the retry backoff computed?"), timeout=60)))
    hanging.start()
    time.sleep(1.0)  # the worker is busy with the hanging hook
    same(cli(*QUERY, "--format", "json", cwd=other, env=WARM), expected)
    hanging.join()


def test_a_caller_that_goes_away_before_its_answer_leaves_the_worker_in_place(
        repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import socket

    from slm_rerank.warm_process import client, wire

    worker = started(repo)
    monkeypatch.chdir(repo)
    for name, value in WARM.items():
        monkeypatch.setenv(name, value)
    request = client.Request("search", list(QUERY), False, started=time.monotonic())
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.connect(client.socket_path(os.environ))
    by = time.monotonic() + 5
    wire.send_json(sock, client._header(request), by)
    wire.send_frame(sock, b"", by)
    assert wire.receive_json(sock, by)["accepted"] is True
    sock.close()  # gone before the answer
    for _ in range(300):  # until the worker is done with it
        if worker_of(repo, WARM) != (worker, 0):
            break
        time.sleep(0.1)
    assert worker_of(repo, WARM) == (worker, 1)  # it ran, could not answer, and stays
    same(cli(*QUERY, cwd=repo, env=WARM), cli(*QUERY, cwd=repo, env=ALONE))
    assert worker_of(repo, WARM) == (worker, 2)


def test_a_hook_whose_search_outlives_its_deadline_ends_the_worker_and_is_answered_once(
        repo: Path, isolated_home: Path) -> None:
    worker = started(repo)
    run = cli("hook", "claude-prompt", "--deadline", "2", cwd=repo, env=WARM,
              stdin=hook_json(repo, "probe slowsearch: where is the retry backoff computed?"))
    assert (run.returncode, run.stdout, run.stderr) == (0, "", "")  # as on its own: nothing
    records = [json.loads(line)["hook"]
               for line in (isolated_home / "usage.jsonl").read_text().splitlines()
               if "slowsearch" in line]
    # the hook ended the worker (os._exit) after logging its timeout: answered, not run again
    assert [r["decision"] for r in records] == ["timeout"] and "warm_process" not in records[0]
    assert worker_of(repo, WARM)[0] != worker


def test_a_worker_whose_server_is_killed_mid_command_ends_and_a_new_warm_process_starts(
        repo: Path) -> None:
    import re
    import signal

    worker = started(repo)
    status = cli("warm", "status", cwd=repo, env=WARM).stdout
    found = re.search(r"pid (\d+), running", status)
    assert found is not None, status
    hanging = threading.Thread(target=lambda: cli(
        "hook", "claude-prompt", "--deadline", "30", cwd=repo, env=WARM,
        stdin=hook_json(repo, "probe hang: where is the retry backoff computed?"), timeout=60))
    hanging.start()
    time.sleep(1.0)  # the worker is busy with the hanging hook
    os.kill(int(found[1]), signal.SIGKILL)
    gone = False
    for _ in range(500):  # the worker, left without the server that watches it, ends too
        try:
            state = Path(f"/proc/{worker}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            state = "gone"
        if state in ("gone", "Z", "X"):
            gone = True
            break
        time.sleep(0.02)
    assert gone, "the worker outlived its server"
    assert cli(*QUERY, cwd=repo, env=WARM).returncode == 0  # starts one
    wait_for_warm(repo, WARM)  # the server's lock was not left with the worker
    hanging.join()


def test_exit_functions_a_command_registers_run_when_it_ends_as_in_its_own_process(
        repo: Path) -> None:
    worker = started(repo)
    run = probe("atexit", repo)
    assert run.returncode == 0, run.stderr
    assert run.stdout.endswith("at exit\n")  # after its results, as its own process ends
    again = probe("look", repo)
    assert "at exit" not in again.stdout  # not the next caller's
    assert worker_of(repo, WARM)[0] != worker  # its exit functions spent: a fresh worker
