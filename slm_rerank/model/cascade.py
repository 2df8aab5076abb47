"""The cascade (``--cascade``): judge only as much of the head as the query needs.

Every rule of the cascade is here; the stages that follow it only ask:

- **ask nothing** when the lexical order is already decisive: its first file's best chunk
  scores at least ``DECISIVE_LEAD`` times the next file's (``lexical.rank.lead``). There
  the lexical first is right far more often than a judge can lift (docs/benchmarks.md).
  The run still finds the server and profile, and sends no chunk (``stage``), not even
  to the score cache: one cached verdict would lift its chunk above the lexical first
  the cascade chose to keep;
- otherwise **judge the first** ``CASCADE_FIRST`` passages in the first round
  (``judge_budget.judge_in_rounds``),
- then go on one round at a time only while none of the judged has a **clear yes**
  (P(relevant) >= ``CLEAR_YES``).

What the cascade leaves unjudged is the lexical tail, which keeps its lexical order below
the judged ones (``fusion``): a stop costs ranking depth, never a result. A stop is a
choice, not a fault: a note and ``model.tokens.stopped`` in JSON, not ``degraded``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

# The three numbers live beside the ``cascade`` setting, whose help (and the --cascade
# flag's) is built from them; the rules that use them are here.
from slm_rerank.config_keys import CASCADE_FIRST, CLEAR_YES, DECISIVE_LEAD
from slm_rerank.lexical.rank import Ranked, lead

__all__ = ["CASCADE_FIRST", "CLEAR_YES", "DECISIVE_LEAD", "asks_nothing", "clear_yes",
           "decisive_lead", "first_round"]


def decisive_lead(lead: float | None) -> str | None:
    """Why the cascade asks nothing for a query whose lexical first file leads by ``lead``
    (None: it asks)."""
    # written so that NaN (which compares false with everything) is not decisive
    if lead is None or not DECISIVE_LEAD <= lead < math.inf:
        return None
    return (f"the cascade asked no judge: the lexical order is decisive (its first file "
            f"scores {lead:.2f} times the next, >= {DECISIVE_LEAD:g})")


def asks_nothing(ranked: Ranked, cascade: bool) -> str | None:
    """Why the judge is asked nothing about ``ranked`` (a search's lexical order); None
    when it is asked (always without ``cascade``)."""
    return decisive_lead(lead(ranked)) if cascade else None


def first_round(size: int) -> int:
    """How many passages the cascade's first round judges, given the round's ``size``."""
    return max(size, CASCADE_FIRST)


def clear_yes(probabilities: Iterable[float], judged: int) -> str | None:
    """Why the cascade stops after ``judged`` passages with these verdicts; None while it
    goes on (fewer than ``CASCADE_FIRST`` judged, or no clear yes among them)."""
    best = max(probabilities, default=0.0)
    if judged < CASCADE_FIRST or best < CLEAR_YES:
        return None
    return (f"the cascade stopped after {judged} passages: one has a clear yes "
            f"(P(relevant) {best:.2f} >= {CLEAR_YES})")
