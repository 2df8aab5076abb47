"""One run's settings and plugins, loaded lazily and only once."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pluggy

from slm_rerank.config import Settings, load_settings
from slm_rerank.plugins import PluginInfo, load_entry_points, make_manager, report_load_errors
from slm_rerank.registry import Registry


@dataclass
class Host:
    """Settings plus the plugin manager built from them."""

    settings: Settings
    pm: pluggy.PluginManager | None = None
    infos: dict[str, PluginInfo] = field(default_factory=dict)
    _registry: Registry | None = None

    @classmethod
    def from_environment(
        cls, start: Path | None = None, flags: dict[str, Any] | None = None
    ) -> Host:
        return cls(load_settings(start=start, flags=flags))

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
            if self.pm is None:
                self.pm = make_manager()
                self.infos = load_entry_points(self.pm, self.settings.disabled_plugins)
                report_load_errors(self.infos)
            self._registry = Registry(self.pm)
        return self._registry
