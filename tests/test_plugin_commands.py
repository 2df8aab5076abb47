"""The register_commands hook: a plugin's command is `slm-rerank NAME`, a broken one is named."""

from __future__ import annotations

import importlib.metadata
import re
import types

import click
import pluggy
import pytest
from click.testing import CliRunner, Result
from search_fixtures import user_config

import slm_rerank
from slm_rerank.cli.commands import cli, make_cli
from slm_rerank.plugins import FAMILIES, LOAD_PLUGINS_ENV, make_manager


class Hello:
    @slm_rerank.hookimpl
    def register_commands(self, cli: click.Group) -> None:
        @cli.command()
        @click.argument("name")
        def hello(name: str) -> None:
            """Say hello to NAME."""
            click.echo(f"hello {name}")


class RaisesWhileAddingCommands:
    @slm_rerank.hookimpl
    def register_commands(self, cli: click.Group) -> None:
        raise RuntimeError("no click for me")


class TakesABuiltinName:
    @slm_rerank.hookimpl
    def register_commands(self, cli: click.Group) -> None:
        @cli.command("config")
        def config() -> None:
            click.echo("not the real config")


class WantsToGoFirst:
    @slm_rerank.hookimpl(tryfirst=True)
    def register_commands(self, cli: click.Group) -> None:
        @cli.command()
        def first() -> None:
            click.echo("first")


def group_with(*plugins: object) -> click.Group:
    pm = make_manager()
    for plugin in plugins:
        pm.register(plugin, name=type(plugin).__name__.lower())
    return make_cli(plugins=lambda: pm)


def run(group: click.Group, *args: str) -> Result:
    return CliRunner().invoke(group, list(args))


def test_hook_register_commands() -> None:
    group = group_with(Hello())

    listed = run(group, "--help")
    said = run(group, "hello", "world")

    assert listed.exit_code == 0, listed.output
    assert "hello" in listed.stdout and "Say hello to NAME." in listed.stdout
    assert said.exit_code == 0, said.output
    assert said.stdout == "hello world\n"


def test_a_plugin_command_has_its_own_help() -> None:
    result = run(group_with(Hello()), "hello", "--help")

    assert result.exit_code == 0
    assert "hello [OPTIONS] NAME" in result.stdout and "Say hello to NAME." in result.stdout


def test_a_hook_that_raises_is_one_line_naming_the_plugin_and_the_builtins_still_run() -> None:
    group = group_with(RaisesWhileAddingCommands(), Hello())

    listed = run(group, "--help")
    said = run(group, "hello", "you")

    assert listed.exit_code == 0
    assert "Traceback" not in listed.output
    [line] = listed.stderr.splitlines()
    assert "plugin 'raiseswhileaddingcommands' raised while adding its commands" in line
    assert "RuntimeError: no click for me" in line
    assert "search" in listed.stdout and "config" in listed.stdout
    assert said.stdout == "hello you\n"  # the other plugin's commands are kept


def test_a_hook_option_slm_rerank_cannot_honour_leaves_that_plugins_commands_out() -> None:
    # each plugin's register_commands is called alone: tryfirst would silently do nothing
    group = group_with(WantsToGoFirst(), Hello())

    listed = run(group, "--help")

    assert listed.exit_code == 0
    [line] = listed.stderr.splitlines()
    assert "plugin 'wantstogofirst' marks its register_commands tryfirst=True" in line
    assert "its commands are left out" in line
    assert not re.search(r"^\s+first\b", listed.stdout, re.M)
    assert run(group, "hello", "you").stdout == "hello you\n"  # the other plugin's are kept


def test_a_builtin_command_still_runs_beside_a_broken_plugin() -> None:
    result = run(group_with(RaisesWhileAddingCommands()), "config", "show", "--format", "json")

    assert result.exit_code == 0, result.output
    assert '"top_k"' in result.stdout


def test_a_plugin_command_may_not_take_a_builtin_name() -> None:
    result = run(group_with(TakesABuiltinName()), "config", "show")

    assert result.exit_code == 0
    assert "not the real config" not in result.stdout
    listed = run(group_with(TakesABuiltinName()), "--help")
    assert "plugin 'takesabuiltinname' adds a command 'config', which slm-rerank already " \
           "has" in listed.stderr


def test_two_plugins_adding_one_name_are_both_named_and_the_first_is_kept() -> None:
    class Again(Hello):
        pass

    group = group_with(Hello(), Again())

    result = run(group, "hello", "x")

    assert result.stdout == "hello x\n"
    assert "command 'hello' is added by both plugin 'hello' and plugin 'again'" in result.stderr


def test_a_plain_search_does_not_ask_the_plugins_for_commands(repo) -> None:  # noqa: ANN001
    asked: list[bool] = []

    def plugins() -> pluggy.PluginManager | None:
        asked.append(True)
        return None

    result = CliRunner().invoke(make_cli(plugins=plugins), ["-q", "retry", "--fast",
                                                            "--root", str(repo)])

    assert result.exit_code == 0, result.output
    assert asked == []


def test_a_search_whose_first_argument_is_a_path_does_not_ask_the_plugins(
        repo, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: ANN001
    # `slm-rerank src -q retry`: src is the search's path; asking the plugins would let a
    # plugin's hook print before the JSON, slow the search, or take the search for its own
    asked: list[bool] = []

    def plugins() -> pluggy.PluginManager | None:
        asked.append(True)
        return None

    monkeypatch.chdir(repo)
    folder = next(p.name for p in sorted(repo.iterdir()) if p.is_dir() and p.name != ".git")
    result = CliRunner().invoke(make_cli(plugins=plugins), [folder, "-q", "retry", "--fast"])

    assert result.exit_code == 0, result.output
    assert asked == []
    assert folder in result.output


def test_register_commands_is_no_registry_family() -> None:
    assert "register_commands" not in FAMILIES
    assert set(FAMILIES) == {"register_candidate_sources", "register_query_expanders",
                             "register_model_profiles", "register_scorers",
                             "register_output_formatters"}


# --- through the installed entry points -----------------------------------------------------


class FakeDist:
    name = "slm-rerank-hello"
    version = "1.0"


class FakeEntryPoint:
    name = "hello"
    dist = FakeDist()

    def load(self) -> types.ModuleType:
        module = types.ModuleType("slm_rerank_hello")
        module.register_commands = Hello().register_commands  # type: ignore[attr-defined]
        return module


@pytest.fixture
def installed_hello(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(LOAD_PLUGINS_ENV, raising=False)
    monkeypatch.setattr(importlib.metadata, "entry_points",
                        lambda group: [FakeEntryPoint()] if group == "slm_rerank" else [])


def test_an_installed_plugin_adds_its_command_to_slm_rerank(installed_hello: None) -> None:
    listed = run(cli, "--help")
    said = run(cli, "hello", "pip")

    assert "hello" in listed.stdout
    assert said.exit_code == 0, said.output
    assert said.stdout == "hello pip\n"


def test_a_disabled_plugin_adds_no_command(installed_hello: None) -> None:
    user_config().write_text('disabled_plugins = ["hello"]\n')

    assert "hello" not in run(cli, "--help").stdout


def test_a_broken_config_leaves_the_plugin_commands_out_and_the_builtins_say_why(
        installed_hello: None) -> None:
    user_config().write_text("top_k = [\n")

    listed = run(cli, "--help")
    shown = run(cli, "config", "show")

    assert listed.exit_code == 0 and "hello" not in listed.stdout
    assert shown.exit_code == 1 and "invalid TOML" in shown.stderr  # the command's own words


class AddsANonCommand:
    @slm_rerank.hookimpl
    def register_commands(self, cli: click.Group) -> None:
        cli.commands["bogus"] = 42  # type: ignore[assignment]


class AddsACommandUnderNoName:
    @slm_rerank.hookimpl
    def register_commands(self, cli: click.Group) -> None:
        cli.commands[None] = click.Command("bogus")  # type: ignore[index]


class ExitsWhileAddingCommands:
    @slm_rerank.hookimpl
    def register_commands(self, cli: click.Group) -> None:
        raise SystemExit(3)


@pytest.mark.parametrize("plugin", [AddsANonCommand(), AddsACommandUnderNoName(),
                                    ExitsWhileAddingCommands()])
def test_a_plugin_adding_a_non_command_or_exiting_is_left_out_and_help_still_runs(
        plugin: object) -> None:
    group = group_with(plugin, Hello())

    listed = run(group, "--help")
    called = run(group, "bogus")

    assert listed.exit_code == 0, listed.output
    assert "Traceback" not in listed.output and "search" in listed.stdout
    assert "hello" in listed.stdout and "bogus" not in listed.stdout
    assert f"plugin '{type(plugin).__name__.lower()}'" in listed.stderr
    assert not isinstance(called.exception, (AttributeError, TypeError))
