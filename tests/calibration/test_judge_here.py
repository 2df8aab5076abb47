"""calibrate --write keeps what it measured of the judge on this repository, and a search
there follows it: a judge that adds nothing is not asked (and -v says why), a judge that
helps is fused by the weight measured here."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
import slm_rerank_ripgrep
from click.testing import CliRunner
from git_history import History
from oracle_judge import MODEL_ID, OracleJudge, seed_cases

from slm_rerank.calibration import measure
from slm_rerank.cli.commands import cli as group
from slm_rerank.config import Settings, load_settings
from slm_rerank.host import Host
from slm_rerank.model import stage
from slm_rerank.model.repository_judge import findings_path, load_findings
from slm_rerank.pipeline import SearchRequest, run_search
from slm_rerank.report import Report

QUERY = "bababa zorblax widget must frobnicate"


def calibrated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cache: Path, judge: OracleJudge,
               *args: str) -> tuple[History, str]:
    repo = History(tmp_path / "repo")
    seed_cases(repo, 6)
    # 30 cases decide in use; 6 generated cases with one answer each decide here, cheaply
    monkeypatch.setattr(measure, "MIN_CASES", 6)
    monkeypatch.setattr(stage, "judge", judge)
    monkeypatch.chdir(repo.root)
    done = CliRunner().invoke(group, ["calibrate", "--write", *args], catch_exceptions=False)
    assert done.exit_code == 0, done.output
    return repo, done.output


def search(repo: History, cache: Path, judge: OracleJudge, settings: Settings | None = None
           ) -> Report:
    settings = settings or load_settings(start=repo.root)
    host = Host.with_plugins(settings, slm_rerank_ripgrep)
    stage_judge = stage.judge
    assert isinstance(stage_judge, OracleJudge) and stage_judge is judge
    return run_search(SearchRequest(query=QUERY, root=repo.root.resolve(), fast=False,
                                    cache_dir=cache), host)


def test_a_judge_that_adds_nothing_is_kept_and_a_search_here_does_not_ask_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, isolated_home: Path) -> None:
    blind = OracleJudge(blind=True)
    repo, output = calibrated(tmp_path, monkeypatch, isolated_home, blind)

    assert "the judge adds nothing in this repository: MRR@10" in output
    assert "a search here does not ask it (--ask-judge asks it anyway)" in output
    [kept] = load_findings(findings_path(isolated_home, repo.root)).values()
    assert (kept.model_id, kept.ask, kept.weight, kept.cases) == (MODEL_ID, False, None, 6)

    calls = blind.calls
    report = search(repo, isolated_home, blind)

    assert blind.calls == calls + 1 and blind.declined == 1  # the servers were found ...
    assert report.model is not None and report.model.scored == 0  # ... and nothing judged
    assert any(f"calibrate --write measured that {MODEL_ID} adds nothing in this "
               "repository" in note and "pass --ask-judge" in note for note in report.notes)
    assert report.score_kind != "fused" and report.degraded is None
    fast = run_search(SearchRequest(query=QUERY, root=repo.root.resolve(), fast=True,
                                    cache_dir=isolated_home),
                      Host.with_plugins(load_settings(start=repo.root), slm_rerank_ripgrep))
    assert [c.path for c in report.results] == [c.path for c in fast.results]


def test_ask_judge_anyway_asks_a_judge_found_useless_here(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, isolated_home: Path) -> None:
    blind = OracleJudge(blind=True)
    repo, _ = calibrated(tmp_path, monkeypatch, isolated_home, blind)
    anyway = dataclasses.replace(load_settings(start=repo.root), ask_judge_anyway=True)

    report = search(repo, isolated_home, blind, anyway)

    assert blind.declined == 0 and report.model is not None and report.model.scored > 0


def test_a_repository_file_cannot_make_a_search_ask_a_judge_found_useless(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, isolated_home: Path) -> None:
    blind = OracleJudge(blind=True)
    repo, _ = calibrated(tmp_path, monkeypatch, isolated_home, blind)
    (repo.root / ".slm-rerank.toml").write_text("ask_judge_anyway = true\n")

    settings = load_settings(start=repo.root)
    report = search(repo, isolated_home, blind, settings)

    assert settings.ask_judge_anyway is False
    assert "ask_judge_anyway" in settings.repo_refusals
    assert blind.declined == 1 and report.model is not None and report.model.scored == 0


def test_a_judge_that_helps_is_fused_here_by_the_weight_measured_here(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, isolated_home: Path) -> None:
    oracle = OracleJudge()
    # the oracle's profile weighs its verdict 0: the lexical order (the decoy first) stands
    repo, output = calibrated(tmp_path, monkeypatch, isolated_home, oracle, "--weights", "1,2")

    assert "the judge helps in this repository" in output and "w=1 measured best" in output
    [kept] = load_findings(findings_path(isolated_home, repo.root)).values()
    assert kept.ask is True and kept.weight == 1.0

    report = search(repo, isolated_home, oracle)

    assert oracle.declined == 0 and report.model is not None
    assert report.model.judge_weight == 1.0
    assert report.model.judge_weight_source.startswith("calibrate --write on this repository")
    assert report.results[0].path == "src/bababa_impl.py"  # the verdict now counts


def test_the_json_says_what_was_found_and_too_few_cases_keep_nothing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, isolated_home: Path) -> None:
    repo = History(tmp_path / "repo")
    seed_cases(repo, 4)
    monkeypatch.setattr(stage, "judge", OracleJudge(blind=True))
    monkeypatch.chdir(repo.root)

    done = CliRunner().invoke(group, ["calibrate", "--write", "--format", "json"],
                              catch_exceptions=False)

    assert done.exit_code == 0
    assert "nothing kept for this repository's judge: 4 cases judged, at least 30" \
        in done.output
    document = json.loads(done.output[done.output.index("{"):])
    assert document["judge_here"] is None and document["judge_here_written"] is None
    assert not findings_path(isolated_home, repo.root).exists()

    monkeypatch.setattr(measure, "MIN_CASES", 4)
    done = CliRunner().invoke(group, ["calibrate", "--format", "json"],
                              catch_exceptions=False)

    document = json.loads(done.output[done.output.index("{"):])
    assert document["judge_here"]["ask"] is False
    assert document["judge_here"]["model_id"] == MODEL_ID
    assert document["judge_here_written"] is None  # no --write: nothing kept
    assert not findings_path(isolated_home, repo.root).exists()
