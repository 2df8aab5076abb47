"""The plugin manager: hookspecs, entry-point loading, which plugin is which, and the registry.

The registry collects what plugins register, remembering which plugin registered each name.
The families are read from the hookspecs themselves: each ``register_*`` hook's
``register`` parameter is annotated ``Callable[[Kind], None]``, and ``Kind.noun`` is how a
person calls one. Adding a family is one hookspec and one dataclass.
"""

from __future__ import annotations

import inspect
import os
import re
import sys
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, TypeVar, get_args, get_type_hints

import pluggy
from pluggy import HookImpl

from slm_rerank import hookspecs
from slm_rerank.errors import RegistrationError
from slm_rerank.plugin_listing import ENTRY_POINT_GROUP as ENTRY_POINT_GROUP  # re-exported
from slm_rerank.plugin_listing import listed
from slm_rerank.registrations import (
    CandidateSource,
    ModelProfile,
    OutputFormatter,
    QueryExpander,
    Scorer,
)

#: Comma-separated entry-point or distribution names: load only these ("" loads none).
LOAD_PLUGINS_ENV = "SLM_RERANK_LOAD_PLUGINS"
#: The plugin distributions this project ships (plugins/*): the host's tests load only these.
#: Not all are built-ins: a model family is a separate install (``host_requirements``).
BUILTIN_DISTRIBUTIONS = frozenset({
    "slm-rerank-formatters", "slm-rerank-ripgrep", "slm-rerank-git", "slm-rerank-yesno",
    "slm-rerank-openai", "slm-rerank-gemma", "slm-rerank-lfm", "slm-rerank-qwen",
    "slm-rerank-rwkv", "slm-rerank-expand", "slm-rerank-listwise", "slm-rerank-graded",
    "slm-rerank-rerank-endpoint", "slm-rerank-review",
})


#: The host's distribution: the plugins it depends on come with a bare install.
HOST_DISTRIBUTION = "slm-rerank"


def _normal(name: str) -> str:
    """A distribution name as PEP 503 compares them (``Slm_Rerank.Git`` is ``slm-rerank-git``)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def host_requirements() -> frozenset[str]:
    """The distributions a bare ``pip install slm-rerank`` brings, from the host's metadata:
    its requirements outside every extra, names normalised.

    These are the built-ins `slm-rerank plugins` leaves out without --all; a plugin the user
    installed beside the host (``pip install slm-rerank slm-rerank-gemma``) is not one, even
    when this project ships it. Empty when the host has no metadata (a bare source tree):
    then every plugin is listed.
    """
    from importlib.metadata import PackageNotFoundError, requires

    try:
        listed = requires(HOST_DISTRIBUTION) or []
    except PackageNotFoundError:
        return frozenset()
    names = set()
    for line in listed:
        requirement, _, marker = line.partition(";")
        found = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", requirement)
        if found and not re.search(r"\bextra\b", marker):
            names.add(_normal(found.group(1)))
    return frozenset(names)


@dataclass
class PluginInfo:
    """One loaded (or failed) plugin, as `slm-rerank plugins` shows it."""

    name: str
    distribution: str | None = None
    version: str | None = None
    #: it came with the host (``host_requirements``), not installed beside it
    builtin: bool = False
    hooks: list[str] = field(default_factory=list)
    error: str | None = None


def make_manager() -> pluggy.PluginManager:
    """A plugin manager that knows the hooks and has no plugins yet (what tests start from)."""
    pm = pluggy.PluginManager(hookspecs.PROJECT)
    pm.add_hookspecs(hookspecs)
    return pm


def plugins_to_load() -> frozenset[str] | None:
    """The names ``$SLM_RERANK_LOAD_PLUGINS`` allows, or None (load all) when it is unset."""
    value = os.environ.get(LOAD_PLUGINS_ENV)
    if value is None:
        return None
    return frozenset(name.strip() for name in value.split(",") if name.strip())


def load_entry_points(
    pm: pluggy.PluginManager, disabled: Iterable[str] = (), cache_folder: Path | None = None
) -> dict[str, PluginInfo]:
    """Load every installed plugin of the entry-point group into ``pm``.

    When ``$SLM_RERANK_LOAD_PLUGINS`` is set, only the plugins it names (by entry-point or
    distribution name) are considered; the others are neither imported nor listed.
    A plugin named in ``disabled`` (by entry-point or distribution name) is blocked before it
    is imported. A plugin that fails to import is reported in its ``PluginInfo.error`` and
    the others still load. The list of entry points is kept in ``cache_folder`` between
    starts when the command line asked for it (``plugin_listing``).
    """
    wanted = plugins_to_load()
    blocked = set(disabled)
    infos: dict[str, PluginInfo] = {}
    for ep in listed(host_requirements, cache_folder):
        dist = ep.distribution
        if wanted is not None and ep.name not in wanted and dist not in wanted:
            continue
        if ep.name in blocked or dist in blocked:
            pm.set_blocked(ep.name)
            continue
        if pm.has_plugin(ep.name) or pm.is_blocked(ep.name):
            continue
        info = PluginInfo(name=ep.name, distribution=dist, version=ep.version,
                          builtin=ep.builtin)
        infos[ep.name] = info
        try:
            pm.register(ep.load(), name=ep.name)
        except Exception as exc:  # a broken plugin must not take the others down
            info.error = f"{type(exc).__name__}: {exc}"
            continue
    pm.check_pending()
    for name, info in infos.items():
        plugin = pm.get_plugin(name)
        if plugin is not None:
            info.hooks = sorted(c.name for c in pm.get_hookcallers(plugin) or ())
    return infos


def report_load_errors(infos: dict[str, PluginInfo]) -> None:
    """Say on stderr which plugins failed to load, one line each."""
    for info in infos.values():
        if info.error:
            print(
                f"slm-rerank: plugin '{info.name}' ({info.distribution}) failed to load and "
                f"was skipped: {info.error}",
                file=sys.stderr,
            )


#: hookimpl options that only mean something when pluggy calls a hook's implementations
#: together; slm-rerank calls each plugin's alone (to know which plugin gave what), so there
#: they would silently do nothing
UNSUPPORTED_OPTIONS = ("hookwrapper", "wrapper", "tryfirst", "trylast")


def refuse_unsupported_options(impl: HookImpl, hook_name: str) -> None:
    """Raise a RegistrationError naming the plugin when ``impl``, an implementation of
    ``hook_name`` the host calls alone, asks for an option of ``UNSUPPORTED_OPTIONS``:
    ``tryfirst`` would do nothing, and a hookwrapper would be called as a plain function."""
    asked = [option for option in UNSUPPORTED_OPTIONS if getattr(impl, option, False)]
    if asked:
        raise RegistrationError(
            f"plugin '{impl.plugin_name}' marks its {hook_name} "
            f"{', '.join(f'{o}=True' for o in asked)}, which slm-rerank does not support "
            "(it calls each plugin's implementation alone); remove it from the "
            "@slm_rerank.hookimpl")


# --- the registry -----------------------------------------------------------------

T = TypeVar("T")


def _families() -> dict[str, type]:
    out: dict[str, type] = {}
    for name, fn in inspect.getmembers(hookspecs, inspect.isfunction):
        # register_commands(cli) adds commands, not things to a registry: no family
        if hasattr(fn, f"{hookspecs.PROJECT}_spec") and "register" in inspect.signature(
                fn).parameters:
            callback = get_type_hints(fn)["register"]
            out[name] = get_args(callback)[0][0]
    return out


#: hook name -> the dataclass its ``register`` callback takes
FAMILIES: dict[str, type] = _families()
#: the dataclass -> its hook name
HOOK_OF: dict[type, str] = {kind: hook for hook, kind in FAMILIES.items()}


@dataclass(frozen=True)
class Registered(Generic[T]):
    name: str
    plugin: str
    item: T


class Registry:
    """Reads the register_* hooks of a plugin manager once each, on first use."""

    def __init__(self, pm: pluggy.PluginManager) -> None:
        self.pm = pm
        self._collected: dict[str, dict[str, Registered[Any]]] = {}

    def collect(self, hook_name: str) -> dict[str, Registered[Any]]:
        """Every registration of one hook, by name; raises RegistrationError on conflict."""
        if hook_name in self._collected:
            return self._collected[hook_name]
        expected: type[Any] = FAMILIES[hook_name]
        noun = expected.noun
        found: dict[str, Registered[Any]] = {}
        # Called one implementation at a time so that each name is attributed to its plugin.
        for impl in reversed(getattr(self.pm.hook, hook_name).get_hookimpls()):
            refuse_unsupported_options(impl, hook_name)
            plugin = impl.plugin_name

            def register(item: Any, _plugin: str = plugin) -> None:
                if not isinstance(item, expected):
                    raise RegistrationError(
                        f"plugin '{_plugin}' registered a {type(item).__name__} from "
                        f"{hook_name}; expected {expected.__name__}"
                    )
                if item.name in found:
                    other = found[item.name].plugin
                    raise RegistrationError(
                        f"{noun} '{item.name}' is registered by both plugin '{other}' and "
                        f"plugin '{_plugin}'; disable one with disabled_plugins = ['{_plugin}']"
                    )
                found[item.name] = Registered(item.name, _plugin, item)

            kwargs = {"register": register}
            try:
                impl.function(**{k: v for k, v in kwargs.items() if k in impl.argnames})
            except RegistrationError:
                raise
            except Exception as exc:
                raise RegistrationError(
                    f"plugin '{plugin}' raised while registering {noun}s: "
                    f"{type(exc).__name__}: {exc}"
                ) from exc
        self._collected[hook_name] = found
        return found

    def of(self, kind: type[T]) -> dict[str, T]:
        """Every registered thing of one family (``registry.of(Scorer)``), by name."""
        return {name: reg.item for name, reg in self.collect(HOOK_OF[kind]).items()}

    def items(self, hook_name: str) -> dict[str, Any]:
        return {name: reg.item for name, reg in self.collect(hook_name).items()}

    def formatters(self) -> dict[str, OutputFormatter]:
        return self.of(OutputFormatter)

    def sources(self) -> dict[str, CandidateSource]:
        return self.of(CandidateSource)

    def expanders(self) -> dict[str, QueryExpander]:
        return self.of(QueryExpander)

    def profiles(self) -> dict[str, ModelProfile]:
        return self.of(ModelProfile)

    def scorers(self) -> dict[str, Scorer]:
        return self.of(Scorer)

    def names_by_plugin(self) -> dict[str, dict[str, list[str]]]:
        """plugin name -> hook name -> the names it registered (for `slm-rerank plugins`)."""
        out: dict[str, dict[str, list[str]]] = {}
        for hook_name in FAMILIES:
            for reg in self.collect(hook_name).values():
                out.setdefault(reg.plugin, {}).setdefault(hook_name, []).append(reg.name)
        return out
