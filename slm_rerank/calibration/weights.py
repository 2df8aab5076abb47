"""Which judge weight a search fuses by, and where that weight came from.

The weight of a model's verdict (``fusion``: logit = w * logit(p) + z) is the profile's
unless the user measured one for that model id with ``slm-rerank calibrate --write``,
which stores it in the user config's ``[judge_weights]`` table (model id -> weight). A
repository's own file may not set it: it is a measurement of the user's model on the
user's behalf.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from slm_rerank.config import REPO_FILE, ConfigError, Settings

if TYPE_CHECKING:
    from slm_rerank.model.stage import Judgement
    from slm_rerank.registrations import ModelProfile

#: the settings key of the measured weights
KEY = "judge_weights"


@dataclass(frozen=True)
class JudgeWeight:
    """The weight a search fused by, and where it came from (for ``-v`` and the JSON)."""

    weight: float
    source: str


def judge_weight(profile: ModelProfile | None, model_id: str | None,
                 settings: Settings, query: str | None = None) -> tuple[float, str]:
    """(weight, source): the user's measured weight for ``model_id`` if there is one (for
    every query), else the profile's weight for ``query`` (``fusion.judge_weight``: its
    ``short_query_weight`` for a one-line query, when it has one), else 1."""
    from slm_rerank.model.fusion import judge_weight as profile_weight

    measured = settings.judge_weights.get(model_id) if model_id else None
    if measured is not None:
        origin = settings.origins.get(KEY, "user config")
        return float(measured), f"{KEY}[{model_id!r}] ({origin})"
    if profile is not None:
        weight = profile_weight(profile, query)
        if weight != profile.judge_weight:
            return weight, f"profile {profile.name}, short_query_weight (a one-line query)"
        return weight, f"profile {profile.name}"
    return 1.0, "default"


def use_judge_weight(judgement: Judgement, settings: Settings, query: str | None = None
                     ) -> JudgeWeight:
    """Make ``judgement``'s profile carry the weight ``judge_weight`` picks for ``query``
    (fusion reads ``profile.judge_weight``, and no other weight after this), note which in
    ``judgement.notes``, and return it."""
    choice = judgement.profile
    model_id = judgement.endpoint.model_id if judgement.endpoint else None
    weight, source = judge_weight(choice.profile if choice else None, model_id, settings,
                                  query)
    if choice is not None and (choice.profile.judge_weight != weight
                               or choice.profile.short_query_weight is not None):
        judgement.profile = dataclasses.replace(
            choice, profile=dataclasses.replace(choice.profile, judge_weight=weight,
                                                short_query_weight=None))
    judgement.notes.append(f"judge weight {weight:g} from {source}")
    return JudgeWeight(weight, source)


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
