"""Collects what plugins register, remembering which plugin registered each name.

The families are read from the hookspecs themselves: each ``register_*`` hook's
``register`` parameter is annotated ``Callable[[Kind], None]``, and ``Kind.noun`` is how a
person calls one. Adding a family is one hookspec and one dataclass.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any, Generic, TypeVar, get_args, get_type_hints

import pluggy

from slm_rerank import hookspecs
from slm_rerank.errors import RegistrationError
from slm_rerank.registrations import (
    CandidateSource,
    ModelProfile,
    OutputFormatter,
    QueryExpander,
    Scorer,
)

T = TypeVar("T")


def _families() -> dict[str, type]:
    out: dict[str, type] = {}
    for name, fn in inspect.getmembers(hookspecs, inspect.isfunction):
        if hasattr(fn, f"{hookspecs.PROJECT}_spec"):
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
        expected = FAMILIES[hook_name]
        noun = expected.noun  # type: ignore[attr-defined]
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

    def everything(self) -> dict[str, Any]:
        """Every registered thing of every family, by name (for ``[plugins.NAME]``)."""
        out: dict[str, Any] = {}
        for hook_name in FAMILIES:
            out.update(self.items(hook_name))
        return out

    def names_by_plugin(self) -> dict[str, dict[str, list[str]]]:
        """plugin name -> hook name -> the names it registered (for `slm-rerank plugins`)."""
        out: dict[str, dict[str, list[str]]] = {}
        for hook_name in FAMILIES:
            for reg in self.collect(hook_name).values():
                out.setdefault(reg.plugin, {}).setdefault(hook_name, []).append(reg.name)
        return out
