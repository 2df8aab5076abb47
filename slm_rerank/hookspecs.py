"""The hooks a slm-rerank plugin may implement.

Every hook but ``register_commands`` is a registry hook: it receives a ``register``
callback and calls it once per thing it provides; the return value is ignored. Hooks are
called with keyword arguments, so an implementation may accept fewer arguments than the
spec; new arguments are only ever added at the end. Each hook is called once per run,
lazily, the first time the host needs that family. A name registered twice (by one plugin
or two) is an error naming both plugins; raising inside a hook is an error naming the
plugin.

The type ``register`` accepts is the family's contract (``slm_rerank.registrations``); the
host reads it from the annotation below, so a new family is one hookspec plus one
dataclass.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import pluggy

from slm_rerank.registrations import (
    CandidateSource,
    ModelProfile,
    OutputFormatter,
    QueryExpander,
    Scorer,
)

if TYPE_CHECKING:  # click is the command line's: the Python API does not import it
    import click

PROJECT = "slm_rerank"
hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)

# --- finding candidates -------------------------------------------------------------------


@hookspec
def register_candidate_sources(register: Callable[[CandidateSource], None]) -> None:
    """Register where candidate files come from.

    :param register: call ``register(CandidateSource(...))`` once per source. The host
        tries the sources named in the ``sources`` setting in order and uses the first whose
        ``unavailable(root)`` returns None; ``search(SourceQuery)`` must return
        ``SourceHits`` and raise ``SourceError`` when its tool fails.
    """


@hookspec
def register_query_expanders(register: Callable[[QueryExpander], None]) -> None:
    """Register extra recall terms for a query.

    :param register: call ``register(QueryExpander(...))`` once per expander.
        ``expand(ExpandRequest)`` receives the query and, when configured, a model endpoint,
        profile and deadline; it returns ``WeightedTerm``s (weight 1.0 = a typed word). An
        empty list means nothing to add.
    """


# --- scoring ------------------------------------------------------------------------------


@hookspec
def register_model_profiles(register: Callable[[ModelProfile], None]) -> None:
    """Register how to talk to a model family.

    :param register: call ``register(ModelProfile(...))`` once per family or layout. A
        profile gives a completion layout and (for chat models) a chat layout, the
        instruction, the yes/no words and stop strings, and the model ids it claims; the
        longest claim on a server's model id wins (see ``ModelProfile``).
    """


@hookspec
def register_scorers(register: Callable[[Scorer], None]) -> None:
    """Register a way to obtain relevance scores.

    :param register: call ``register(Scorer(...))`` once per scorer.
        ``score(ScoreRequest)`` is an async iterator of ``DocumentScore`` (one per document
        it judged, in any order); it raises ``TransientError`` for a fault that may pass and
        ``ContractError`` for an answer it cannot use.
    """


# --- output -------------------------------------------------------------------------------


@hookspec
def register_output_formatters(register: Callable[[OutputFormatter], None]) -> None:
    """Register an output format for ``--format NAME``.

    :param register: call ``register(OutputFormatter(...))`` once per format.
        ``render(report, tty=...)`` returns the whole text to write to stdout.
    """


# --- the command line ---------------------------------------------------------------------


@hookspec
def register_commands(cli: click.Group) -> None:
    """Add commands to `slm-rerank` (not a registry hook: it is handed a click group).

    :param cli: a ``click.Group``; add commands to it with ``@cli.command()``,
        ``@cli.group()`` or ``cli.add_command(...)``, and each becomes ``slm-rerank NAME``.
        Asked when a command name is not a built-in one and for ``--help``, never for a
        plain search. A name slm-rerank or another plugin already has is left out with a
        warning naming the plugin; so are the commands of a hook that raises.
    """
