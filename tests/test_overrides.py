"""Per-call overrides: every front door sets what its caller gave through
``Host.with_overrides``, above every settings layer, and a value it cannot take is one
error naming that front door and the key."""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
from model_helpers import closed_ports
from search_fixtures import CLI, cli, user_config
from serve_api_fixtures import DOCS, QUERY, ApiServer, post

import slm_rerank
from slm_rerank.errors import ConfigError
from slm_rerank.host import FLAG, Host
from slm_rerank.servers.mcp import RerankService

HOST_PACKAGE = Path(slm_rerank.__file__).parent
PLUGINS = HOST_PACKAGE.parent / "plugins"


def dead_urls(count: int) -> list[str]:
    return [f"http://127.0.0.1:{port}" for port in closed_ports(count)]


def listed_servers(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Two servers in the user's ``endpoints`` list (nothing listens on them), and a third
    a caller may name instead; SLM_ENDPOINT unset, so the list is the layer that pins."""
    monkeypatch.delenv("SLM_ENDPOINT", raising=False)
    first, second, third = dead_urls(3)
    user_config().write_text(f'endpoints = ["{first}", "{second}"]\n')
    return [first, second, third]


# --- the host --------------------------------------------------------------------------------

def test_with_overrides_is_a_new_host_and_leaves_the_one_it_was_made_from() -> None:
    base = Host.from_environment()

    given = base.with_overrides("call({key}=...)", top_k=3, threshold=None)

    assert (given.settings.top_k, given.settings.origins["top_k"]) == (3, "call(top_k=...)")
    assert given.settings.threshold is None  # None: not given
    assert base.settings.top_k == 10 and base.settings.origins["top_k"] == "default"
    assert base.with_overrides("call({key}=...)") is base


def test_the_budget_keys_take_none_as_no_cap_lifting_a_configured_one() -> None:
    user_config().write_text("budget_tokens = 60\n")

    lifted = Host.from_environment().with_overrides(FLAG, budget_tokens=None)

    assert lifted.settings.budget_tokens is None
    assert lifted.settings.origins["budget_tokens"] == "flag: --budget-tokens"


# --- the command line ------------------------------------------------------------------------

def test_a_search_flag_is_the_top_layer_and_a_bad_one_names_the_flag(repo: Path) -> None:
    user_config().write_text("top_k = 5\n")

    one = cli("-k", "1", "-q", "retry backoff", "--fast", "--format", "json", cwd=repo)
    bad = cli("--scorer", "nope", "-q", "retry backoff", cwd=repo)

    assert len(one.json()["results"]) == 1
    assert bad.returncode == 2
    assert "flag: --scorer: key 'scorer': unknown scorer 'nope'" in bad.stderr


def test_serve_api_flags_choose_the_server_over_the_users_list_and_a_bad_one_names_it(
        serve_api: Callable[..., ApiServer], tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    first, second, third = listed_servers(monkeypatch)
    config = {"XDG_CONFIG_HOME": os.environ["XDG_CONFIG_HOME"]}  # user_config()'s folder

    bad = subprocess.run([str(CLI), "serve-api", "--scorer", "nope"], cwd=tmp_path,
                         env={**os.environ, **config}, stdin=subprocess.DEVNULL,
                         capture_output=True, text=True, timeout=60)
    server = serve_api("-e", third, env=config)
    answer = post(server, {"query": QUERY, "documents": DOCS})

    assert bad.returncode != 0
    assert "flag: --scorer: key 'scorer': unknown scorer 'nope'" in bad.stderr
    assert answer.status_code == 503
    said = answer.json()["message"]
    assert third in said and first not in said and second not in said


# --- the Python API --------------------------------------------------------------------------

def test_search_arguments_override_the_settings_and_a_bad_one_names_the_argument(
        repo: Path) -> None:
    user_config().write_text("top_k = 1\n")

    assert len(slm_rerank.search("retry backoff", root=repo).results) == 1
    assert len(slm_rerank.search("retry backoff", root=repo, top_k=2).results) == 2
    host = Host.from_environment(start=repo)
    assert len(slm_rerank.search("retry backoff", root=repo, top_k=2, host=host).results) == 2
    assert host.settings.top_k == 1  # the caller's host is left as it was
    with pytest.raises(ConfigError, match=re.escape(
            "search(top_k=...): key 'top_k' must be at least 1, got 0")):
        slm_rerank.search("retry backoff", root=repo, top_k=0)


def test_reranker_arguments_are_above_every_layer_and_a_bad_one_names_the_argument(
        monkeypatch: pytest.MonkeyPatch) -> None:
    first, second, third = listed_servers(monkeypatch)
    candidate = slm_rerank.Candidate("net/retry.py", 1, 2, "def retry():\n    pass\n")

    result = slm_rerank.Reranker(base_url=third, cache=False).rerank_sync("retry",
                                                                         [candidate])

    # the argument names the server, as -e does on the command line: the user's list of
    # servers is not asked instead
    assert result.degraded is not None and third in result.degraded
    assert first not in result.degraded and second not in result.degraded
    with pytest.raises(ConfigError, match=re.escape(
            "Reranker(scorer=...): key 'scorer': unknown scorer 'nope'")):
        slm_rerank.Reranker(scorer="nope", base_url=third)
    with pytest.raises(ConfigError, match=re.escape(
            "rerank(threshold=...): key 'threshold' must be at most 1")):
        slm_rerank.Reranker(base_url=third, cache=False).rerank_sync("retry", [candidate],
                                                                     threshold=2.0)


def test_rerank_documents_arguments_are_above_every_layer_and_a_bad_one_names_the_argument(
        monkeypatch: pytest.MonkeyPatch) -> None:
    first, second, third = listed_servers(monkeypatch)

    result = slm_rerank.rerank_documents("retry", ["def retry(): pass"], base_url=third,
                                         cache=False)

    assert result.degraded is not None and third in result.degraded
    assert first not in result.degraded and second not in result.degraded
    with pytest.raises(ConfigError, match=re.escape(
            "rerank_documents(scorer=...): key 'scorer': unknown scorer 'nope'")):
        slm_rerank.rerank_documents("retry", ["def retry(): pass"], scorer="nope",
                                    base_url=third)
    with pytest.raises(ConfigError, match=re.escape(
            "rerank_documents(timeout=...): key 'timeout' must be at least 0.1, got 0")):
        slm_rerank.rerank_documents("retry", ["def retry(): pass"], timeout=0)


# --- the MCP server --------------------------------------------------------------------------

def test_mcp_parameters_are_the_calls_alone_and_a_bad_one_names_the_parameter(
        repo: Path) -> None:
    user_config().write_text("top_k = 1\nthreshold = 0.25\n")
    service = RerankService(repo)

    two = service.rerank("retry backoff", fast=True, top_k=2, threshold=0.75)
    three = service.rerank("retry backoff", fast=True, top_k=3)

    assert (len(two.results), len(three.results)) == (2, 3)
    warm = service.host_for(repo.resolve()).settings
    assert (warm.top_k, warm.threshold) == (1, 0.25)  # the warm host keeps the user's
    with pytest.raises(ConfigError, match=re.escape(
            "parameter 'threshold': key 'threshold' must be at most 1")):
        service.rerank("retry backoff", fast=True, threshold=2.0)


# --- one way -------------------------------------------------------------------------------

#: what applying an override by hand looks like: the helper this replaced, assigning a
#: host's settings, copying a Settings with changes, checking a value for a settings key
BY_HAND = re.compile(r"\bapply_overrides\b|\.settings\s*=(?!=)|"
                     r"replace\(\s*[\w.]*settings\b|\bcheck_value\(")
#: the modules that read the settings layers and put overrides in
# the settings layers: config_file checks the values a config file holds as it reads them
ALLOWED = {HOST_PACKAGE / name for name in ("host.py", "config.py", "config_keys.py",
                                           "config_file.py")}


def test_no_module_but_the_host_applies_an_override() -> None:
    sources = [*HOST_PACKAGE.rglob("*.py"), *PLUGINS.glob("*/slm_rerank_*/**/*.py")]
    found = [f"{path.relative_to(HOST_PACKAGE.parent)}:{number}: {line.strip()}"
             for path in sources if path not in ALLOWED
             for number, line in enumerate(path.read_text().splitlines(), 1)
             if BY_HAND.search(line)]

    assert len(sources) > 50
    assert found == [], "apply overrides with Host.with_overrides:\n" + "\n".join(found)
