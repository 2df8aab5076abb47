"""The ripgrep source's word index through a real warm process: once the worker built it
(after a search was answered), a warm search answers from it without rg's matching pass,
and prints what the same command prints in its own process, before and after a file
changes. The idle work that builds it never makes another caller wait.

rg is played by a wrapper (``SLM_RERANK_RG``) that logs each run's arguments and runs the
real rg: the matching pass is the run given ``-o``.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
from pathlib import Path

import pytest
from search_fixtures import REPO_FILES, Run, cli, make_repo
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

from slm_rerank.warm_process import client

pytestmark = pytest.mark.usefixtures("runtime")  # each test's own socket folder, stopped after


def real_rg() -> str:
    beside = Path(sys.executable).parent / "rg"
    found = str(beside) if beside.is_file() else shutil.which("rg")
    assert found is not None, "rg is needed"
    return found


def logging_rg(folder: Path) -> tuple[Path, Path]:
    """A wrapper for rg that appends each run's arguments (one line, NUL-separated) to a log."""
    log = folder / "rg.log"
    wrapper = folder / "rg"
    wrapper.write_text(
        f"#!/bin/sh\n"
        f"printf '%s\\0' \"$@\" >> '{log}'\n"
        f"printf '\\n' >> '{log}'\n"
        f"exec '{real_rg()}' \"$@\"\n")
    wrapper.chmod(0o755)
    log.write_bytes(b"")
    return wrapper, log


def runs(log: Path) -> list[list[str]]:
    """The arguments of each rg run logged since the log was last emptied; empties it."""
    lines = log.read_bytes().decode("utf-8", "surrogateescape").splitlines()
    log.write_bytes(b"")
    return [line.rstrip("\0").split("\0") for line in lines if line]


def matching_passes(log: Path) -> int:
    return sum("-o" in argv for argv in runs(log))


def test_a_warm_search_answers_from_the_index_as_its_own_process_would(
        tmp_path: Path) -> None:
    files = {**REPO_FILES, "src/net/extra.py": "def retry_later(backoff):\n    return backoff\n",
             "docs/notes.txt": "Retry the BACKOFF; retries back off.\n"}
    repo = make_repo(tmp_path / "repo", files)
    rg, log = logging_rg(tmp_path)
    warm = {**ON, "SLM_RERANK_RG": str(rg)}
    alone = {**OFF, "SLM_RERANK_RG": str(rg)}

    cli(*QUERY, cwd=repo, env=warm)  # starts the warm process
    wait_for_warm(repo, warm)
    built = cli(*QUERY, cwd=repo, env=warm)  # the worker answers, then builds the index
    assert built.returncode == 0, built.stderr
    worker_of(repo, warm)  # idle again: the build is done
    runs(log)

    from_index = cli(*QUERY, cwd=repo, env=warm)
    assert matching_passes(log) == 0  # the index answered: rg only listed the tree
    same(from_index, cli(*QUERY, cwd=repo, env=alone))
    assert matching_passes(log) == 1  # (the command in its own process ran it)
    assert "retry.py" in from_index.stdout

    # a file changes, its size and modification time as they were: the index reads it again
    retry = repo / "src" / "net" / "retry.py"
    before = retry.stat()
    text = retry.read_text()
    retry.write_text(text.replace("backoff", "BACKOF_").replace("retry", "rerun"))
    assert retry.stat().st_size == before.st_size
    os.utime(retry, ns=(before.st_atime_ns, before.st_mtime_ns))
    worker_of(repo, warm)
    changed = cli(*QUERY, cwd=repo, env=warm)
    assert matching_passes(log) == 0
    same(changed, cli(*QUERY, cwd=repo, env=alone))
    assert matching_passes(log) == 1
    assert changed.stdout != from_index.stdout

    # a file added, another removed
    (repo / "src" / "colour.py").unlink()
    (repo / "src" / "backoff_retry.py").write_text("RETRY = BACKOFF = 'retry backoff'\n")
    worker_of(repo, warm)
    third = cli(*QUERY, "--format", "json", cwd=repo, env=warm)
    assert matching_passes(log) == 0
    same(third, cli(*QUERY, "--format", "json", cwd=repo, env=alone))
    assert "src/backoff_retry.py" in third.paths()


PROBE = """\
import json, os, sys, time
import slm_rerank.cli as _cli

_run = _cli.run


def said(args):
    if args[:1] != ["hook"]:
        return " ".join(args)
    from slm_rerank.hook import stdio

    return stdio.given.data.decode(errors="replace") if stdio.given is not None else ""


def run(args):
    if "slm_rerank.warm_process.isolation" in sys.modules and "idle wait" in said(args):
        from slm_rerank.plugin_kit import when_idle

        folder = os.environ["PROBE_FOLDER"]

        def wait(by):
            with open(os.path.join(folder, "idle.json"), "w") as out:
                json.dump({"at": time.monotonic(), "by": by}, out)
            while time.monotonic() < by and not os.path.exists(os.path.join(folder, "go")):
                time.sleep(0.01)
            open(os.path.join(folder, "idle-ended"), "w").close()

        when_idle(wait)
    return _run(args)


_cli.run = run
"""


def probed(tmp_path: Path) -> dict[str, str]:
    """A warm process whose commands holding ``idle wait`` leave idle work that waits for
    the file ``go`` (or its deadline), saying when it started and ended."""
    folder = tmp_path / "probe"
    folder.mkdir()
    (folder / "sitecustomize.py").write_text(PROBE)
    path = os.pathsep.join(p for p in (str(folder), os.environ.get("PYTHONPATH", "")) if p)
    return {**ON, "PYTHONPATH": path, "PROBE_FOLDER": str(folder)}


def wait_for(path: Path) -> None:
    for _ in range(1000):
        if path.exists():
            return
        time.sleep(0.01)
    raise AssertionError(f"{path} never appeared")


def test_a_caller_arriving_during_idle_work_is_served_without_waiting_for_it(
        repo: Path, tmp_path: Path) -> None:
    env = probed(tmp_path)
    folder = Path(env["PROBE_FOLDER"])
    cli(*QUERY, cwd=repo, env=env)
    wait_for_warm(repo, env)
    first = cli("-q", "idle wait retry backoff", "--fast", cwd=repo, env=env)
    assert first.returncode == 0, first.stderr
    wait_for(folder / "idle.json")  # the worker is in its idle work now
    assert not (folder / "idle-ended").exists()  # its caller did not wait for it
    try:
        second = cli(*QUERY, cwd=repo, env=env, timeout=20)
        # served (by a fork) while the idle work still waits
        assert not (folder / "idle-ended").exists()
    finally:
        (folder / "go").touch()
    same(second, cli(*QUERY, cwd=repo, env={**env, **OFF}))
    wait_for(folder / "idle-ended")
    pid, ran = worker_of(repo, env)
    assert ran == 1  # the worker ran the first command only; it is still the same one


def test_idle_work_ends_before_the_commands_deadline(repo: Path, tmp_path: Path) -> None:
    env = probed(tmp_path)
    folder = Path(env["PROBE_FOLDER"])
    cli(*QUERY, cwd=repo, env=env)
    wait_for_warm(repo, env)
    deadline = 1.5
    hook = cli("hook", "claude-prompt", "--deadline", str(deadline), cwd=repo, env=env,
               stdin=hook_json(repo, "idle wait: where is the retry backoff computed?"))
    called = time.monotonic()
    assert hook.returncode == 0, hook.stderr
    wait_for(folder / "idle-ended")
    idle = json.loads((folder / "idle.json").read_text())
    # the server kills the worker at started + deadline + ANSWER_GRACE; idle work ends a
    # margin before, whatever the task does
    assert idle["by"] <= called + deadline + client.ANSWER_GRACE - 1.0
    _, ran = worker_of(repo, env)
    assert ran == 1  # not killed: the same worker, idle again


def test_the_prompt_hook_answers_from_the_index_as_its_own_process_would(
        repo: Path, tmp_path: Path) -> None:
    rg, log = logging_rg(tmp_path)
    warm = {**ON, "SLM_RERANK_RG": str(rg)}
    prompt = hook_json(repo)

    def hook(env: dict[str, str]) -> Run:
        return cli("hook", "claude-prompt", cwd=repo, env=env, stdin=prompt)

    hook(warm)  # starts the warm process
    wait_for_warm(repo, warm)
    hook(warm)  # the worker answers, then builds the index
    worker_of(repo, warm)
    runs(log)
    from_index = hook(warm)
    assert matching_passes(log) == 0
    same(from_index, hook({**OFF, "SLM_RERANK_RG": str(rg)}))
    assert "retry.py" in from_index.stdout
