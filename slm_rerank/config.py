"""Settings and where each value came from.

Layers, lowest first: built-in defaults < user ``config.toml`` (platformdirs config dir) <
nearest ``.slm-rerank.toml`` (walking up to the repository root) < environment < flags.
The keys themselves (types, bounds, repository rules, value checks) are ``config_keys``.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from slm_rerank.config_file import parse_file, read_toml, update_toml
from slm_rerank.config_keys import (
    KEYS,
    MAX_FILE_BYTES,
    REMOVED_ENV,
    REPO_LOWER,
    REPO_NO,
    TYPES,
    KeyType,
    Settings,
    check_typed,
    check_value,
    describe,
    parse_text,
    repo_rule,
    shown,
)
from slm_rerank.errors import ConfigError  # re-exported: callers import it from here

APP_NAME = "slm-rerank"
REPO_FILE = ".slm-rerank.toml"

#: Callers import the settings and their checks from here, wherever they are defined.
__all__ = [
    "APP_NAME", "KEYS", "MAX_FILE_BYTES", "REPO_FILE", "ConfigError", "KeyType", "RepoLayer",
    "Settings", "check_typed", "check_value", "describe", "load_settings", "parse_text",
    "read_repo_toml", "read_toml", "repo_config_path", "repo_root", "shown",
    "user_config_path", "write_setting",
]


@dataclass(frozen=True)
class RepoLayer:
    """What a repository's own file sets, after its trust rules; ``refused``: key -> why."""

    values: dict[str, Any]
    refused: dict[str, str]


def read_repo_toml(path: Path, below: Settings) -> RepoLayer:
    """Read a repository's ``.slm-rerank.toml`` under the rules of each key's ``repo`` field.

    ``below`` holds the values of the layers under the repository's (defaults, the user's
    file): a REPO_LOWER key may not rise above them. The file arrives with a clone: nothing
    in it may stop the user's query. A refused or lowered key, an unknown key and a value a
    key cannot take (a wrong type, nan, out of bounds) are each recorded in ``refused``
    (one line naming the file and the key) and left out; a file that cannot be read or
    parsed is left out whole. Nothing is raised.
    """
    from slm_rerank.report import display_path, visible

    values: dict[str, Any] = {}
    refused: dict[str, str] = {}
    # the path is the repository's too (its folder names): no raw control characters
    where = visible(display_path(str(path)))
    try:
        data = parse_file(path)
    except ConfigError as exc:
        return RepoLayer({}, {REPO_FILE: f"{visible(str(exc))}; the whole file is ignored"})
    for key, value in data.items():
        try:
            taken, why_not = _repo_value(key, value, below, where)
        except ConfigError as exc:
            applies = (f", {shown(getattr(below, key))} applies" if key in TYPES
                       and key != "plugins" else "")
            refused[key] = f"{visible(str(exc))}; ignored{applies}"
            continue
        if why_not is not None:
            refused[key] = why_not
        else:
            values[key] = taken
    return RepoLayer(values, refused)


def _repo_value(key: str, value: Any, below: Settings, where: str) -> tuple[Any, str | None]:
    """(the checked value, None), or (None, why a repository may not set it): ConfigError
    when the key is unknown or cannot take ``value``."""
    if key not in TYPES:
        check_value(key, value, where)  # raises: unknown key
    rule, why = repo_rule(key)
    name, it = f"key '{key}'", "it"
    if key == "plugins" and isinstance(value, dict):
        names = [f"[plugins.{shown(n)}]" for n in list(value)[:3]]
        more = f" and {len(value) - 3} more" if len(value) > 3 else ""
        name, it = " ".join(names) + more, "plugin options"
    if rule == REPO_NO:
        return None, (f"{where}: {name} ignored: a repository's {REPO_FILE} may not set "
                      f"{it} ({why}); set {it} in the user config instead")
    if rule == REPO_LOWER:
        value = check_typed(TYPES[key], value, f"{where}: key '{key}'")
        limit = getattr(below, key)
        if value is not None and limit is not None and value > limit:
            may = ("turn it off, not on" if isinstance(limit, bool) else
                   f"lower it, not raise it above {shown(limit)}")
            return None, (f"{where}: key '{key}' = {shown(value)} ignored: a repository "
                          f"may {may} ({why}); {shown(limit)} applies")
    return check_value(key, value, where), None


#: refusals already printed by this process: a long-lived caller (MCP, the hook reading its
#: deadline and then its settings) loads the same file again and again
_WARNED: set[str] = set()


def warn_refused(refused: Mapping[str, str]) -> None:
    """Print each refusal of a repository's value once per process, one line each."""
    for text in refused.values():
        warn_once(text)


def warn_once(text: str) -> None:
    """Print ``text`` as one warning line on stderr, once per process."""
    if text not in _WARNED:
        _WARNED.add(text)
        print(f"slm-rerank: warning: {text}", file=sys.stderr)


def user_config_path() -> Path:
    from platformdirs import user_config_path as _ucp

    return _ucp(APP_NAME) / "config.toml"


def repo_root(start: Path) -> Path | None:
    """The nearest folder at or above ``start`` that holds ``.git``."""
    here = start.resolve()
    for folder in (here, *here.parents):
        if (folder / ".git").exists():
            return folder
    return None


def repo_config_path(start: Path) -> Path | None:
    """The nearest ``.slm-rerank.toml`` from ``start`` up to the repository root."""
    here = start.resolve()
    if here.is_file():
        here = here.parent
    stop = repo_root(here)
    for folder in (here, *here.parents):
        candidate = folder / REPO_FILE
        if candidate.is_file():
            return candidate
        if folder == stop:
            break
    return None


def load_settings(
    start: Path | None = None,
    environ: Mapping[str, str] | None = None,
) -> Settings:
    """Merge every layer into one Settings, recording each value's origin.

    The layers a user configures: defaults, the user config, the repository's file, the
    environment. What a caller gives for one run (a flag, an argument) goes on top through
    ``Host.with_overrides``.
    """
    environ = os.environ if environ is None else environ
    settings = Settings()
    origins = {key: "default" for key in KEYS}

    def apply(origin: str, values: dict[str, Any]) -> None:
        for key, value in values.items():
            if key == "plugins":
                _merge_plugin_tables(settings.plugins, value, origin, origins)
                continue
            setattr(settings, key, value)
            origins[key] = origin

    user = user_config_path()
    if user.is_file():
        apply(f"user: {user}", read_toml(user))
    repo = repo_config_path(start or Path.cwd())
    if repo is not None:
        layer = read_repo_toml(repo, settings)
        settings.repo_replaced = {key: (getattr(settings, key), origins[key])
                                  for key in layer.values if key != "plugins"}
        apply(f"repo: {repo}", layer.values)
        settings.repo_refusals = layer.refused
        warn_refused(layer.refused)
    for f in fields(Settings):
        for name in f.metadata.get("env", ()):
            value = environ.get(name)
            if value and not value.strip():
                # `SLM_ENDPOINT=" "` is a mistake (a quoted template, a stray space), not a
                # wish: read as unset, it silently scanned ports instead of the server named
                raise ConfigError(f"environment {name} is blank ({shown(value)}); give it a "
                                  "value, or unset it (an empty value counts as unset)")
            if value:
                apply(f"env: {name}", {f.name: parse_text(f.name, environ[name],
                                                           f"environment {name}")})
                break
    for name, instead in REMOVED_ENV.items():
        if environ.get(name):
            warn_once(f"environment {name} is no longer read; set {instead} instead")
    settings.origins = origins
    return settings


def _merge_plugin_tables(into: dict[str, dict[str, Any]], tables: dict[str, Any], origin: str,
                         origins: dict[str, str]) -> None:
    """Layer ``[plugins.NAME]`` tables key by key, each key with its own origin."""
    for name, table in tables.items():
        for key, value in table.items():
            into.setdefault(name, {})[key] = value
            origins[f"plugins.{name}.{key}"] = origin


def _check_repo_target(path: Path) -> None:
    """Refuse to write a repository's file through a link leading out of the repository, or
    onto something that is no regular file: the link is the repository's (untrusted), and
    the write replaces whatever it points to (a FIFO, a file of the user's)."""
    target = Path(os.path.realpath(path))
    top = repo_root(path.parent) or path.parent.resolve()
    if not target.is_relative_to(top) or target.is_relative_to(top / ".git"):
        raise ConfigError(f"{path} is a link to {target}, outside the repository {top}'s "
                          "work tree; config set --repo writes only inside it: remove the "
                          "link, or edit the file it points to yourself")
    if os.path.lexists(target) and not target.is_file():
        raise ConfigError(f"{path} is not a regular file; config set --repo writes only a "
                          "file: remove it first")


def write_setting(path: Path, key: str, text: str, repo: bool = False) -> Any:
    """Set ``key`` in the TOML file at ``path``, keeping the other keys and their order.

    ``repo``: ``path`` is a repository's file, which may not hold a REPO_NO key (every
    search would ignore it).
    """
    if repo and key in TYPES and repo_rule(key)[0] == REPO_NO:
        raise ConfigError(f"config set {key} --repo: a repository's {REPO_FILE} may not set "
                          f"'{key}' ({repo_rule(key)[1]}), and every search would ignore it; "
                          "set it without --repo, in the user config")
    if repo:
        _check_repo_target(path)
    value = parse_text(key, text, f"config set {key}")
    # under the file's lock: a `calibrate --write` at the same time keeps its change too
    update_toml(path, lambda data: data.__setitem__(key, value))
    return value
