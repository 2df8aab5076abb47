"""Settings and where each value came from.

Layers, lowest first: built-in defaults < user ``config.toml`` (platformdirs config dir) <
nearest ``.slm-rerank.toml`` (walking up to the repository root) < environment < flags.
"""

from __future__ import annotations

import math
import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from types import UnionType
from typing import Any, Union, get_args, get_origin, get_type_hints

from slm_rerank.errors import ConfigError  # re-exported: callers import it from here
from slm_rerank.registrations import SERVER_KINDS

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

APP_NAME = "slm-rerank"
REPO_FILE = ".slm-rerank.toml"
#: A config file larger than this is refused before it is parsed.
MAX_CONFIG_BYTES = 1_000_000


#: dirty_bonus above this is refused (scores would overflow towards inf long before).
MAX_DIRTY_BONUS = 100.0

#: max_file_bytes above this is refused in every layer: each candidate file is read whole
#: into memory (and decoded, and lowered), so the limit sizes the process.
MAX_FILE_BYTES = 50_000_000

#: Longest value echoed back in an error message; a 30 MB value is cut, not printed.
SHOWN_CHARS = 80

# What a repository's own .slm-rerank.toml may do with a key (DESIGN.md, "Trust and
# deadlines"): a cloned repository is untrusted input. It may shape ranking and scope
# (REPO_YES); it may only lower what sizes work, time or a server's load, never raise it
# above the value of the layers below it (REPO_LOWER; false < true for switches); and it
# may not touch what starts processes, picks or drives a server, or where the tool writes
# (REPO_NO). A refused or lowered value is a warning, never an error that stops the query.
REPO_YES = "yes"
REPO_LOWER = "lower"
REPO_NO = "no"


def _setting(default: Any, help: str, env: tuple[str, ...] = (), *, minimum: float | None = None,
             maximum: float | None = None, repo: str = REPO_YES, why: str = "") -> Any:
    """A Settings field; ``repo`` and ``why`` say what a repository's own file may do with it.

    ``maximum`` bounds the value in every layer (a user too); ``why`` is shown when a
    repository's value is refused or lowered, and in the user guide's table.
    """
    if repo not in (REPO_YES, REPO_LOWER, REPO_NO) or not why:
        raise ValueError(f"a setting needs a repo rule of {REPO_YES}, {REPO_LOWER} or "
                         f"{REPO_NO} and a why, got {repo!r}, {why!r}")
    meta = {"help": help, "env": env, "min": minimum, "max": maximum, "repo": repo,
            "why": why}
    if isinstance(default, (list, dict)):
        return field(default_factory=lambda: type(default)(default), metadata=meta)
    return field(default=default, metadata=meta)


@dataclass
class Settings:
    """Every setting slm-rerank reads, with its built-in default."""

    format: str = _setting("text", "output format: text, json, jsonl, markdown, or a plugin's",
                           why="how results look; only installed formatters")
    top_k: int = _setting(10, "how many results to print", minimum=1, repo=REPO_LOWER,
                          why="sizes memory: at least this many candidate files are read "
                          "and held whole")
    chunks: bool = _setting(False, "list chunks instead of one result (its best chunk) per file",
                            why="how results are listed")
    sources: list[str] = _setting(
        ["ripgrep", "git"], "candidate sources to try, first available wins",
        why="scope: which installed source lists the candidate files")
    max_file_bytes: int = _setting(
        2_000_000, "files larger than this are skipped", minimum=1, maximum=MAX_FILE_BYTES,
        repo=REPO_LOWER, why="sizes memory: each candidate file is read whole")
    disabled_plugins: list[str] = _setting(
        [], "plugins not to load (entry-point or dist name)",
        why="can only keep installed code from loading, never add any")
    cache_dir: str = _setting(
        "", "cache folder (usage log, chunk cache), an absolute path; empty: the user cache "
        "dir. Not settable from a repository's .slm-rerank.toml",
        env=("SLM_RERANK_CACHE_DIR",), repo=REPO_NO, why="where the tool writes")
    usage_log: bool = _setting(True, "append one line per query to usage.jsonl",
                               repo=REPO_LOWER,
                               why="writes the user's queries to disk")
    slice_roots: list[str] = _setting(
        ["apps", "components", "crates", "features", "libs", "modules", "packages", "plugins",
         "services", "src"],
        "folders whose subfolders are architectural slices, for --by-slice (a name matches "
        "at any depth, a path with '/' from the searched root)",
        why="the repository's own layout")
    dirty_bonus: float = _setting(
        0.5, "--dirty: how much a file with uncommitted changes and some evidence gains "
        "(0.5: its lexical score times 1.5)", minimum=0.0, maximum=MAX_DIRTY_BONUS,
        why="ranking")
    # --- the model stage (never read by --fast) ---
    model: str | None = _setting(
        None, "model profile to use (--model); unset: the one that claims the server's "
        "model id, else openai", repo=REPO_NO,
        why="picks a server of the user's [endpoints] table and turns the hook's model "
        "stage on")
    base_url: str | None = _setting(
        None, "model server URL (-e/--base-url); unset: scan host on ports 8033-8040. Not "
        "settable from a repository's file", env=("SLM_ENDPOINT", "RERANKER_BASE_URL",
                                                  "LFM_ENDPOINT"),
        repo=REPO_NO, why="which server receives the code")
    host: str | None = _setting(None, "host to scan for model servers (--host); unset: "
                                "127.0.0.1. Not settable from a repository's file",
                                env=("SLM_HOST", "RERANKER_HOST"), repo=REPO_NO,
                                why="which server receives the code")
    endpoints: dict[str, str] | list[str] = _setting(
        {}, "a list of server URLs of one model, judged together, least-loaded first (-e "
        "repeated); or an [endpoints] table: profile name -> server URL, used with --model "
        "NAME. Not settable from a repository's file", repo=REPO_NO,
        why="which server receives the code")
    api_key: str | None = _setting(
        None, "bearer token for the model server (hosted APIs). Not settable from a "
        "repository's file", env=("SLM_API_KEY",), repo=REPO_NO,
        why="a credential of the user's")
    api: str | None = _setting(None, "how to ask the server (--api): llama.cpp, "
                               "openai-completions, openai-chat or ollama; unset: as probed",
                               repo=REPO_NO, why="describes the user's server")
    scorer: str = _setting("yesno", "how chunks are judged (--scorer)", repo=REPO_NO,
                           why="how much each query asks of the server (listwise windows, "
                           "a rerank API's pool)")
    rerank_top: int = _setting(16, "chunks of the lexical head the model judges (--rerank-top)",
                               minimum=1, repo=REPO_LOWER, why="spends the model server")
    full: bool = _setting(False, "judge every kept chunk, not only the head (--full)",
                          repo=REPO_LOWER, why="spends the model server")
    threshold: float = _setting(0.65, "fused scores below this are dropped (--threshold)",
                                minimum=0.0, maximum=1.0, why="ranking: which results are kept")
    timeout: float = _setting(60.0, "seconds the model stage may take before it keeps what it "
                              "has and degrades (--timeout)", minimum=0.1, repo=REPO_LOWER,
                              why="a deadline")
    concurrency: int | None = _setting(None, "requests in flight per server; unset: its slots",
                                       minimum=1, repo=REPO_NO,
                                       why="how hard the user's server is driven")
    score_cache: bool = _setting(True, "reuse model scores from the cache (--no-cache: off)",
                                 repo=REPO_NO,
                                 why="turned off, every query spends the server again")
    prompt_chars: int = _setting(1500, "longest chunk text sent to the model; longer chunks "
                                 "are cut around their best-matching lines", minimum=200,
                                 repo=REPO_LOWER, why="spends the model server")
    auto_serve: bool = _setting(
        False, "start the managed llama-server with the bundled model (slm-rerank serve) "
        "when a model query finds no server, as --local does; off by default: the bundled "
        "model is slow here and does not beat the lexical order (slm-rerank serve --help)",
        repo=REPO_NO, why="starts a process")
    serve_idle: float = _setting(
        900.0, "seconds without a query after which a server started by --local or "
        "auto_serve stops itself (0: never)", minimum=0.0, repo=REPO_NO,
        why="how long a process lives")
    hook_deadline: float = _setting(5.0, "seconds the Claude Code prompt hook may take; then "
                                    "it prints nothing (--deadline, "
                                    "SLM_RERANK_HOOK_DEADLINE)", minimum=0.001,
                                    repo=REPO_LOWER, why="a deadline")
    plugins: dict[str, dict[str, Any]] = _setting(
        {}, "per-plugin settings: [plugins.NAME] tables, NAME a registered profile, scorer, "
        "source, expander or format", repo=REPO_NO,
        why="plugin options size requests, pools and windows the host cannot weigh")
    #: key -> where its value came from ("default", "user: PATH", "env: NAME", "flag: --x");
    #: a plugin setting's key is "plugins.NAME.KEY"
    origins: dict[str, str] = field(default_factory=dict, repr=False, compare=False)
    #: key -> why a repository's value for it was refused or lowered (one line each)
    repo_refusals: dict[str, str] = field(default_factory=dict, repr=False, compare=False)


@dataclass(frozen=True)
class KeyType:
    """What values one key takes: a plain type, optionally None, optionally a list or table.

    ``also`` holds further types a key takes (``endpoints``: a table or a list of URLs).
    """

    base: type
    optional: bool = False
    also: tuple[type, ...] = ()

    @classmethod
    def of(cls, hint: Any) -> KeyType:
        args = [a for a in get_args(hint) if a is not type(None)]
        if get_origin(hint) in (Union, UnionType):
            bases = [cls.of(a).base for a in args]
            return cls(bases[0], optional=type(None) in get_args(hint),
                       also=tuple(bases[1:]))
        return cls(get_origin(hint) or hint)

    @property
    def bases(self) -> tuple[type, ...]:
        return (self.base, *self.also)

    @property
    def name(self) -> str:
        names = {str: "a string", int: "an integer", float: "a number", bool: "true or false",
                 list: "a list of strings", dict: "a table"}
        text = " or ".join(names[base] for base in self.bases)
        return f"{text} (or unset)" if self.optional else text


#: key -> the type its values must have, from the Settings annotations
_BOOKKEEPING = ("origins", "repo_refusals")
TYPES: dict[str, KeyType] = {
    name: KeyType.of(hint) for name, hint in get_type_hints(Settings).items()
    if name not in _BOOKKEEPING
}
KEYS: tuple[str, ...] = tuple(TYPES)
_META = {f.name: f.metadata for f in fields(Settings) if f.name not in _BOOKKEEPING}


def describe(key: str) -> str:
    return str(_META[key]["help"])


def shown(value: Any) -> str:
    """``repr(value)``, cut to SHOWN_CHARS: error messages must stay one readable line."""
    text = repr(value)
    return text if len(text) <= SHOWN_CHARS else f"{text[:SHOWN_CHARS]}... ({len(text)} chars)"


#: why a value above a key's maximum is refused, where the number alone does not say
_TOO_BIG = {
    "dirty_bonus": ": the bonus multiplies lexical scores, and a huge one ranks any changed "
                   "file first (0.5 is the measured default)",
    "max_file_bytes": ": each candidate file is read whole into memory, and a larger limit "
                      "can exhaust it (the default is 2000000)",
}


def _number(value: float) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def check_typed(kind: KeyType, value: Any, what: str) -> Any:
    """Return ``value`` (an int widened to float where a number is wanted) or raise."""
    if value is None and kind.optional:
        return None
    base = kind.base
    if base is float and isinstance(value, int) and not isinstance(value, bool):
        value = float(value)
    if not any(_is(one, value) for one in kind.bases):
        raise ConfigError(f"{what} must be {kind.name}, got {type(value).__name__} "
                          f"{shown(value)}")
    if base is float and not math.isfinite(value):
        raise ConfigError(f"{what} must be a finite number, got {shown(value)}")
    return value


def _is(base: type, value: Any) -> bool:
    if base is list:
        return isinstance(value, list) and all(isinstance(v, str) for v in value)
    if base is dict:
        return isinstance(value, dict)
    return isinstance(value, base) and not (base in (int, float) and isinstance(value, bool))


def check_value(key: str, value: Any, where: str) -> Any:
    """Return ``value`` if ``key`` takes it, else raise ConfigError naming ``where`` and key."""
    if key not in TYPES:
        raise ConfigError(f"{where}: unknown key {shown(key)} (known keys: {', '.join(KEYS)})")
    value = check_typed(TYPES[key], value, f"{where}: key '{key}'")
    minimum, maximum = _META[key]["min"], _META[key]["max"]
    if minimum is not None and value is not None and value < minimum:
        raise ConfigError(f"{where}: key '{key}' must be at least {minimum}, got {value}")
    if maximum is not None and value is not None and value > maximum:
        raise ConfigError(f"{where}: key '{key}' must be at most {_number(maximum)}, got "
                          f"{_number(value)}{_TOO_BIG.get(key, '')}")
    if key == "cache_dir" and value and not Path(value).expanduser().is_absolute():
        raise ConfigError(f"{where}: key 'cache_dir' must be an absolute path, got "
                          f"{shown(value)}: a relative folder would land wherever the "
                          "command runs, often inside the searched repository")
    if key == "api" and value is not None and value not in SERVER_KINDS:
        raise ConfigError(f"{where}: key 'api' must be one of {', '.join(SERVER_KINDS)}, "
                          f"got {shown(value)}")
    if key == "slice_roots":
        for root in value:
            parts = [p for p in root.replace("\\", "/").split("/") if p not in ("", ".")]
            if not parts or ".." in parts or root.startswith("/"):
                raise ConfigError(f"{where}: key 'slice_roots': {shown(root)} names no folder "
                                  "under the searched root; give a folder name such as "
                                  "'packages' or a relative path such as 'internal/handlers'")
    if key == "endpoints" and isinstance(value, dict):
        for name, url in value.items():
            if not isinstance(url, str):
                raise ConfigError(f"{where}: [endpoints] {name} must be a URL string, "
                                  f"got {shown(url)}")
    # The URLs themselves are checked when the model stage reads them (discovery's
    # check_base_url): a --fast search must not import the HTTP stack to load its settings.
    if key == "plugins":
        for name, table in value.items():
            if not isinstance(table, dict):
                raise ConfigError(f"{where}: [plugins.{name}] must be a table of settings, "
                                  f"got {shown(table)}")
    return value


def parse_text(key: str, text: str, where: str) -> Any:
    """Turn a string from the environment or the command line into ``key``'s type."""
    if key not in TYPES:
        return check_value(key, text, where)
    kind = TYPES[key]
    stripped = text.strip()
    if kind.optional and stripped == "":
        return None
    try:
        if kind.base is bool:
            low = stripped.lower()
            if low in ("true", "1", "yes", "on"):
                return True
            if low in ("false", "0", "no", "off"):
                return False
            raise ConfigError(f"{where}: key '{key}' must be true or false, got {shown(text)}")
        if kind.base in (int, float):
            try:
                number = kind.base(stripped)
            except ValueError:
                raise ConfigError(f"{where}: key '{key}' must be {kind.name}, "
                                  f"got {shown(text)}") from None
            return check_value(key, number, where)
        if kind.bases == (list,) and not stripped.startswith("["):
            return check_value(key, [p.strip() for p in stripped.split(",") if p.strip()],
                               where)
        if {list, dict} & set(kind.bases):
            return check_value(key, _toml_value(stripped, f"{where}: key '{key}'"), where)
    except RecursionError:
        raise ConfigError(f"{where}: key '{key}': the value is nested too deeply") from None
    return check_value(key, text, where)


def _toml_value(text: str, what: str) -> Any:
    try:
        return tomllib.loads(f"v = {text}")["v"]
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{what}: not a TOML value: {exc}") from None


def _parse_file(path: Path) -> dict[str, Any]:
    """One config file's TOML, unchecked, or a ConfigError naming the file."""
    try:
        with open(path, "rb") as handle:
            raw = handle.read(MAX_CONFIG_BYTES + 1)
        if len(raw) > MAX_CONFIG_BYTES:
            raise ConfigError(f"{path}: larger than {MAX_CONFIG_BYTES // 1_000_000} MB; "
                              "is this really a config file?")
        return tomllib.loads(raw.decode("utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: invalid TOML: {exc}") from None
    except RecursionError:
        raise ConfigError(f"{path}: invalid TOML: arrays or tables nested too deeply") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: cannot read: not UTF-8 ({exc.reason} at byte "
                          f"{exc.start})") from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror or exc}") from None


def read_toml(path: Path) -> dict[str, Any]:
    """Read one config file of the user's; every key is checked."""
    data = _parse_file(path)
    for key, value in data.items():
        check_value(key, value, str(path))
    return data


@dataclass(frozen=True)
class RepoLayer:
    """What a repository's own file sets, after its trust rules; ``refused``: key -> why."""

    values: dict[str, Any]
    refused: dict[str, str]


def read_repo_toml(path: Path, below: Settings) -> RepoLayer:
    """Read a repository's ``.slm-rerank.toml`` under the rules of each key's ``repo`` field.

    ``below`` holds the values of the layers under the repository's (defaults, the user's
    file): a REPO_LOWER key may not rise above them. A refused or lowered key is recorded in
    ``refused``, never raised: a stranger's file must not stop the user's query. Unknown
    keys and values of the wrong type are still errors naming the file and the key.
    """
    from slm_rerank.report import display_path, visible

    values: dict[str, Any] = {}
    refused: dict[str, str] = {}
    # the path is the repository's too (its folder names): no raw control characters
    where = visible(display_path(str(path)))
    for key, value in _parse_file(path).items():
        if key not in TYPES:
            check_value(key, value, str(path))  # raises: unknown key
        rule, why = _META[key]["repo"], _META[key]["why"]
        name, it = f"key '{key}'", "it"
        if key == "plugins" and isinstance(value, dict):
            names = [f"[plugins.{shown(n)}]" for n in list(value)[:3]]
            more = f" and {len(value) - 3} more" if len(value) > 3 else ""
            name, it = " ".join(names) + more, "plugin options"
        if rule == REPO_NO:
            refused[key] = (f"{where}: {name} ignored: a repository's {REPO_FILE} may not set "
                            f"{it} ({why}); set {it} in the user config instead")
            continue
        if rule == REPO_LOWER:
            value = check_typed(TYPES[key], value, f"{path}: key '{key}'")
            limit = getattr(below, key)
            if value is not None and limit is not None and value > limit:
                may = ("turn it off, not on" if isinstance(limit, bool) else
                       f"lower it, not raise it above {shown(limit)}")
                refused[key] = (f"{where}: key '{key}' = {shown(value)} ignored: a repository "
                                f"may {may} ({why}); {shown(limit)} applies")
                continue
        values[key] = check_value(key, value, str(path))
    return RepoLayer(values, refused)


#: refusals already printed by this process: a long-lived caller (MCP, the hook reading its
#: deadline and then its settings) loads the same file again and again
_WARNED: set[str] = set()


def _warn(refused: Mapping[str, str]) -> None:
    for text in refused.values():
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
    flags: Mapping[str, Any] | None = None,
) -> Settings:
    """Merge every layer into one Settings, recording each value's origin."""
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
        apply(f"repo: {repo}", layer.values)
        settings.repo_refusals = layer.refused
        _warn(layer.refused)
    for f in fields(Settings):
        for name in f.metadata.get("env", ()):
            if environ.get(name):
                apply(f"env: {name}", {f.name: parse_text(f.name, environ[name],
                                                           f"environment {name}")})
                break
    for key, value in (flags or {}).items():
        if value is None:
            continue
        setattr(settings, key, check_value(key, value, f"option for {key}"))
        origins[key] = f"flag: --{key.replace('_', '-')}"
    settings.origins = origins
    return settings


def _merge_plugin_tables(into: dict[str, dict[str, Any]], tables: dict[str, Any], origin: str,
                         origins: dict[str, str]) -> None:
    """Layer ``[plugins.NAME]`` tables key by key, each key with its own origin."""
    for name, table in tables.items():
        for key, value in table.items():
            into.setdefault(name, {})[key] = value
            origins[f"plugins.{name}.{key}"] = origin


def write_setting(path: Path, key: str, text: str, repo: bool = False) -> Any:
    """Set ``key`` in the TOML file at ``path``, keeping the other keys and their order.

    ``repo``: ``path`` is a repository's file, which may not hold a REPO_NO key (every
    search would ignore it).
    """
    import tomli_w

    if repo and key in TYPES and _META[key]["repo"] == REPO_NO:
        raise ConfigError(f"config set {key} --repo: a repository's {REPO_FILE} may not set "
                          f"'{key}' ({_META[key]['why']}), and every search would ignore it; "
                          "set it without --repo, in the user config")
    value = parse_text(key, text, f"config set {key}")
    data = read_toml(path) if path.is_file() else {}
    data[key] = value
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(tomli_w.dumps(data), encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"{path}: cannot write: {exc}") from None
    return value
