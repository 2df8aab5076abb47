"""One run's settings and plugins, loaded lazily and only once."""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pluggy

from slm_rerank.config import KeyType, Settings, check_typed, check_value, load_settings, shown
from slm_rerank.errors import ConfigError
from slm_rerank.plugins import (
    FAMILIES,
    PluginInfo,
    Registry,
    load_entry_points,
    make_manager,
    report_load_errors,
)

#: settings whose values must name an installed plugin's registration
CHOICE_KEYS = ("format", "sources", "scorer", "model")

#: How the command line's flags say where a value came from: ``flag: --top-k``, in an error
#: about the value and as its origin (``config show``, the messages that name a setting's
#: origin). ``{flag}`` is the settings key as a flag, ``{key}`` the key itself.
FLAG = "flag: --{flag}"

#: settings whose None is a value, not "not given": --budget sets both keys, None being no cap
#: (``off``, or the other unit), so it replaces a configured budget instead of adding to it
NONE_IS_GIVEN = frozenset({"budget_tokens", "budget_seconds"})

#: One host may be shared by threads (a Reranker, rerank_documents' callers): a second
#: thread saw the first's still-empty plugin manager and reported no plugin installed.
_LOADING = threading.Lock()

#: Loaded plugin managers a process keeps between hosts, by what chooses the plugins (the
#: disabled ones, ``$SLM_RERANK_LOAD_PLUGINS``, the listing's cache folder); None: each host
#: loads its own. The warm process's worker turns it on (``keep_plugins``): what is installed
#: cannot change under it, since its server stops when it does.
_KEPT_PLUGINS: dict[tuple[tuple[str, ...], str | None, str],
                    tuple[pluggy.PluginManager, dict[str, PluginInfo]]] | None = None


def keep_plugins() -> None:
    """Keep the plugins each host loads for the next hosts of this process (see above)."""
    global _KEPT_PLUGINS
    if _KEPT_PLUGINS is None:
        _KEPT_PLUGINS = {}


@dataclass
class Host:
    """Settings plus the plugin manager built from them."""

    settings: Settings
    pm: pluggy.PluginManager | None = None
    infos: dict[str, PluginInfo] = field(default_factory=dict)
    _registry: Registry | None = None
    _validated: bool = False
    #: a ``slm_rerank.model.session.ModelSession`` kept by long-lived callers (MCP), else
    #: None: each query then opens and closes its own client
    model_session: Any = None

    @classmethod
    def from_environment(
        cls, start: Path | None = None, flags: dict[str, Any] | None = None
    ) -> Host:
        """The settings layers for ``start`` (user config, the repository's file, the
        environment), with the command line's ``flags`` (settings keys, from
        ``overrides.overrides``) on top: ``with_overrides(FLAG, **flags)``."""
        return cls(load_settings(start=start)).with_overrides(FLAG, **(flags or {}))

    def with_overrides(self, where: str, **given: Any) -> Host:
        """This host for one call, with ``given`` above every settings layer.

        The one way a front door sets what its caller gave for one run (a flag, a keyword
        argument, a tool parameter); ``given`` holds settings keys, as
        ``overrides.overrides`` names a caller's values. ``where`` says who gave them, as
        that caller writes them: ``{key}`` stands for the settings key, ``{flag}`` for it
        as a flag (``"Reranker({key}=...)"``, ``FLAG``). A value a key cannot take is a
        ``ConfigError`` naming ``where`` and the key; each value's origin is ``where``
        (``config show``, and the errors that name where a setting came from). None means
        "not given", except for the budget keys (``NONE_IS_GIVEN``: no cap).

        Returns a new host that shares this one's loaded plugins and model session; this
        host is left as it was (``self`` when nothing is given). A plugin choice given
        (``scorer``, ``model``, ``format``, ``sources``) is checked again by ``validate``.
        """
        checked: dict[str, Any] = {}
        origins = dict(self.settings.origins)
        for key, value in given.items():
            if value is None and key not in NONE_IS_GIVEN:
                continue
            named = where.format(key=key, flag=key.replace("_", "-"))
            checked[key] = check_value(key, value, named)
            origins[key] = named
        if not checked:
            return self
        settings = dataclasses.replace(self.settings, **checked)
        settings.origins = origins
        return dataclasses.replace(
            self, settings=settings,
            _validated=self._validated and not checked.keys() & set(CHOICE_KEYS))

    @classmethod
    def with_plugins(cls, settings: Settings, *plugins: object) -> Host:
        """A host whose only plugins are ``plugins`` (no entry points): for tests and embedding."""
        pm = make_manager()
        for plugin in plugins:
            pm.register(plugin)
        pm.check_pending()
        return cls(settings, pm=pm)

    @property
    def registry(self) -> Registry:
        if self._registry is None:
            with _LOADING:
                if self._registry is None:
                    if self.pm is None:
                        self.pm, self.infos = self._load_plugins()
                        report_load_errors(self.infos)  # each run says it, as on its own
                    self._registry = Registry(self.pm)
        return self._registry

    def _load_plugins(self) -> tuple[pluggy.PluginManager, dict[str, PluginInfo]]:
        import os

        from slm_rerank.plugins import LOAD_PLUGINS_ENV

        folder = self._listing_folder()
        key = (tuple(sorted(self.settings.disabled_plugins)), os.environ.get(LOAD_PLUGINS_ENV),
               str(folder))
        if _KEPT_PLUGINS is not None and key in _KEPT_PLUGINS:
            return _KEPT_PLUGINS[key]
        pm = make_manager()
        loaded = pm, load_entry_points(pm, self.settings.disabled_plugins, folder)
        if _KEPT_PLUGINS is not None:
            _KEPT_PLUGINS[key] = loaded
            while len(_KEPT_PLUGINS) > 8:
                del _KEPT_PLUGINS[next(iter(_KEPT_PLUGINS))]
        return loaded

    def _listing_folder(self) -> Path:
        """Where the entry-point listing may be kept between starts: the cache folder."""
        from slm_rerank.cache_folder import cache_path

        return cache_path(self.settings)

    def _origin(self, key: str) -> str:
        return self.settings.origins.get(key, "default")

    def validate(self) -> None:
        """Check the settings that name plugins: format, sources, scorer, model, [plugins.*].

        Types and ranges were checked when the values were read; these need the registry.
        Defaults are not the user's words: a missing default plugin is reported where it is
        needed (no source can search, no formatter is installed), not as a bad key.
        """
        if self._validated:
            return
        self.refuse_repo_choices()
        for key in CHOICE_KEYS:
            if self._origin(key) != "default":
                self.check_choice(key, getattr(self.settings, key), self._origin(key))
        for name in self.settings.plugins:
            self.options_for(name)
        self._validated = True

    def refuse_repo_choices(self) -> None:
        """Leave out a repository's value that names no installed plugin (a format, a
        source), with one warning line: what the layers below it set applies instead.

        The repository's file is untrusted input; its typo must not stop the user's query.
        """
        from slm_rerank.config import warn_refused
        from slm_rerank.report import display_path, visible

        settings = self.settings
        for key in CHOICE_KEYS:
            origin = self._origin(key)
            if not origin.startswith("repo: ") or key not in settings.repo_replaced:
                continue
            where = visible(display_path(origin.removeprefix("repo: ")))
            try:
                self.check_choice(key, getattr(settings, key), where)
            except ConfigError as exc:
                value, below = settings.repo_replaced[key]
                setattr(settings, key, value)
                settings.origins[key] = below
                refusal = f"{visible(str(exc))}; ignored, {shown(value)} applies"
                settings.repo_refusals = {**settings.repo_refusals, key: refusal}
                warn_refused({key: refusal})

    def check_choice(self, key: str, value: Any, where: str) -> None:
        """Raise ConfigError unless ``value`` names installed plugins for ``key``."""
        listing: dict[str, Callable[[], Mapping[str, object]]] = {
            "format": self.registry.formatters, "sources": self.registry.sources,
            "scorer": self.registry.scorers, "model": self.registry.profiles,
        }
        installed = listing[key]()
        names = value if isinstance(value, list) else [] if value is None else [value]
        for name in names:
            if name not in installed:
                known = ", ".join(sorted(installed)) or "none installed"
                noun = {"sources": "source", "model": "model profile"}.get(key, key)
                raise ConfigError(f"{where}: key '{key}': unknown {noun} "
                                  f"{shown(name)} (installed: {known})")

    def options_for(self, name: str) -> dict[str, Any]:
        """The ``[plugins.NAME]`` settings of a registered thing, defaults filled in."""
        owners = [item for hook in FAMILIES for n, item in self.registry.items(hook).items()
                  if n == name]
        given = self.settings.plugins.get(name, {})
        if given and not owners:
            key = f"plugins.{name}.{next(iter(given))}"
            raise ConfigError(f"{self._origin(key)}: [plugins.{name}]: nothing named "
                              f"{shown(name)} is registered by an installed plugin")
        declared = {opt.key: opt for owner in owners for opt in owner.options}
        values = {key: opt.default for key, opt in declared.items()}
        for key, value in given.items():
            where = f"{self._origin(f'plugins.{name}.{key}')}: [plugins.{name}]"
            if key not in declared:
                known = ", ".join(sorted(declared)) or "none"
                raise ConfigError(f"{where}: unknown key {shown(key)} (known keys: {known})")
            default = declared[key].default
            kind = KeyType(str, optional=True) if default is None else KeyType.of(type(default))
            values[key] = check_typed(kind, value, f"{where}: key '{key}'")
        return values
