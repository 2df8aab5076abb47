"""The `slm-rerank` command group: its built-in commands in one list, and the ones plugins add.

Each command lives in its own module of ``slm_rerank/cli``; nothing registers itself on
import. A plugin adds commands through the ``register_commands`` hook, asked only when a
command name is not a built-in one (or for ``--help``), so a search pays nothing for it.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable, Iterable, Iterator, MutableMapping
from typing import Any

import click
import pluggy

from slm_rerank import __version__
from slm_rerank.cli.terminal import warn

#: Every built-in command of `slm-rerank`, by name: the module that defines it and its name
#: there. A command's module is imported when the command runs or `--help` lists it, so a
#: search does not import every other command's module (the hook's classifier, the servers,
#: calibration) before it starts.
COMMANDS: dict[str, str] = {
    "search": "slm_rerank.cli.search:search",
    "plugins": "slm_rerank.cli.plugins:plugins",
    "config": "slm_rerank.cli.config:config",
    "stats": "slm_rerank.cli.stats:stats",
    "endpoints": "slm_rerank.cli.endpoints:endpoints",
    "cache": "slm_rerank.cli.cache:cache",
    "serve": "slm_rerank.cli.serve:serve",
    "serve-api": "slm_rerank.cli.serve_api:serve_api",
    "mcp": "slm_rerank.cli.mcp:mcp",
    "hook": "slm_rerank.cli.hook:hook",
    "calibrate": "slm_rerank.cli.calibrate:calibrate",
    "bench": "slm_rerank.cli.bench:bench",
    "warm": "slm_rerank.cli.warm:warm",
}
#: The subcommands of `slm-rerank plugins` (bare `slm-rerank plugins` lists them).
PLUGINS_COMMANDS: tuple[str, ...] = ("slm_rerank.cli.new_plugin:new_plugin",)


def load_command(where: str) -> click.Command:
    """The command ``where`` ("module:name") names, with its subcommands added."""
    module, _, name = where.partition(":")
    command: click.Command = getattr(importlib.import_module(module), name)
    if where == COMMANDS["plugins"] and isinstance(command, click.Group):
        for sub in PLUGINS_COMMANDS:
            command.add_command(load_command(sub))
    return command


class LazyCommands(MutableMapping[str, click.Command]):
    """A group's commands by name, each imported on first use (``load_command``).

    Its names are known without importing anything: asking whether a word names a command,
    or listing them, imports no command's module.
    """

    def __init__(self, where: dict[str, str]) -> None:
        self._where = dict(where)
        self._loaded: dict[str, click.Command] = {}

    def __getitem__(self, name: str) -> click.Command:
        if name not in self._loaded:
            self._loaded[name] = load_command(self._where[name])  # KeyError: no such command
        return self._loaded[name]

    def __setitem__(self, name: str, command: click.Command) -> None:
        self._where.pop(name, None)
        self._loaded[name] = command

    def __delitem__(self, name: str) -> None:
        if name not in self:
            raise KeyError(name)
        self._where.pop(name, None)
        self._loaded.pop(name, None)

    def __contains__(self, name: object) -> bool:
        return name in self._where or name in self._loaded

    def __iter__(self) -> Iterator[str]:
        return iter({**dict.fromkeys(self._where), **dict.fromkeys(self._loaded)})

    def __len__(self) -> int:
        return len({*self._where, *self._loaded})


#: The words a first argument may be without being taken for the search's.
_GROUP_OPTIONS = ("--help", "-h", "--version")
_META_KEY = "slm_rerank.plugin_commands"


def installed_plugins() -> pluggy.PluginManager | None:
    """The installed plugins as a search loads them (``disabled_plugins`` kept out).

    None when the settings cannot be read: `config set` must still run to repair the file,
    and a search says what is wrong with it.
    """
    from slm_rerank.cache_folder import cache_path
    from slm_rerank.config import load_settings
    from slm_rerank.errors import ConfigError
    from slm_rerank.plugins import load_entry_points, make_manager

    try:
        settings = load_settings()
    except ConfigError:
        return None
    pm = make_manager()
    try:
        load_entry_points(pm, settings.disabled_plugins, cache_path(settings))
    except pluggy.PluginValidationError as exc:  # a misspelt hook: the search stops on it
        warn(f"plugin commands are left out: {exc}")
        return None
    return pm


def plugin_commands(pm: pluggy.PluginManager, taken: Iterable[str]) -> dict[str, click.Command]:
    """The commands each plugin's ``register_commands`` adds, by name.

    Each plugin adds to a group of its own, so that what it added is known to be its: a
    plugin whose hook raises, or a command whose name is taken (by slm-rerank or by an
    earlier plugin), is left out with one line on stderr naming the plugin.
    """
    from slm_rerank.errors import RegistrationError
    from slm_rerank.plugins import refuse_unsupported_options

    builtin = set(taken)
    found: dict[str, tuple[str, click.Command]] = {}
    for impl in pm.hook.register_commands.get_hookimpls():  # in the order of registering
        plugin = impl.plugin_name
        try:
            refuse_unsupported_options(impl, "register_commands")
        except RegistrationError as exc:
            warn(f"{exc}; its commands are left out")
            continue
        group = click.Group("slm-rerank")
        try:
            impl.function(**({"cli": group} if "cli" in impl.argnames else {}))
        except (Exception, SystemExit) as exc:  # a broken plugin must not take the built-ins down
            warn(f"plugin '{plugin}' raised while adding its commands, which are left out: "
                 f"{type(exc).__name__}: {exc}")
            continue
        for name, command in group.commands.items():
            if not isinstance(command, click.Command) or not isinstance(name, str):
                warn(f"plugin '{plugin}' adds {type(command).__name__} {name!r}, which is not "
                     "a click command under a name; it is left out")
            elif name in builtin:
                warn(f"plugin '{plugin}' adds a command '{name}', which slm-rerank already "
                     "has; it is left out (the plugin must name it otherwise)")
            elif name in found:
                warn(f"command '{name}' is added by both plugin '{found[name][0]}' and "
                     f"plugin '{plugin}'; the second is left out (disable one with "
                     f"disabled_plugins = ['{plugin}'])")
            else:
                found[name] = (plugin, command)
    return {name: command for name, (_, command) in found.items()}


class SlmRerankGroup(click.Group):
    """`slm-rerank -q ...` means `slm-rerank search -q ...`; plugins may add commands."""

    def __init__(self, *args: Any,
                 plugins: Callable[[], pluggy.PluginManager | None] = installed_plugins,
                 **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.plugins = plugins

    def plugin_commands(self, ctx: click.Context) -> dict[str, click.Command]:
        """The plugins' commands, asked once per run (``ctx.meta`` is the run's)."""
        if _META_KEY not in ctx.meta:
            pm = self.plugins()
            ctx.meta[_META_KEY] = plugin_commands(pm, self.commands) if pm else {}
        return ctx.meta[_META_KEY]

    def _names_a_command(self, ctx: click.Context, word: str) -> bool:
        if word in self.commands or word in _GROUP_OPTIONS:
            return True
        # an option is the search's; only a bare word can name a plugin's command
        if word.startswith("-"):
            return False
        # a word that names a file or folder here is the search's path (`slm-rerank src -q
        # ...`): the plugins are not asked, so a plain search never runs their hooks
        if os.path.lexists(word):
            return False
        return word in self.plugin_commands(ctx)

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if not args or not self._names_a_command(ctx, args[0]):
            args = ["search", *args]
        return super().parse_args(ctx, args)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        return super().get_command(ctx, cmd_name) or self.plugin_commands(ctx).get(cmd_name)

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*self.commands, *self.plugin_commands(ctx)})


def make_cli(plugins: Callable[[], pluggy.PluginManager | None] = installed_plugins
             ) -> click.Group:
    """The `slm-rerank` group; ``plugins`` gives the plugin manager its commands come from."""

    @click.group(cls=SlmRerankGroup, plugins=plugins, commands=LazyCommands(COMMANDS),
                 context_settings={"help_option_names": ["-h", "--help"]})
    @click.version_option(__version__, prog_name="slm-rerank")
    def cli() -> None:
        """Find where in a codebase the answer to a question lives.

        \b
        slm-rerank -q "where are retries configured" [PATHS]...
        slm-rerank plugins --all
        slm-rerank config show
        """

    return cli


cli = make_cli()
