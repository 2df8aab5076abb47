"""Idle work: what the warm process's worker runs once a command was answered, and what the
MCP server and the Python API run in a thread of their own between calls."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from slm_rerank import idle_work, plugin_kit
from slm_rerank.testing import as_warm_worker


def test_outside_the_worker_no_idle_work_is_taken() -> None:
    ran: list[float] = []
    assert plugin_kit.when_idle(ran.append) is False
    with as_warm_worker() as run:
        assert run(time.monotonic() + 5) == 0
    assert ran == []


def test_idle_work_keeps_its_deadline_and_one_failure_stops_no_other() -> None:
    given: list[float] = []

    def failing(by: float) -> None:
        raise OSError("disk gone")

    with as_warm_worker() as run:
        assert plugin_kit.when_idle(failing)
        assert plugin_kit.when_idle(given.append)
        by = time.monotonic() + 3
        assert run(by) == 1
        assert given == [by]
        assert plugin_kit.when_idle(given.append)
        assert run(time.monotonic() - 1) == 0  # past its deadline: not run, and dropped
        assert run(time.monotonic() + 3) == 0
    assert given == [by]


def test_what_idle_work_says_it_keeps_is_bounded_and_can_be_withdrawn() -> None:
    idle_work._kept.clear()  # what tests run before this one kept (the plugins' tests)
    with as_warm_worker() as run:
        for n in range(idle_work.MAX_KEPT_NAMES + 3):
            plugin_kit.when_idle(lambda by, n=n: "x" * 1000, f"cache {n}")
            run(time.monotonic() + 3)
        kept = idle_work.kept()
        assert len(kept) == idle_work.MAX_KEPT_NAMES
        assert all(len(line) == idle_work.MAX_KEPT_CHARS for line in kept.values())
        plugin_kit.when_idle(lambda by: "", "cache 0")
        run(time.monotonic() + 3)
        assert "cache 0" not in idle_work.kept()
    idle_work._kept.clear()


def test_the_tasks_asked_for_by_one_command_are_bounded() -> None:
    with as_warm_worker() as run:
        ran: list[float] = []
        for _ in range(idle_work.MAX_PENDING + 5):
            plugin_kit.when_idle(ran.append)
        assert run(time.monotonic() + 3) == idle_work.MAX_PENDING


# --- in a long-lived process's own thread (the MCP server, the Python API called again) ---

IDLE_THREAD = "slm-rerank-idle-work"


@pytest.fixture
def background(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.delenv(idle_work.IDLE_THREAD_ENV, raising=False)  # the tests' isolation: 0
    assert idle_work.run_in_background()
    yield
    idle_work.stop_background()
    idle_work._kept.clear()


def wait_until(condition: Callable[[], bool], seconds: float = 20.0) -> None:
    ends = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < ends, "waited in vain"
        time.sleep(0.005)


def idle_thread_running() -> bool:
    return any(t.name == IDLE_THREAD for t in threading.enumerate())


def test_in_a_long_lived_process_idle_work_runs_in_windows_once_no_call_runs(
        background: None) -> None:
    windows: list[tuple[float, float]] = []

    def task(by: float) -> str:
        windows.append((time.monotonic(), by))
        if len(windows) < 5:
            while time.monotonic() < by:  # the whole window, and not done
                time.sleep(0.001)
            return idle_work.Unfinished(f"{len(windows)} of 5")
        return "built"

    with idle_work.calling():
        assert plugin_kit.when_idle(task, "index")
        time.sleep(0.2)
        assert windows == []  # nothing runs while the call does
    wait_until(lambda: idle_work.kept().get("index") == "built")
    assert len(windows) == 5  # run again after each Unfinished, then no more
    assert all(0 < by - at <= idle_work.WINDOW_SECONDS for at, by in windows)
    wait_until(lambda: not idle_thread_running())  # the thread ends with the work


def test_a_call_arriving_during_a_window_waits_for_its_end_and_none_starts_meanwhile(
        background: None) -> None:
    started: list[float] = []
    ended: list[float] = []

    def task(by: float) -> str:
        started.append(time.monotonic())
        while time.monotonic() < by:
            time.sleep(0.001)
        ended.append(time.monotonic())
        return idle_work.Unfinished("more")

    assert plugin_kit.when_idle(task, "index")
    wait_until(lambda: len(started) >= 2)  # windows one after another
    with idle_work.calling():
        entered = time.monotonic()
        windows = len(started)
        assert len(ended) == windows and ended[-1] <= entered  # none running
        time.sleep(0.2)
        assert len(started) == windows  # none started while the call ran
    wait_until(lambda: len(started) > windows)  # and they go on once it ended


def test_a_task_never_finished_stops_after_its_idle_seconds_and_the_thread_ends(
        background: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(idle_work, "IDLE_SECONDS", 0.3)
    windows: list[tuple[float, float]] = []

    def forever(by: float) -> str:
        started = time.monotonic()
        while time.monotonic() < by:
            time.sleep(0.001)
        windows.append((started, time.monotonic()))
        return idle_work.Unfinished("more")

    assert plugin_kit.when_idle(forever, "forever")
    assert plugin_kit.when_idle(forever, "forever")  # one of a name queued at a time
    wait_until(lambda: not idle_thread_running())
    spent = sum(end - start for start, end in windows)
    # its 0.3 s of windows, the last of them cut to what was left (a window of this task
    # runs a little past its end: its last sleep)
    budget = 0.3
    assert budget - idle_work.WINDOW_SECONDS <= spent
    assert spent <= budget + 2 * idle_work.WINDOW_SECONDS + 0.02 * len(windows)
    assert len(windows) >= 0.3 / (idle_work.WINDOW_SECONDS + 0.02)


def test_idle_thread_0_and_the_warm_worker_keep_a_process_from_running_the_thread(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(idle_work.IDLE_THREAD_ENV, "0")
    assert not idle_work.run_in_background()
    assert plugin_kit.when_idle(lambda by: None) is False
    monkeypatch.delenv(idle_work.IDLE_THREAD_ENV)
    with as_warm_worker():  # the worker runs idle work itself, between commands
        assert not idle_work.run_in_background()
    assert idle_work._background == [None]


EXITS = """\
import sys, time
from slm_rerank import idle_work, plugin_kit

idle_work.IDLE_SECONDS = 3600.0
assert idle_work.run_in_background()


def forever(by):
    with open(sys.argv[1], "a") as log:
        log.write("window\\n")
    while time.monotonic() < by:
        pass
    return idle_work.Unfinished("more")


with idle_work.calling():
    plugin_kit.when_idle(forever, "forever")
while not open(sys.argv[1]).read():
    time.sleep(0.01)
print("leaving")
"""


def test_a_process_leaves_while_its_idle_work_is_unfinished(tmp_path: Path) -> None:
    log = tmp_path / "windows.log"
    log.write_text("")
    env = {k: v for k, v in os.environ.items() if k != idle_work.IDLE_THREAD_ENV}
    # an hour of idle work asked for: the process ends when its script does
    done = subprocess.run([sys.executable, "-c", EXITS, str(log)], env=env,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "leaving\n"
    assert log.read_text().startswith("window\n")


def test_a_fork_made_during_a_window_runs_its_calls_without_waiting_for_it(
        background: None) -> None:
    inside = threading.Event()
    leave = threading.Event()

    def task(by: float) -> str:
        inside.set()
        leave.wait(20)  # the window lasts until the parent lets it end
        return "done"

    assert plugin_kit.when_idle(task, "index")
    assert inside.wait(20)
    pid = os.fork()
    if pid == 0:  # the child: its calls do not wait for a window it has no thread for
        code = 1
        try:
            signal.alarm(20)
            with idle_work.calling():
                code = 0 if idle_work._background == [None] else 2
        finally:
            os._exit(code)
    try:
        _, status = os.waitpid(pid, 0)
    finally:
        leave.set()
    assert os.waitstatus_to_exitcode(status) == 0
