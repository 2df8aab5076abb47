"""The `slm-rerank` command group: its built-in commands in one list, and the ones plugins add.

Each command lives in its own module of ``slm_rerank/cli``; nothing registers itself on
import. A plugin adds commands through the ``register_commands`` hook, asked only when a
command name is not a built-in one (or for ``--help``), so a search pays nothing for it.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from typing import Any

import click
import pluggy

from slm_rerank import __version__
from slm_rerank.cli.bench import bench
from slm_rerank.cli.cache import cache
from slm_rerank.cli.calibrate import calibrate
from slm_rerank.cli.config import config
from slm_rerank.cli.endpoints import endpoints
from slm_rerank.cli.hook import hook
from slm_rerank.cli.mcp import mcp
from slm_rerank.cli.new_plugin import new_plugin
from slm_rerank.cli.plugins import plugins
from slm_rerank.cli.search import search
from slm_rerank.cli.serve import serve
from slm_rerank.cli.serve_api import serve_api
from slm_rerank.cli.stats import stats
from slm_rerank.cli.terminal import warn

#: Every built-in command of `slm-rerank`.
COMMANDS: tuple[click.Command, ...] = (
    search, plugins, config, stats, endpoints, cache, serve, serve_api, mcp, hook, calibrate,
    bench,
)
#: The subcommands of `slm-rerank plugins` (bare `slm-rerank plugins` lists them).
PLUGINS_COMMANDS: tuple[click.Command, ...] = (new_plugin,)

for _command in PLUGINS_COMMANDS:
    plugins.add_command(_command)

#: The words a first argument may be without being taken for the search's.
_GROUP_OPTIONS = ("--help", "-h", "--version")
_META_KEY = "slm_rerank.plugin_commands"


def installed_plugins() -> pluggy.PluginManager | None:
    """The installed plugins as a search loads them (``disabled_plugins`` kept out).

    None when the settings cannot be read: `config set` must still run to repair the file,
    and a search says what is wrong with it.
    """
    from slm_rerank.config import load_settings
    from slm_rerank.errors import ConfigError
    from slm_rerank.plugins import load_entry_points, make_manager

    try:
        disabled = load_settings().disabled_plugins
    except ConfigError:
        return None
    pm = make_manager()
    try:
        load_entry_points(pm, disabled)
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

    @click.group(cls=SlmRerankGroup, plugins=plugins, commands=COMMANDS,
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
