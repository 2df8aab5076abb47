"""The judge weight a search fuses by: measured (user config) over the profile's, and said."""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

import pytest
import slm_rerank_ripgrep
from fake_plugins import RAW_PROFILE
from oracle_judge import MODEL_ID, OracleJudge
from search_fixtures import isolate, make_repo, user_config

from slm_rerank.calibration.weights import write_judge_weight
from slm_rerank.config import ConfigError, Settings, load_settings
from slm_rerank.host import Host
from slm_rerank.model import stage
from slm_rerank.model.fusion import JudgeWeight, weight_in_use
from slm_rerank.pipeline import SearchRequest, run_search

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


def test_a_measured_weight_for_the_model_id_wins_over_the_profiles() -> None:
    settings = dataclasses.replace(Settings(), judge_weights={"qwen-1.5b": 0.25},
                                   origins={"judge_weights": "user: /u/config.toml"})

    assert weight_in_use(RAW_PROFILE, "qwen-1.5b", settings) == JudgeWeight(
        0.25, "judge_weights['qwen-1.5b'] (user: /u/config.toml)")
    assert weight_in_use(RAW_PROFILE, "other-model", settings) == JudgeWeight(0.3,
                                                                              "profile raw")
    assert weight_in_use(None, None, settings) == JudgeWeight(1.0, "default")


def test_a_repository_may_not_set_judge_weights(tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    isolate(monkeypatch, tmp_path)
    repo = make_repo(tmp_path / "repo", {".slm-rerank.toml": "[judge_weights]\nm = 9.0\n"})

    settings = load_settings(start=repo, environ={})

    assert settings.judge_weights == {}
    assert "key 'judge_weights' ignored: a repository's .slm-rerank.toml may not set it" \
        in capsys.readouterr().err


@pytest.mark.parametrize("value", ["-1.0", "11.0", "\"high\"", "nan"])
def test_a_weight_out_of_range_in_the_user_config_is_an_error_naming_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    isolate(monkeypatch, tmp_path)
    user_config().write_text(f"[judge_weights]\n\"qwen\" = {value}\n")

    with pytest.raises(ConfigError, match=r"\[judge_weights\] 'qwen' must be a number from 0"):
        load_settings(start=tmp_path, environ={})


def test_a_huge_wrong_weight_or_model_id_is_cut_in_the_error(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    isolate(monkeypatch, tmp_path)
    user_config().write_text(f"[judge_weights]\n\"{'m' * 5000}\" = \"{'x' * 100_000}\"\n")

    with pytest.raises(ConfigError) as raised:
        load_settings(start=tmp_path, environ={})

    assert "[judge_weights]" in str(raised.value) and len(str(raised.value)) < 500


def test_writing_a_weight_keeps_every_other_key_of_the_user_config(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    isolate(monkeypatch, tmp_path)
    path = user_config()
    path.write_text("timeout = 90.0\n[judge_weights]\n\"old-model\" = 0.5\n"
                    "[plugins.yesno]\ntop_logprobs = 10\n")

    write_judge_weight(path, "org/model:Q4", 0.25)

    data = tomllib.loads(path.read_text())
    assert data == {"timeout": 90.0, "plugins": {"yesno": {"top_logprobs": 10}},
                    "judge_weights": {"old-model": 0.5, "org/model:Q4": 0.25}}
    assert load_settings(start=tmp_path, environ={}).judge_weights["org/model:Q4"] == 0.25


def test_a_weight_is_never_written_into_a_repository_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="belongs in the user config"):
        write_judge_weight(tmp_path / ".slm-rerank.toml", "m", 1.0)


def searched(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, settings: Settings):  # noqa: ANN201
    root = make_repo(tmp_path / "tree", {
        "src/bababa_notes.py": "# bababa zorblax widget\nNOTES = 'bababa zorblax'\n" * 4,
        "src/bababa_impl.py": "def run():\n    return 'zorblax'\n"})
    monkeypatch.setattr(stage, "judge", OracleJudge())
    host = Host.with_plugins(settings, slm_rerank_ripgrep)
    return run_search(SearchRequest(query="bababa zorblax widget", root=root.resolve(),
                                    fast=False, cache_dir=tmp_path / "cache"), host)


def test_a_search_fuses_by_the_measured_weight_and_says_where_it_came_from(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # the oracle's profile weighs its verdict 0: alone, the lexical order stands
    plain = dataclasses.replace(Settings(), threshold=0.0)
    measured = dataclasses.replace(plain, judge_weights={MODEL_ID: 4.0},
                                   origins={"judge_weights": "user: /u/config.toml"})

    before = searched(tmp_path, monkeypatch, plain)
    after = searched(tmp_path, monkeypatch, measured)

    assert [c.path for c in before.results][:2] == ["src/bababa_notes.py",
                                                    "src/bababa_impl.py"]
    assert [c.path for c in after.results][:2] == ["src/bababa_impl.py",
                                                   "src/bababa_notes.py"]
    assert before.model is not None and after.model is not None
    assert (before.model.judge_weight, before.model.judge_weight_source) == (0.0,
                                                                            "profile raw")
    model = after.to_dict()["model"]
    assert model["judge_weight"] == 4.0
    assert model["judge_weight_source"] == f"judge_weights['{MODEL_ID}'] (user: " \
                                           "/u/config.toml)"
    assert f"judge weight 4 from judge_weights['{MODEL_ID}'] (user: /u/config.toml)" \
        in after.notes
