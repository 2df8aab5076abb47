"""Configuration layers, their origins, and what a bad file or value produces."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from slm_rerank.config import (
    ConfigError,
    load_settings,
    repo_config_path,
    user_config_path,
    write_setting,
)


def make_repo(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    (repo / "pkg" / "deep").mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    return repo


def write_user_config(text: str) -> Path:
    path = user_config_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_defaults_have_default_origin(tmp_path: Path) -> None:
    settings = load_settings(start=tmp_path, environ={})
    assert settings.top_k == 10
    assert settings.origins["top_k"] == "default"


def test_each_layer_overrides_the_one_below(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    user = write_user_config('format = "json"\ntop_k = 3\nchunks = true\ncache_dir = "/u"\n')
    (repo / ".slm-rerank.toml").write_text("top_k = 5\nchunks = false\n")
    settings = load_settings(
        start=repo / "pkg" / "deep",
        environ={"SLM_RERANK_CACHE_DIR": "/from-env"},
        flags={"chunks": True, "format": None},
    )
    assert (settings.format, settings.origins["format"]) == ("json", f"user: {user}")
    assert (settings.top_k, settings.origins["top_k"]) == (
        5, f"repo: {repo.resolve() / '.slm-rerank.toml'}")
    assert (settings.cache_dir, settings.origins["cache_dir"]) == (
        "/from-env", "env: SLM_RERANK_CACHE_DIR")
    assert (settings.chunks, settings.origins["chunks"]) == (True, "flag: --chunks")


def test_the_nearest_repo_file_wins_and_the_walk_stops_at_the_repo_root(tmp_path: Path) -> None:
    (tmp_path / ".slm-rerank.toml").write_text("top_k = 99\n")  # above the repository
    repo = make_repo(tmp_path)
    assert repo_config_path(repo / "pkg") is None
    (repo / "pkg" / ".slm-rerank.toml").write_text("top_k = 4\n")
    (repo / ".slm-rerank.toml").write_text("top_k = 6\n")
    assert load_settings(start=repo / "pkg" / "deep", environ={}).top_k == 4
    assert load_settings(start=repo, environ={}).top_k == 6


def test_an_unknown_key_names_the_file_and_the_key(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    (repo / ".slm-rerank.toml").write_text("top_kk = 3\n")
    with pytest.raises(ConfigError) as info:
        load_settings(start=repo, environ={})
    assert str(repo.resolve() / ".slm-rerank.toml") in str(info.value)
    assert "unknown key 'top_kk'" in str(info.value)


def test_a_wrong_type_names_the_file_the_key_and_the_type(tmp_path: Path) -> None:
    path = write_user_config('top_k = "ten"\n')
    with pytest.raises(ConfigError, match="key 'top_k' must be an integer") as info:
        load_settings(start=tmp_path, environ={})
    assert str(path) in str(info.value)


def test_a_boolean_is_not_an_integer(tmp_path: Path) -> None:
    write_user_config("top_k = true\n")
    with pytest.raises(ConfigError, match="top_k"):
        load_settings(start=tmp_path, environ={})


def test_invalid_toml_names_the_file(tmp_path: Path) -> None:
    path = write_user_config("top_k = = 3\n")
    with pytest.raises(ConfigError, match="invalid TOML") as info:
        load_settings(start=tmp_path, environ={})
    assert str(path) in str(info.value)


def test_a_bad_environment_value_names_the_variable(tmp_path: Path) -> None:
    from slm_rerank.config import parse_text

    with pytest.raises(ConfigError, match="environment X: key 'usage_log'"):
        parse_text("usage_log", "maybe", "environment X")


def test_set_keeps_other_keys_and_their_order(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text('format = "json"\ntop_k = 3\nsources = ["git"]\n')
    write_setting(path, "top_k", "7")
    write_setting(path, "disabled_plugins", "a, b")
    assert path.read_text() == (
        'format = "json"\ntop_k = 7\nsources = [\n    "git",\n]\n'
        'disabled_plugins = [\n    "a",\n    "b",\n]\n'
    )


def test_set_rejects_a_value_of_the_wrong_type_and_leaves_the_file_alone(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text("top_k = 3\n")
    with pytest.raises(ConfigError, match="must be an integer"):
        write_setting(path, "top_k", "many")
    assert path.read_text() == "top_k = 3\n"
