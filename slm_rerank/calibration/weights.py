"""The judge weights the user measured: checked when read, written by ``calibrate --write``.

The weight of a model's verdict (``fusion``: logit = w * logit(p) + z) is the profile's
unless the user measured one for that model id with ``slm-rerank calibrate --write``,
which stores it in the user config's ``[judge_weights]`` table (model id -> weight); which
one a run fuses by is chosen in one place, ``fusion.weight_in_use``. A repository's own
file may not set it: it is a measurement of the user's model on the user's behalf.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from slm_rerank.config import REPO_FILE, ConfigError

#: the settings key of the measured weights
KEY = "judge_weights"


def write_judge_weight(path: Path, model_id: str, weight: float) -> None:
    """Store ``weight`` for ``model_id`` in the user config at ``path``, keeping every other
    key and table of the file; under the file's lock (a `config set` at the same time keeps
    its change), written to a temporary file and renamed, so a crash leaves the old file
    whole."""
    from slm_rerank.config_file import update_toml

    if path.name == REPO_FILE:
        raise ConfigError(f"{path}: a measured judge weight belongs in the user config, "
                          f"never a repository's {REPO_FILE}")

    def change(data: dict[str, Any]) -> None:
        table = dict(data.get(KEY, {}))
        table[model_id] = round(float(weight), 4)
        data[KEY] = table

    update_toml(path, change)
