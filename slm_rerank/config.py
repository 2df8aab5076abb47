"""Settings and where each value came from.

Layers, lowest first: built-in defaults < user ``config.toml`` (platformdirs config dir) <
nearest ``.slm-rerank.toml`` (walking up to the repository root) < environment < flags.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, get_type_hints

from slm_rerank.errors import ConfigError  # re-exported: callers import it from here

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

APP_NAME = "slm-rerank"
REPO_FILE = ".slm-rerank.toml"


def _setting(default: Any, help: str, env: tuple[str, ...] = ()) -> Any:
    if isinstance(default, list):
        return field(default_factory=lambda: list(default), metadata={"help": help, "env": env})
    return field(default=default, metadata={"help": help, "env": env})


@dataclass
class Settings:
    """Every setting slm-rerank reads, with its built-in default."""

    format: str = _setting("text", "output format: text, json, jsonl, markdown, or a plugin's")
    top_k: int = _setting(10, "how many results to print")
    chunks: bool = _setting(False, "list chunks instead of one result (its best chunk) per file")
    sources: list[str] = _setting(
        ["ripgrep", "git"], "candidate sources to try, first available wins"
    )
    max_file_bytes: int = _setting(2_000_000, "files larger than this are skipped")
    disabled_plugins: list[str] = _setting([], "plugins not to load (entry-point or dist name)")
    cache_dir: str = _setting(
        "", "cache folder (usage log, slice cache); empty: the user cache dir",
        env=("SLM_RERANK_CACHE_DIR",),
    )
    usage_log: bool = _setting(True, "append one line per query to usage.jsonl")
    #: key -> where its value came from ("default", "user: PATH", "env: NAME", "flag: --x")
    origins: dict[str, str] = field(default_factory=dict, repr=False, compare=False)


#: key -> the plain type its values must have (str, int, bool or list), from the annotations
_TYPES: dict[str, type] = {
    name: getattr(hint, "__origin__", hint)
    for name, hint in get_type_hints(Settings).items() if name != "origins"
}
KEYS: tuple[str, ...] = tuple(_TYPES)


def describe(key: str) -> str:
    for f in fields(Settings):
        if f.name == key:
            return str(f.metadata["help"])
    raise KeyError(key)


def _type_name(kind: type) -> str:
    return {str: "a string", int: "an integer", bool: "true or false",
            list: "a list of strings"}[kind]


def check_value(key: str, value: Any, where: str) -> Any:
    """Return ``value`` if it has the type ``key`` needs, else raise ConfigError."""
    if key not in _TYPES:
        known = ", ".join(KEYS)
        raise ConfigError(f"{where}: unknown key '{key}' (known keys: {known})")
    kind = _TYPES[key]
    ok = (
        isinstance(value, kind) and not (kind is int and isinstance(value, bool))
        if kind is not list
        else isinstance(value, list) and all(isinstance(v, str) for v in value)
    )
    if not ok:
        raise ConfigError(
            f"{where}: key '{key}' must be {_type_name(kind)}, got {type(value).__name__} "
            f"{value!r}"
        )
    if kind is int and value < 0:
        raise ConfigError(f"{where}: key '{key}' must not be negative, got {value}")
    return value


def parse_text(key: str, text: str, where: str) -> Any:
    """Turn a string from the environment or the command line into ``key``'s type."""
    if key not in _TYPES:
        return check_value(key, text, where)
    kind = _TYPES[key]
    if kind is bool:
        low = text.strip().lower()
        if low in ("true", "1", "yes", "on"):
            return True
        if low in ("false", "0", "no", "off"):
            return False
        raise ConfigError(f"{where}: key '{key}' must be true or false, got {text!r}")
    if kind is int:
        try:
            return check_value(key, int(text), where)
        except ValueError:
            raise ConfigError(f"{where}: key '{key}' must be an integer, got {text!r}") from None
    if kind is list:
        stripped = text.strip()
        if stripped.startswith("["):
            try:
                value = tomllib.loads(f"v = {stripped}")["v"]
            except tomllib.TOMLDecodeError as exc:
                raise ConfigError(f"{where}: key '{key}': not a TOML list: {exc}") from None
            return check_value(key, value, where)
        return [part.strip() for part in stripped.split(",") if part.strip()]
    return text


def read_toml(path: Path) -> dict[str, Any]:
    """Read one config file; every key is checked."""
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: invalid TOML: {exc}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read: {exc}") from None
    for key, value in data.items():
        check_value(key, value, str(path))
    return data


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
    flags: Mapping[str, Any] | None = None,
) -> Settings:
    """Merge every layer into one Settings, recording each value's origin."""
    environ = os.environ if environ is None else environ
    settings = Settings()
    origins = {key: "default" for key in KEYS}
    layers: list[tuple[str, dict[str, Any]]] = []
    user = user_config_path()
    if user.is_file():
        layers.append((f"user: {user}", read_toml(user)))
    repo = repo_config_path(start or Path.cwd())
    if repo is not None:
        layers.append((f"repo: {repo}", read_toml(repo)))
    env_values: dict[str, Any] = {}
    for f in fields(Settings):
        for name in f.metadata.get("env", ()):
            if environ.get(name):
                env_values[f.name] = parse_text(f.name, environ[name], f"environment {name}")
                origins_key = f"env: {name}"
                layers.append((origins_key, {f.name: env_values[f.name]}))
                break
    for origin, values in layers:
        for key, value in values.items():
            setattr(settings, key, value)
            origins[key] = origin
    for key, value in (flags or {}).items():
        if value is None:
            continue
        setattr(settings, key, check_value(key, value, f"option for {key}"))
        origins[key] = f"flag: --{key.replace('_', '-')}"
    settings.origins = origins
    return settings


def write_setting(path: Path, key: str, text: str) -> Any:
    """Set ``key`` in the TOML file at ``path``, keeping the other keys and their order."""
    import tomli_w

    value = parse_text(key, text, f"config set {key}")
    data = read_toml(path) if path.is_file() else {}
    data[key] = value
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(tomli_w.dumps(data), encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"{path}: cannot write: {exc}") from None
    return value


def cache_path(settings: Settings) -> Path:
    """The cache folder: ``cache_dir`` if set, else the platform's user cache dir."""
    if settings.cache_dir:
        return Path(settings.cache_dir).expanduser()
    from platformdirs import user_cache_path

    return user_cache_path(APP_NAME)


def ensure_writable(folder: Path) -> Path:
    """Create ``folder`` if needed and prove it is writable, or raise ConfigError."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        probe = folder / f".write-test-{os.getpid()}"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as exc:
        raise ConfigError(
            f"cache folder {folder} is not writable ({exc.strerror or exc}); set cache_dir "
            "or SLM_RERANK_CACHE_DIR to a writable folder"
        ) from None
    return folder
