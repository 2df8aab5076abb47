"""Idle work: what the warm process's worker runs once a command was answered."""

from __future__ import annotations

import time

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
