"""The `endpoints` setting: a list of servers of one model (or the profile table), and -e.

A list spreads one query's chunks over several servers; `-e URL` given more than once is
that list. Which URLs a query goes to is ``endpoints.pinned_urls``: the layers decide between
`base_url` and a list, and every URL is checked before any is asked.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click
import pytest
from click.testing import CliRunner

from slm_rerank.cli.model_flags import model_options
from slm_rerank.config import (
    ConfigError,
    load_settings,
    parse_text,
    user_config_path,
    write_setting,
)
from slm_rerank.host import FLAG, Host
from slm_rerank.model.endpoints import pinned_urls


def write_user_config(text: str) -> Path:
    path = user_config_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def flags_of(*args: str) -> dict[str, Any]:
    """What the search command's model flags hand on, for these arguments."""
    seen: dict[str, Any] = {}

    @click.command()
    @model_options
    def command(**flags: Any) -> None:
        seen.update(flags)

    result = CliRunner().invoke(command, list(args), catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return seen


# --- the config file ------------------------------------------------------------------------


def test_a_list_of_urls_in_the_user_config_is_the_endpoints_setting(tmp_path: Path) -> None:
    path = write_user_config('endpoints = ["http://gpu-a:8000/v1", "http://gpu-b:8000"]\n')

    settings = load_settings(start=tmp_path, environ={})

    assert settings.endpoints == ["http://gpu-a:8000/v1", "http://gpu-b:8000"]
    urls, origin = pinned_urls(settings)
    assert urls == ["http://gpu-a:8000", "http://gpu-b:8000"]  # the /v1 tail dropped
    assert origin == f"user: {path}: key 'endpoints'"


def test_the_profile_table_still_pins_the_server_of_the_requested_model(
        tmp_path: Path) -> None:
    write_user_config('[endpoints]\nqwen = "http://gpu-a:8000"\n')

    settings = Host(load_settings(start=tmp_path, environ={})).with_overrides(
        FLAG, model="qwen").settings

    assert pinned_urls(settings) == (["http://gpu-a:8000"], "[endpoints] qwen")
    assert pinned_urls(load_settings(start=tmp_path, environ={})) == ([], "default")


def test_a_list_entry_that_is_not_a_string_is_an_error_naming_the_key(tmp_path: Path) -> None:
    path = write_user_config('endpoints = ["http://gpu-a:8000", 8001]\n')

    with pytest.raises(ConfigError) as caught:
        load_settings(start=tmp_path, environ={})

    assert str(path) in str(caught.value)
    assert "key 'endpoints' must be a table or a list of strings" in str(caught.value)


def test_a_malformed_url_in_the_list_is_an_error_naming_the_file_key_and_url(
        tmp_path: Path) -> None:
    path = write_user_config('endpoints = ["http://gpu-a:8000", "gpu-b:8000"]\n')
    settings = load_settings(start=tmp_path, environ={})

    with pytest.raises(ConfigError) as caught:
        pinned_urls(settings)

    message = str(caught.value)
    assert f"user: {path}: key 'endpoints'" in message and "'gpu-b:8000'" in message


def test_a_server_listed_twice_is_an_error(tmp_path: Path) -> None:
    write_user_config('endpoints = ["http://gpu-a:8000", "http://gpu-a:8000/v1/"]\n')

    with pytest.raises(ConfigError, match="http://gpu-a:8000 is listed twice"):
        pinned_urls(load_settings(start=tmp_path, environ={}))


def test_an_empty_list_scans_as_if_nothing_were_set(tmp_path: Path) -> None:
    write_user_config("endpoints = []\n")

    assert pinned_urls(load_settings(start=tmp_path, environ={})) == ([], "default")


def test_slm_endpoint_overrides_a_list_in_the_user_config_and_says_so(tmp_path: Path) -> None:
    write_user_config('endpoints = ["http://gpu-a:8000", "http://gpu-b:8000"]\n')
    settings = load_settings(start=tmp_path, environ={"SLM_ENDPOINT": "http://laptop:8033"})
    notes: list[str] = []

    urls, origin = pinned_urls(settings, notes)

    assert (urls, origin) == (["http://laptop:8033"], "env: SLM_ENDPOINT")
    assert "overrides the endpoints list" in notes[0]


def test_base_url_and_a_list_in_one_file_is_an_error_naming_the_file(tmp_path: Path) -> None:
    path = write_user_config('base_url = "http://laptop:8033"\n'
                             'endpoints = ["http://gpu-a:8000", "http://gpu-b:8000"]\n')

    with pytest.raises(ConfigError, match=f"user: {path} sets both base_url"):
        pinned_urls(load_settings(start=tmp_path, environ={}))


@pytest.mark.parametrize("text", ['endpoints = ["http://evil:8000"]\n',
                                  '[endpoints]\nqwen = "http://evil:8000"\n'])
def test_a_repository_file_cannot_set_an_endpoints_list_or_table(
        tmp_path: Path, text: str, capsys: pytest.CaptureFixture[str]) -> None:
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    (repo / ".slm-rerank.toml").write_text(text)

    settings = load_settings(start=repo, environ={})

    assert settings.endpoints == {} and settings.origins["endpoints"] == "default"
    assert "key 'endpoints' ignored" in capsys.readouterr().err


def test_config_set_takes_a_list_or_a_table(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"

    assert write_setting(path, "endpoints", '["http://a:1", "http://b:2"]') == [
        "http://a:1", "http://b:2"]
    assert parse_text("endpoints", '{qwen = "http://a:1"}', "x") == {"qwen": "http://a:1"}


# --- -e on the command line -----------------------------------------------------------------


def test_one_e_is_base_url_as_before() -> None:
    flags = flags_of("-e", "http://gpu-a:8000")

    assert flags["base_url"] == "http://gpu-a:8000"
    assert "endpoints" not in flags


def test_e_repeated_is_the_endpoints_list_and_beats_the_config(tmp_path: Path) -> None:
    write_user_config('endpoints = ["http://gpu-c:8000", "http://gpu-d:8000"]\n')
    flags = flags_of("-e", "http://gpu-a:8000", "--base-url", "http://gpu-b:8000/v1")

    settings = Host(load_settings(start=tmp_path, environ={})).with_overrides(
        FLAG, **flags).settings

    assert flags["base_url"] is None
    assert settings.endpoints == ["http://gpu-a:8000", "http://gpu-b:8000"]
    assert pinned_urls(settings) == (["http://gpu-a:8000", "http://gpu-b:8000"], "-e")


def test_e_repeated_with_a_bad_url_is_a_usage_error_naming_it() -> None:
    @click.command()
    @model_options
    def command(**flags: Any) -> None:
        pass

    result = CliRunner().invoke(command, ["-e", "http://gpu-a:8000", "-e", "ftp://gpu-b"])

    assert result.exit_code == 2
    assert "-e" in result.output and "'ftp://gpu-b'" in result.output


def test_e_repeated_with_the_same_server_twice_is_a_usage_error() -> None:
    @click.command()
    @model_options
    def command(**flags: Any) -> None:
        pass

    result = CliRunner().invoke(command, ["-e", "http://gpu-a:8000", "-e",
                                          "http://gpu-a:8000/"])

    assert result.exit_code == 2
    assert "http://gpu-a:8000 is given twice" in result.output
