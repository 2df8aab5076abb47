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


# --- values checked when read and when set -------------------------------------------------


@pytest.mark.parametrize(("text", "message"), [
    ("top_k = 0\n", "key 'top_k' must be at least 1, got 0"),
    ("max_file_bytes = -5\n", "key 'max_file_bytes' must be at least 1"),
    ('cache_dir = "relative/cache"\n', "key 'cache_dir' must be an absolute path"),
    ("plugins = 3\n", "key 'plugins' must be a table"),
    ("[plugins]\ngemma = 3\n", r"\[plugins.gemma\] must be a table of settings"),
])
def test_a_value_out_of_range_names_the_file_and_the_key(
        tmp_path: Path, text: str, message: str) -> None:
    path = write_user_config(text)
    with pytest.raises(ConfigError, match=message) as info:
        load_settings(start=tmp_path, environ={})
    assert str(path) in str(info.value)


def test_a_repository_cannot_choose_where_the_tool_writes(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    (repo / ".slm-rerank.toml").write_text('cache_dir = "/tmp/elsewhere"\n')
    with pytest.raises(ConfigError, match="'cache_dir' cannot be set in a repository's"):
        load_settings(start=repo, environ={})


def test_a_relative_cache_dir_from_the_environment_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="environment SLM_RERANK_CACHE_DIR: key 'cache_dir' "
                                          "must be an absolute path"):
        load_settings(start=tmp_path, environ={"SLM_RERANK_CACHE_DIR": "cache"})


def test_a_deeply_nested_array_is_a_config_error_not_a_crash(tmp_path: Path) -> None:
    path = write_user_config("sources = " + "[" * 50_000 + "]" * 50_000 + "\n")
    with pytest.raises(ConfigError, match="nested too deeply") as info:
        load_settings(start=tmp_path, environ={})
    assert str(path) in str(info.value)


def test_a_huge_value_is_cut_in_the_error_message(tmp_path: Path) -> None:
    write_user_config('top_k = "' + "x" * 3_000_000 + '"\n')
    # over the size limit: refused before parsing
    with pytest.raises(ConfigError, match="larger than 1 MB") as info:
        load_settings(start=tmp_path, environ={})
    assert len(str(info.value)) < 300
    write_user_config('top_k = "' + "x" * 900_000 + '"\n')
    with pytest.raises(ConfigError, match=r"must be an integer, got str 'xxx.*\(900002 chars\)"
                       ) as info:
        load_settings(start=tmp_path, environ={})
    assert len(str(info.value)) < 300


def test_plugin_tables_layer_key_by_key_with_origins(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    user = write_user_config("[plugins.gemma]\ntemperature = 0.5\nlayout = \"raw\"\n")
    (repo / ".slm-rerank.toml").write_text("[plugins.gemma]\nlayout = \"turns\"\n")
    settings = load_settings(start=repo, environ={})
    assert settings.plugins == {"gemma": {"temperature": 0.5, "layout": "turns"}}
    assert settings.origins["plugins.gemma.temperature"] == f"user: {user}"
    assert settings.origins["plugins.gemma.layout"].startswith("repo: ")


def test_numbers_and_optional_values_parse_from_text() -> None:
    from slm_rerank.config import KeyType, check_typed

    assert check_typed(KeyType(float), 3, "x") == 3.0
    assert check_typed(KeyType(float, optional=True), None, "x") is None
    with pytest.raises(ConfigError, match="x must be a number"):
        check_typed(KeyType(float), True, "x")
    with pytest.raises(ConfigError, match="finite"):
        check_typed(KeyType(float), float("inf"), "x")


def test_slm_endpoint_wins_over_the_other_endpoint_variables(tmp_path: Path) -> None:
    environ = {"LFM_ENDPOINT": "http://c:3", "RERANKER_BASE_URL": "http://b:2",
               "SLM_ENDPOINT": "http://a:1"}

    def endpoint() -> tuple[str | None, str]:
        settings = load_settings(start=tmp_path, environ=environ)
        return settings.base_url, settings.origins["base_url"]

    assert endpoint() == ("http://a:1", "env: SLM_ENDPOINT")
    del environ["SLM_ENDPOINT"]
    assert endpoint() == ("http://b:2", "env: RERANKER_BASE_URL")
    del environ["RERANKER_BASE_URL"]
    assert endpoint() == ("http://c:3", "env: LFM_ENDPOINT")
    environ.clear()
    assert endpoint() == (None, "default")


def test_an_empty_endpoint_variable_counts_as_unset(tmp_path: Path) -> None:
    settings = load_settings(start=tmp_path, environ={"SLM_ENDPOINT": "",
                                                       "RERANKER_BASE_URL": "http://b:2/v1/"})
    assert (settings.base_url, settings.origins["base_url"]) == (
        "http://b:2/v1/", "env: RERANKER_BASE_URL")


def test_slm_host_wins_over_reranker_host(tmp_path: Path) -> None:
    def host(environ: dict[str, str]) -> str | None:
        return load_settings(start=tmp_path, environ=environ).host

    assert host({"RERANKER_HOST": "b", "SLM_HOST": "a"}) == "a"
    assert host({"RERANKER_HOST": "b"}) == "b"
    assert host({}) is None
