"""A model-server URL holding a control character is a configuration error naming where it
came from (flag, environment variable, file key), with the URL shown escaped; httpx's own
InvalidURL never escapes as a traceback, from a probe or a request.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx
import pytest
from click.testing import CliRunner, Result
from search_fixtures import user_config

from slm_rerank.cli.commands import cli
from slm_rerank.errors import ConfigError
from slm_rerank.model import discovery
from slm_rerank.model.client import ModelClient
from slm_rerank.registrations import Endpoint

ESCAPED = "http://127.0.0.1:1/\x1bx"


def run_cli(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args))


def assert_clean_error(result: Result, exit_code: int, *named: str) -> None:
    assert result.exit_code == exit_code, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
    assert "\x1b" not in result.output
    assert "\\x1b" in result.output
    for name in named:
        assert name in result.output


@pytest.mark.parametrize("char", ["\x1b", "\x00", "\n", "\x7f", "\x85", "\u202e"])
def test_a_url_with_a_control_or_invisible_character_is_a_config_error_naming_its_origin(
        char: str):
    with pytest.raises(ConfigError, match="env: SLM_ENDPOINT: .*control") as caught:
        discovery.check_base_url(f"http://127.0.0.1:1/{char}x", "env: SLM_ENDPOINT")
    assert char not in str(caught.value)


def test_endpoints_with_such_a_url_is_an_error_naming_the_flag(isolated_home: Path):
    assert_clean_error(run_cli("endpoints", "-e", ESCAPED), 2, "-e")  # a usage error


def test_a_search_with_such_a_url_in_the_environment_names_the_variable(
        isolated_home: Path, repo: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("SLM_ENDPOINT", ESCAPED)

    assert_clean_error(run_cli("-q", "retry", "--root", str(repo)), 1, "SLM_ENDPOINT")


def test_a_search_with_such_a_url_as_a_flag_names_the_flag(isolated_home: Path, repo: Path):
    assert_clean_error(run_cli("-q", "retry", "--root", str(repo), "-e", ESCAPED), 2,
                       "--base-url")  # bad command-line input: a usage error


def test_a_probe_of_a_url_httpx_refuses_is_a_config_error_not_a_traceback():
    async def main() -> discovery.Probe:
        async with httpx.AsyncClient() as http:
            return await discovery.probe(http, ESCAPED)

    with pytest.raises(ConfigError, match=r"not a usable http\(s\) URL") as caught:
        asyncio.run(main())
    assert "\x1b" not in str(caught.value)


def test_a_request_to_a_url_httpx_refuses_is_a_config_error_shown_escaped():
    async def main() -> object:
        async with ModelClient(timeout=2.0) as client:
            return await client.post_json(Endpoint(ESCAPED), "/v1/rerank", {})

    with pytest.raises(ConfigError, match=r"not a usable http\(s\) URL") as caught:
        asyncio.run(main())
    assert "\x1b" not in str(caught.value) and "\\x1b" in str(caught.value)


def test_a_search_with_such_a_url_in_the_user_config_names_the_file_and_key(
        isolated_home: Path, repo: Path):
    config = user_config()
    config.write_text('base_url = "http://127.0.0.1:1/\\u001bx"\n', encoding="utf-8")

    assert_clean_error(run_cli("-q", "retry", "--root", str(repo)), 1, str(config))
