"""Which model profile talks to a server: ``--model``, else the model id's claims, else generic."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from slm_rerank.errors import ConfigError
from slm_rerank.registrations import ModelProfile

#: The profile a bare install brings (the slm-rerank-openai plugin), used when none claims.
GENERIC = "openai"


@dataclass(frozen=True)
class ProfileChoice:
    profile: ModelProfile
    #: why this one, in words for ``-v`` and the JSON report
    reason: str


def choose_profile(profiles: Mapping[str, ModelProfile], *, model_id: str | None = None,
                   requested: str | None = None, fallback: str | None = GENERIC
                   ) -> ProfileChoice | None:
    """The profile for a server: the one asked for, else the longest claim, else ``fallback``.

    Two profiles whose claims match the model id equally long are an error naming both: a
    guess between them could change every score, so the user settles it with ``--model``.
    """
    if requested:
        if requested not in profiles:
            known = ", ".join(sorted(profiles)) or "none installed"
            raise ConfigError(f"unknown model profile {requested!r} (installed: {known}); "
                              "install its plugin, e.g. pip install slm-rerank-qwen")
        return ProfileChoice(profiles[requested], "asked for with --model / model")
    if model_id:
        scored = sorted(((p.claim_length(model_id), name) for name, p in profiles.items()),
                        reverse=True)
        scored = [(length, name) for length, name in scored if length > 0]
        if scored:
            best, name = scored[0]
            rivals = sorted(n for length, n in scored if length == best)
            if len(rivals) > 1:
                raise ConfigError(f"model id {model_id!r} is claimed equally by the profiles "
                                  f"{' and '.join(rivals)}; choose one with --model NAME")
            return ProfileChoice(profiles[name], f"claims the server's model id {model_id!r}")
    if fallback and fallback in profiles:
        why = f"no profile claims {model_id!r}" if model_id else "the server names no model"
        return ProfileChoice(profiles[fallback], f"generic: {why}")
    return None


def weight_text(profile: ModelProfile) -> str:
    """The profile's judge weight and whether it was measured, for a person to read.

    ``"judge weight 1.0, not measured"`` or ``"judge weight 0.4, measured: docs/..."``; a
    weight nobody measured must not read like one that was.
    """
    where = profile.weight_measured.strip()
    said = f"measured: {where}" if where else "not measured"
    short = ("" if profile.short_query_weight is None else
             f" ({float(profile.short_query_weight)!r} for a one-line query)")
    return f"judge weight {float(profile.judge_weight)!r}{short}, {said}"
