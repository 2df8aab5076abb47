"""The CLI in one place: commands in one list, each flag declared once, servers free of click."""

from __future__ import annotations

import ast
import inspect
import subprocess
import sys
from collections import Counter
from pathlib import Path

import click
import pytest
from search_fixtures import cli

from slm_rerank.cli import model_flags
from slm_rerank.cli.commands import COMMANDS
from slm_rerank.cli.commands import cli as group
from slm_rerank.overrides import overrides

CLI_SOURCE = Path(model_flags.__file__).parent
#: long flags two commands declare on purpose, each with its own meaning there
DISTINCT_MEANINGS = {
    "--format": "search picks an installed formatter; the others print text or json",
    "--fast": "search: lexical only; hook claude-prompt: the same, forced over the config; "
              "calibrate and bench: measure the lexical order alone",
    "--query": "search: the question; cache clear: whose scores to delete",
    "--bind": "serve (llama-server) and serve-api listen on different things",
    "--port": "serve defaults to 8035, serve-api to 8090",
    "--all": "plugins: list every plugin; warm status and stop: every warm process",
}


def declared_long_flags() -> Counter[str]:
    """How many times each ``--flag`` is declared in click.option(...) under slm_rerank/cli."""
    counts: Counter[str] = Counter()
    for path in sorted(CLI_SOURCE.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and node.func.attr == "option"):
                for arg in node.args:
                    if isinstance(arg, ast.Constant) and str(arg.value).startswith("--"):
                        for name in str(arg.value).split("/"):  # --chunks/--files
                            counts[name] += 1
    return counts


def test_each_long_flag_is_declared_once_in_the_cli() -> None:
    counts = declared_long_flags()

    repeated = {name: n for name, n in counts.items() if n > 1 and name not in DISTINCT_MEANINGS}
    assert counts["--base-url"] == counts["--host"] == counts["--timeout"] == 1
    assert not repeated, f"declare these once (cli/model_flags.py): {repeated}"


def option(command: click.Command, flag: str) -> click.Option:
    [found] = [p for p in command.params if isinstance(p, click.Option) and flag in p.opts]
    return found


@pytest.mark.parametrize("name", ["search", "serve-api", "mcp", "endpoints"])
def test_the_model_flags_of_every_command_are_the_one_declaration(name: str) -> None:
    command = group.commands[name]

    for flag, check in (("--host", model_flags._check_host),
                        ("--base-url", model_flags._base_urls)):
        assert option(command, flag).callback is check, (name, flag)


def test_every_model_flag_reaches_overrides_under_a_name_it_takes() -> None:
    takes = set(inspect.signature(overrides).parameters) | {"expand"}  # a request, no setting
    destinations = {p.name for p in group.commands["search"].params}

    assert set(model_flags.MODEL_FLAGS) <= destinations
    assert set(model_flags.MODEL_FLAGS) <= takes


def test_no_cache_and_local_override_their_settings() -> None:
    assert overrides(cache=False, local=True, model=None) == {"score_cache": False,
                                                              "auto_serve": True}


def test_serve_api_refuses_a_bad_host_as_search_does(tmp_path: Path) -> None:
    served = cli("serve-api", "--host", "bad host!", cwd=tmp_path, timeout=60)
    searched = cli("-q", "retry", "--host", "bad host!", cwd=tmp_path)

    assert served.returncode == searched.returncode == 2
    assert "Invalid value for '--host': host 'bad host!' is not a host name" in served.stderr
    assert served.stderr.split("(see")[0] == searched.stderr.split("(see")[0]


def test_the_group_has_exactly_the_listed_commands() -> None:
    assert sorted(group.commands) == sorted(COMMANDS)
    assert {name: group.commands[name].name for name in COMMANDS} == {n: n for n in COMMANDS}
    assert set(group.commands) == {"search", "plugins", "config", "stats", "endpoints",
                                   "cache", "serve", "serve-api", "mcp", "hook", "calibrate",
                                   "bench", "warm"}


def test_no_cli_module_adds_a_command_on_import() -> None:
    # a module that registers itself (`@cli.command()` on import) would need the group
    for path in sorted(CLI_SOURCE.glob("*.py")):
        if path.name == "commands.py":
            continue
        assert "@cli." not in path.read_text(), path.name


@pytest.mark.parametrize("module", ["slm_rerank.servers.rerank_api", "slm_rerank.servers.mcp",
                                    "slm_rerank.servers.api_key", "slm_rerank.hook.claude",
                                    "slm_rerank.overrides", "slm_rerank.query_limit"])
def test_the_servers_and_the_claude_hook_import_no_click(module: str) -> None:
    code = f"import sys, {module}; print('click' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True)

    assert done.stdout.strip() == "False"
