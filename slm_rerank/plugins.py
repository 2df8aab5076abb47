"""The plugin manager: hookspecs, entry-point loading, and which plugin is which."""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Iterable
from dataclasses import dataclass, field

import pluggy

from slm_rerank import hookspecs

ENTRY_POINT_GROUP = "slm_rerank"
#: Comma-separated entry-point or distribution names: load only these ("" loads none).
LOAD_PLUGINS_ENV = "SLM_RERANK_LOAD_PLUGINS"
#: The plugin distributions this project ships (plugins/*): the host's tests load only these.
#: Not all are built-ins: a model family is a separate install (``host_requirements``).
BUILTIN_DISTRIBUTIONS = frozenset({
    "slm-rerank-formatters", "slm-rerank-ripgrep", "slm-rerank-git", "slm-rerank-yesno",
    "slm-rerank-openai", "slm-rerank-gemma", "slm-rerank-lfm", "slm-rerank-qwen",
    "slm-rerank-rwkv", "slm-rerank-expand", "slm-rerank-listwise", "slm-rerank-graded",
    "slm-rerank-rerank-endpoint",
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
    pm: pluggy.PluginManager, disabled: Iterable[str] = ()
) -> dict[str, PluginInfo]:
    """Load every installed plugin of the entry-point group into ``pm``.

    When ``$SLM_RERANK_LOAD_PLUGINS`` is set, only the plugins it names (by entry-point or
    distribution name) are considered; the others are neither imported nor listed.
    A plugin named in ``disabled`` (by entry-point or distribution name) is blocked before it
    is imported. A plugin that fails to import is reported in its ``PluginInfo.error`` and
    the others still load.
    """
    from importlib.metadata import entry_points

    wanted = plugins_to_load()
    bundled = host_requirements()
    blocked = set(disabled)
    infos: dict[str, PluginInfo] = {}
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        dist = ep.dist.name if ep.dist is not None else None
        if wanted is not None and ep.name not in wanted and dist not in wanted:
            continue
        if ep.name in blocked or dist in blocked:
            pm.set_blocked(ep.name)
            continue
        if pm.has_plugin(ep.name) or pm.is_blocked(ep.name):
            continue
        info = PluginInfo(
            name=ep.name,
            distribution=dist,
            version=ep.dist.version if ep.dist is not None else None,
            builtin=dist is not None and _normal(dist) in bundled,
        )
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
