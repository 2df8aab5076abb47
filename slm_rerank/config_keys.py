"""Every settings key: its type, default and bounds, what a repository's own file may do
with it, and the checks a value of it must pass (wherever the value comes from).

``config`` reads the layers (files, environment, flags) and re-exports these names.
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass, field, fields
from pathlib import Path
from types import UnionType
from typing import Any, Union, get_args, get_origin, get_type_hints

from slm_rerank.errors import ConfigError
from slm_rerank.registrations import SERVER_KINDS

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

#: dirty_bonus above this is refused (scores would overflow towards inf long before).
MAX_DIRTY_BONUS = 100.0

#: max_file_bytes above this is refused in every layer: each candidate file is read whole
#: into memory (and decoded, and lowered), so the limit sizes the process.
MAX_FILE_BYTES = 50_000_000

#: A measured judge weight (``judge_weights``, written by ``calibrate --write``) above this
#: is refused: the verdict alone would order everything.
MAX_JUDGE_WEIGHT = 10.0

#: What ``serve_model`` names: the bundled test model, or the judge fetched on request.
SERVE_MODELS = ("bundled", "judge")

#: With no server given, the model stage scans these ports of the ``host`` setting, whose
#: default is SCAN_HOST (``model.discovery`` scans; the settings' and flags' help say so).
SCAN_HOST = "127.0.0.1"
SCAN_PORTS = range(8033, 8041)
#: the scanned ports as help texts name them
SCAN_PORTS_SHOWN = f"{SCAN_PORTS.start}-{SCAN_PORTS.stop - 1}"

# The cascade's rule (``model.cascade`` applies it), here because the ``cascade``
# setting's help and the --cascade flag's are built from it.
#: passages the cascade always judges before it may stop
CASCADE_FIRST = 4
#: a verdict at least this sure ends the cascade: the judge found what it was asked for
CLEAR_YES = 0.8
#: a lexical lead (``lexical.rank.lead``) at least this large: the cascade judges nothing
DECISIVE_LEAD = 1.2
#: what the cascade does, in the words of the setting's and the flag's help
CASCADE_RULE = (f"judge nothing when the lexical order is decisive (its first file scores "
                f"{DECISIVE_LEAD:g} times the next), else the first {CASCADE_FIRST} passages, "
                f"then go on only while none has a clear yes (P(relevant) >= {CLEAR_YES:g})")

#: Environment names no release reads, each with the one to set instead: a user who still
#: exports one is told so (one warning line), rather than finding it silently ignored.
REMOVED_ENV: dict[str, str] = {"RERANKER_BASE_URL": "SLM_ENDPOINT",
                               "LFM_ENDPOINT": "SLM_ENDPOINT",
                               "RERANKER_HOST": "SLM_HOST"}

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
    learned_order: bool = _setting(
        True, "order candidate files by the learned ranker (the model calibrate --learn "
        "--write fitted to this repository, else the shipped one); off: the fixed lexical "
        "factors (--fixed-order)", why="ranking")
    # --- the model stage (never read by --fast) ---
    model: str | None = _setting(
        None, "model profile to use (--model); unset: the one that claims the server's "
        "model id, else openai", repo=REPO_NO,
        why="picks a server of the user's [endpoints] table and turns the hook's model "
        "stage on")
    base_url: str | None = _setting(
        None, f"model server URL (-e/--base-url); unset: scan host on ports {SCAN_PORTS_SHOWN}. "
        "Not settable from a repository's file", env=("SLM_ENDPOINT",),
        repo=REPO_NO, why="which server receives the code")
    host: str | None = _setting(None, "host to scan for model servers (--host); unset: "
                                f"{SCAN_HOST}. Not settable from a repository's file",
                                env=("SLM_HOST",), repo=REPO_NO,
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
    threshold: float | None = _setting(
        None, "a judged chunk whose P(relevant), the judge's own score, is below this is "
        "dropped (--threshold); unset: the judge reorders and drops nothing",
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
    budget_tokens: int | None = _setting(
        None, "prompt tokens one query's judge may make the server read (--budget 2000); "
        "the passages past it keep their lexical order; unset: no cap", minimum=1,
        repo=REPO_LOWER, why="spends the model server")
    budget_seconds: float | None = _setting(
        None, "seconds one query's judge may take before it stops sending passages and "
        "keeps what it has, as planned, not degraded (--budget 20s); unset: no cap",
        minimum=0.1, repo=REPO_LOWER, why="a deadline")
    cascade: bool = _setting(
        False, f"{CASCADE_RULE} (--cascade)", repo=REPO_NO,
        why="how much of the head a query judges: off, every query spends the server on "
        "the whole head")
    auto_serve: bool = _setting(
        False, "start the managed llama-server with the bundled model (slm-rerank serve) "
        "when a model query finds no server, as --local does; off by default: the bundled "
        "model is slow here and does not beat the lexical order (slm-rerank serve --help)",
        repo=REPO_NO, why="starts a process")
    serve_idle: float = _setting(
        900.0, "seconds without a query after which a server started by --local or "
        "auto_serve stops itself (0: never)", minimum=0.0, repo=REPO_NO,
        why="how long a process lives")
    serve_model: str = _setting(
        "bundled", "the model --local and auto_serve start: bundled (Gemma 3 270M, a plumbing "
        "test that does not rank well) or judge (Qwen2.5-Coder-1.5B-Instruct from the cache "
        "folder, fetched only by slm-rerank serve --judge --fetch)", repo=REPO_NO,
        why="chooses the model file a process loads")
    warm_process: bool = _setting(
        True, "let --fast searches and the prompt hook use a warm background process, "
        "started by the first one and stopped when idle (slm-rerank warm --help); off: "
        "each runs in its own process. Not settable from a repository's file",
        env=("SLM_RERANK_WARM_PROCESS",), repo=REPO_NO, why="starts a process")
    warm_process_idle: float = _setting(
        300.0, "seconds without a request after which the warm process stops itself. Not "
        "settable from a repository's file", env=("SLM_RERANK_WARM_IDLE",), minimum=1.0,
        maximum=86400.0, repo=REPO_NO, why="how long a process lives")
    hook_deadline: float = _setting(5.0, "seconds the Claude Code prompt hook may take; then "
                                    "it prints nothing (--deadline, "
                                    "SLM_RERANK_HOOK_DEADLINE)", minimum=0.001,
                                    repo=REPO_LOWER, why="a deadline")
    ask_judge_anyway: bool = _setting(
        False, "ask the judge even in a repository where slm-rerank calibrate --write "
        "measured that it adds nothing (--ask-judge); a repository's file may only turn it "
        "off", repo=REPO_LOWER, why="spends the model server")
    judge_weights: dict[str, float] = _setting(
        {}, "[judge_weights] table: model id -> the weight of its verdict in fusion, as "
        "slm-rerank calibrate --write measured it on the user's code; unset: the profile's",
        repo=REPO_NO, why="a measurement of the user's own model (calibrate --write); a "
        "repository could make any judge overrule its lexical order")
    plugins: dict[str, dict[str, Any]] = _setting(
        {}, "per-plugin settings: [plugins.NAME] tables, NAME a registered profile, scorer, "
        "source, expander or format", repo=REPO_NO,
        why="plugin options size requests, pools and windows the host cannot weigh")
    #: key -> where its value came from ("default", "user: PATH", "env: NAME", "flag: --x");
    #: a plugin setting's key is "plugins.NAME.KEY"
    origins: dict[str, str] = field(default_factory=dict, repr=False, compare=False)
    #: key -> why a repository's value for it was refused or lowered (one line each)
    repo_refusals: dict[str, str] = field(default_factory=dict, repr=False, compare=False)
    #: key -> (value, origin) that a repository's value replaced: what applies when the
    #: repository's value names no installed plugin (a format, a source)
    repo_replaced: dict[str, tuple[Any, str]] = field(default_factory=dict, repr=False,
                                                      compare=False)


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
_BOOKKEEPING = ("origins", "repo_refusals", "repo_replaced")
TYPES: dict[str, KeyType] = {
    name: KeyType.of(hint) for name, hint in get_type_hints(Settings).items()
    if name not in _BOOKKEEPING
}
KEYS: tuple[str, ...] = tuple(TYPES)
_META = {f.name: f.metadata for f in fields(Settings) if f.name not in _BOOKKEEPING}


def repo_rule(key: str) -> tuple[str, str]:
    """(REPO_YES, REPO_LOWER or REPO_NO; why) for ``key``: what a repository's file may do."""
    return str(_META[key]["repo"]), str(_META[key]["why"])


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
    if key == "serve_model" and value not in SERVE_MODELS:
        raise ConfigError(f"{where}: key 'serve_model' must be one of "
                          f"{', '.join(SERVE_MODELS)}, got {shown(value)}")
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
    if key == "judge_weights":
        _check_judge_weights(value, where)
    if key == "plugins":
        for name, table in value.items():
            if not isinstance(table, dict):
                raise ConfigError(f"{where}: [plugins.{name}] must be a table of settings, "
                                  f"got {shown(table)}")
    return value


def _check_judge_weights(value: dict[str, object], where: str) -> None:
    """Raise ConfigError unless every entry of a ``[judge_weights]`` table is a model id
    mapped to a finite number in [0, MAX_JUDGE_WEIGHT]."""
    for model_id, weight in value.items():
        if (isinstance(weight, bool) or not isinstance(weight, (int, float))
                or not math.isfinite(weight) or not 0.0 <= weight <= MAX_JUDGE_WEIGHT):
            # shown: a value or id of any length must not make the error pages long
            raise ConfigError(f"{where}: [judge_weights] {shown(model_id)} must be a number "
                              f"from 0 to {MAX_JUDGE_WEIGHT:g} (the weight of that model's "
                              f"verdict), got {shown(weight)}")


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

