"""The hooks a slm-rerank plugin may implement.

Every hook is a registry hook: it receives a ``register`` callback and calls it once per
thing it provides. Hooks are called with keyword arguments, so an implementation may accept
fewer arguments than the spec; new arguments are only ever added at the end.
"""

from __future__ import annotations

from collections.abc import Callable

import pluggy

from slm_rerank.registrations import (
    CandidateSource,
    ModelProfile,
    OutputFormatter,
    QueryExpander,
    Scorer,
)

PROJECT = "slm_rerank"
hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)

# --- finding candidates -------------------------------------------------------------------


@hookspec
def register_candidate_sources(register: Callable[[CandidateSource], None]) -> None:
    """Register where candidate files come from: call ``register(CandidateSource(...))``."""


@hookspec
def register_query_expanders(register: Callable[[QueryExpander], None]) -> None:
    """Register extra recall terms for a query: call ``register(QueryExpander(...))``."""


# --- scoring ------------------------------------------------------------------------------


@hookspec
def register_model_profiles(register: Callable[[ModelProfile], None]) -> None:
    """Register how to talk to a model family: call ``register(ModelProfile(...))``."""


@hookspec
def register_scorers(register: Callable[[Scorer], None]) -> None:
    """Register a way to obtain relevance scores: call ``register(Scorer(...))``."""


# --- output -------------------------------------------------------------------------------


@hookspec
def register_output_formatters(register: Callable[[OutputFormatter], None]) -> None:
    """Register an output format for ``--format NAME``: call ``register(OutputFormatter(...))``."""
