"""Whether the warm process may run, and how long it waits idle: the user's choice alone.

Read from the user's config file (``warm_process``, ``warm_process_idle``) and the
environment (``SLM_RERANK_WARM_PROCESS``, ``SLM_RERANK_WARM_IDLE``), never from a
repository's ``.slm-rerank.toml``: a cloned repository cannot start a process or keep one
alive (``config_keys``: both keys are ``repo = no``, and a repository's value is refused
with a warning naming the file and the key).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, fields

from slm_rerank.config import Settings, user_config_path
from slm_rerank.config_file import read_toml
from slm_rerank.config_keys import parse_text
from slm_rerank.errors import ConfigError

KEYS = ("warm_process", "warm_process_idle")


@dataclass(frozen=True)
class Switch:
    """The user's warm-process settings."""

    on: bool
    idle_seconds: float
    #: why it is off, for a note (None when on)
    why_off: str | None = None


def user_switch() -> Switch:
    """The user's config file, then the environment, over the defaults; off when either
    cannot be read (the command that reads them in full says what is wrong)."""
    defaults = Settings()
    values = {key: getattr(defaults, key) for key in KEYS}
    origins = {key: "default" for key in KEYS}
    path = user_config_path()
    try:
        data = read_toml(path) if path.is_file() else {}
        for key in KEYS:
            if key in data:
                values[key], origins[key] = data[key], f"user: {path}"
        for f in fields(Settings):
            if f.name in KEYS:
                for name in f.metadata.get("env", ()):
                    if os.environ.get(name):
                        values[f.name] = parse_text(f.name, os.environ[name],
                                                    f"environment {name}")
                        origins[f.name] = f"env: {name}"
    except (ConfigError, OSError) as exc:
        return Switch(False, 0.0, f"the settings cannot be read ({exc})")
    on = bool(values["warm_process"])
    return Switch(on, float(values["warm_process_idle"]),
                  None if on else f"turned off (warm_process from {origins['warm_process']})")
