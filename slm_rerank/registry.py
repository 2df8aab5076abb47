"""Collects what plugins register, remembering which plugin registered each name."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import pluggy

from slm_rerank.errors import RegistrationError
from slm_rerank.registrations import (
    CandidateSource,
    ModelProfile,
    OutputFormatter,
    QueryExpander,
    Scorer,
)

T = TypeVar("T")

#: hook name -> (what it registers, how a person calls one of those)
FAMILIES: dict[str, tuple[type, str]] = {
    "register_model_profiles": (ModelProfile, "model profile"),
    "register_candidate_sources": (CandidateSource, "candidate source"),
    "register_query_expanders": (QueryExpander, "query expander"),
    "register_output_formatters": (OutputFormatter, "output formatter"),
    "register_scorers": (Scorer, "scorer"),
}




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
        expected, noun = FAMILIES[hook_name]
        found: dict[str, Registered[Any]] = {}
        caller = getattr(self.pm.hook, hook_name)
        # Called one implementation at a time so that each name is attributed to its plugin.
        for impl in reversed(caller.get_hookimpls()):
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

    def items(self, hook_name: str) -> dict[str, Any]:
        return {name: reg.item for name, reg in self.collect(hook_name).items()}

    def formatters(self) -> dict[str, OutputFormatter]:
        return self.items("register_output_formatters")

    def sources(self) -> dict[str, CandidateSource]:
        return self.items("register_candidate_sources")

    def expanders(self) -> dict[str, QueryExpander]:
        return self.items("register_query_expanders")

    def profiles(self) -> dict[str, ModelProfile]:
        return self.items("register_model_profiles")

    def scorers(self) -> dict[str, Scorer]:
        return self.items("register_scorers")

    def names_by_plugin(self) -> dict[str, dict[str, list[str]]]:
        """plugin name -> hook name -> the names it registered (for `slm-rerank plugins`)."""
        out: dict[str, dict[str, list[str]]] = {}
        for hook_name in FAMILIES:
            for reg in self.collect(hook_name).values():
                out.setdefault(reg.plugin, {}).setdefault(hook_name, []).append(reg.name)
        return out
