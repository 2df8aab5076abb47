"""`slm-rerank calibrate`: the measurement on a repository's own history, and --write."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner
from git_history import History
from oracle_judge import MODEL_ID, OracleJudge, seed_cases
from search_fixtures import CLI, cli, isolate, user_config

from slm_rerank.calibration import measure
from slm_rerank.cli.commands import cli as group
from slm_rerank.model import stage

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


def test_fast_prints_the_lexical_orders_metrics_over_the_mined_cases_as_json(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cache = isolate(monkeypatch, tmp_path)
    repo = History(tmp_path / "repo")
    seed_cases(repo, 3)
    repo.commit("Bump version to 2.0.0", {"src/version.py": "V = 2\n"})

    run = cli("calibrate", "--fast", "--format", "json", cwd=repo.root, timeout=120)

    document = run.json()
    assert document["cases"] == 3 and document["commits_looked_at"] == 5
    assert document["skipped"] == {"release": 1, "root": 1}
    [lexical] = document["orders"]
    assert lexical["order"] == "lexical" and lexical["hit_at_1"] == 0.0
    assert lexical["hit_at_5"] == 1.0 and document["model"] is None
    assert "\r" not in run.stderr  # no progress bar off a terminal
    assert list((cache / "calibrate").iterdir()) == []  # every parent tree removed


def test_the_help_names_the_rules_that_skip_a_commit(tmp_path: Path) -> None:
    run = cli("calibrate", "--help", cwd=tmp_path)

    for rule in ("merge", "revert", "release", "formatting", "typo", "too many files"):
        assert rule in run.stdout


def test_a_folder_outside_git_is_a_one_line_error(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    isolate(monkeypatch, tmp_path)
    (tmp_path / "plain").mkdir()

    run = cli("calibrate", "--fast", cwd=tmp_path / "plain")

    assert run.returncode == 1
    assert "is not inside a git repository" in run.stderr


def test_write_with_fast_is_a_usage_error(tmp_path: Path) -> None:
    run = cli("calibrate", "--fast", "--write", cwd=tmp_path)

    assert run.returncode == 2 and "--write stores a judge weight" in run.stderr


def calibrate(args: list[str], repo: Path, monkeypatch: pytest.MonkeyPatch):  # noqa: ANN201
    monkeypatch.setattr(stage, "judge", OracleJudge())
    monkeypatch.chdir(repo)
    return CliRunner().invoke(group, ["calibrate", *args], catch_exceptions=False)


def test_write_stores_the_best_weight_for_the_model_id_and_keeps_the_other_keys(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    isolate(monkeypatch, tmp_path)
    config = user_config()
    config.write_text(f"timeout = 90.0\n[judge_weights]\n\"{MODEL_ID}\" = 0.0\n"
                      "\"other\" = 0.5\n")
    repo = History(tmp_path / "repo")
    seed_cases(repo, 5)
    # 30 cases tell weights apart in use; 5 cases of one answer each do so here, cheaply
    monkeypatch.setattr(measure, "MIN_CASES", 5)

    done = calibrate(["--write", "--weights", "1,2"], repo.root, monkeypatch)

    assert done.exit_code == 0, done.output
    data = tomllib.loads(config.read_text())
    assert data["timeout"] == 90.0 and data["judge_weights"]["other"] == 0.5
    assert data["judge_weights"][MODEL_ID] == 1.0  # tied with 2: the smaller is safer
    assert f"written: judge_weights['{MODEL_ID}'] = 1 in {config}" in done.output


def test_write_with_too_few_cases_says_so_and_writes_nothing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    isolate(monkeypatch, tmp_path)
    config = user_config()
    config.write_text("timeout = 90.0\n")
    repo = History(tmp_path / "repo")
    seed_cases(repo, 4)

    done = calibrate(["--write", "--format", "json"], repo.root, monkeypatch)

    assert done.exit_code == 0
    assert "--write: nothing written: 4 cases are too few" in done.output
    assert config.read_text() == "timeout = 90.0\n"
    document = json.loads(done.output[done.output.index("{"):])
    assert document["written"] is None and document["choice"]["separated"] is False


def test_a_run_stopped_with_sigterm_removes_the_tree_it_was_searching(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cache = isolate(monkeypatch, tmp_path)
    repo = History(tmp_path / "repo")
    seed_cases(repo, 25)
    trees = cache / "calibrate"
    process = subprocess.Popen([str(CLI), "calibrate", "--fast"], cwd=repo.root,
                               stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 60
        while not (trees.is_dir() and any(trees.iterdir())):
            assert process.poll() is None and time.monotonic() < deadline, "no tree laid out"
            time.sleep(0.01)
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=60)
    finally:
        process.kill()
        process.wait()

    assert process.returncode == 128 + signal.SIGTERM
    assert list(trees.iterdir()) == []


def test_the_measurement_bar_gives_the_judges_bar_back_when_it_closes() -> None:
    from slm_rerank.cli.calibrate import Progress as MeasuringBar
    from slm_rerank.model import progress

    assert progress.QUIET is False
    bar = MeasuringBar()
    bar(1, 3)
    assert progress.QUIET is True  # hushed while calibrate draws its own
    bar.close()

    # a later command in the same process (serve-api, a test) gets its bar again
    assert progress.QUIET is False
