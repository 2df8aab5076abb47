"""What one query's judge may spend (tokens, seconds), and judging the head in rounds.

On a GPU the head of 16 passages is judged in a second or two; on two CPU cores the 1.5B
judge reads about 70 prompt tokens a second, and the same head costs a minute or more.
This module lets a query spend less, and says what it spent:

- every verdict carries the server's count of its prompt tokens and of those taken from
  the prompt cache (``DocumentScore.prompt_tokens`` / ``cached_tokens``); ``TokenUse``
  sums them, so JSON says what the model read (``read`` = prompt - cached);
- a **budget** (``--budget 2000`` tokens, ``--budget 20s`` seconds) stops sending
  passages before the next round would pass it. Tokens are estimated before a passage is
  sent (its characters over the characters per token measured on this query's earlier
  verdicts, or on the prefix the server tokenized, 3 until one is known) and counted as
  the server reports them after; a seconds budget does not start a round that the pace
  so far says would end past it, and also bounds the round in flight, so it is kept even
  when a round is slow;
- the **cascade** (``cascade.py``, which holds its rules) judges a first round of at
  least ``cascade.CASCADE_FIRST`` passages, then goes on only while none has a clear yes.

Passages go in head order (lexical order, file-diverse), so what a budget or the cascade
leaves unjudged is the lexical tail, which keeps its lexical order below the judged ones
(``fusion``): a stop costs ranking depth, never a result. A stop is a choice, not a fault:
it is a note and a JSON field (``model.tokens.stopped``), not ``degraded``.
"""

from __future__ import annotations

import dataclasses
import math
import re
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field

from slm_rerank.errors import ConfigError
from slm_rerank.model import cascade as cascade_rules
from slm_rerank.model.passages import CHARS_PER_TOKEN
from slm_rerank.model.scoring import ScoreOutcome
from slm_rerank.registrations import Document


def unjudged_tokens(prefix: str, documents: Sequence[Document]) -> int:
    """About how many prompt tokens judging ``documents`` would have read: the shared
    prefix once, each document's text (3 characters a token)."""
    return math.ceil((len(prefix) + sum(len(d.text) for d in documents)) / CHARS_PER_TOKEN)


@dataclass(frozen=True)
class Budget:
    """What one query's model work may cost: prompt tokens the server reads, seconds, or
    both (None: no cap)."""

    tokens: int | None = None
    seconds: float | None = None

    def __bool__(self) -> bool:
        return self.tokens is not None or self.seconds is not None


# ASCII digits only (re.ASCII): "\d" alone also takes "٢٠٠٠" or full-width digits, a number
# the person cannot check against what they meant to type
_BUDGET = re.compile(r"\s*(\d+(?:\.\d+)?)\s*(s|sec|seconds?|t|tok|tokens?)?\s*",
                     re.IGNORECASE | re.ASCII)
#: digits a budget may have: past this it is a typo, and float() would make it infinity
_MAX_DIGITS = 18


def parse_budget(text: str, where: str = "--budget") -> Budget:
    """``"2000"`` or ``"2000t"``: prompt tokens; ``"20s"``: seconds; ``"off"``: no cap.

    A budget of 0 (in any unit) is an error, not a synonym of off: read as a number it
    means no model work at all, read as "no limit" the opposite, and the two must not be
    told apart by a unit letter.
    """
    if not text.strip():
        # `--budget "$BUDGET"` with the variable unset is a mistake, not a wish for no cap
        raise ConfigError(f"{where}: it is empty; give prompt tokens (--budget 2000) or "
                          "seconds (--budget 20s), or off for no cap")
    if text.strip().lower() in ("off", "none"):
        return Budget()
    found = _BUDGET.fullmatch(text)
    if found is None:
        raise ConfigError(f"{where}: {text[:40]!r} is not a budget; give prompt tokens "
                          "(--budget 2000) or seconds (--budget 20s), or off")
    number, unit = found.group(1), (found.group(2) or "t").lower()
    if not number.strip("0."):
        raise ConfigError(f"{where}: {text.strip()!r} is a budget of nothing; give off for "
                          "no cap, or --fast for no model work at all")
    if len(number.split(".")[0]) > _MAX_DIGITS:
        raise ConfigError(f"{where}: {number[:20]}... is too large for a budget; give at "
                          f"most {_MAX_DIGITS} digits, or off for no cap")
    if unit.startswith("s"):
        if float(number) <= 0:
            raise ConfigError(f"{where}: a budget in seconds must be above 0")
        return Budget(seconds=float(number))
    # tokens are read as an integer: through a float a large count would be rounded
    whole, _, fraction = number.partition(".")
    if fraction.strip("0") or int(whole) < 1:
        raise ConfigError(f"{where}: a budget in tokens is a whole number of at least 1")
    return Budget(tokens=int(whole))


@dataclass
class TokenUse:
    """What one query's verdicts cost on the server, and what the budget or cascade kept."""

    #: prompt tokens of the verdicts the server gave this query (cache hits cost nothing)
    prompt: int = 0
    #: of which the server took from its prompt cache (a prefix shared with an earlier one)
    cached: int = 0
    #: verdicts whose cost the server did not report, so ``prompt`` holds an estimate
    estimated: int = 0
    budget: Budget = field(default_factory=Budget)
    cascade: bool = False
    #: passages left unjudged by the budget or the cascade, and their estimated tokens
    unjudged: int = 0
    saved: int = 0
    #: why judging stopped before the end of the head; None when it did not
    stopped: str | None = None
    #: document index -> (prompt tokens, cached tokens) of its verdict (for the benches)
    per_document: dict[int, tuple[int, int]] = field(default_factory=dict)

    @property
    def read(self) -> int:
        """The tokens the server had to read: the work a budget caps."""
        return self.prompt - self.cached

    def to_dict(self) -> dict[str, object]:
        return {"prompt": self.prompt, "cached": self.cached, "read": self.read,
                "estimated": self.estimated, "budget_tokens": self.budget.tokens,
                "budget_seconds": self.budget.seconds, "cascade": self.cascade,
                "unjudged": self.unjudged, "saved": self.saved, "stopped": self.stopped}


@dataclass
class _Meter:
    """The characters per read token of this query so far, for estimating what is next:
    measured on the passages read, else on the prefix the server tokenized, else 3."""

    chars: int = 0
    tokens: int = 0
    first: float = CHARS_PER_TOKEN

    @property
    def chars_per_token(self) -> float:
        return self.chars / self.tokens if self.tokens >= 50 else self.first

    def estimate(self, chars: int) -> int:
        return max(1, math.ceil(chars / self.chars_per_token))


#: runs one round: the documents at these indices, as one scorer request that stops at the
#: deadline given (``time.monotonic()``); the outcome's indices are positions in the list
RunRound = Callable[[list[int], float], Awaitable[ScoreOutcome]]


async def judge_in_rounds(run: RunRound, documents: Sequence[Document], order: Sequence[int],
                          prefix_chars: int, slots: int, budget: Budget, cascade: bool,
                          use: TokenUse,
                          on_round: Callable[[ScoreOutcome, list[int]], None],
                          prefix_tokens: int | None = None,
                          deadline: float = math.inf,
                          started: float | None = None) -> ScoreOutcome:
    """Judge ``documents[i]`` for ``i`` in ``order``, in rounds of ``slots`` passages, until
    the head ends, a round stops early (a fault or the deadline), the budget would be
    passed, or the cascade has its clear yes. Returns the merged outcome, by index into
    ``documents``; ``use`` gets the cost and why it stopped.

    ``prefix_chars`` is the length of the prompt around a document (the instruction and
    the query): each slot reads it once before its prompt cache holds it; ``prefix_tokens``
    is its length in tokens when the server counted it. ``deadline`` is the run's; a round
    stops at it or at the seconds budget's end, whichever comes first, and only the first
    is a fault. ``started`` (``time.monotonic()``) is when the query's judge began, if
    before this call (a tokenize request sized the budget): the seconds budget counts from it.
    """
    merged = ScoreOutcome()
    meter = _Meter()
    if prefix_tokens:
        meter.first = max(prefix_chars / prefix_tokens, 1.0)
    started = started if started is not None else time.monotonic()
    ends = started + budget.seconds if budget.seconds is not None else math.inf
    left = list(order)
    warm = 0  # slots that have read the shared prefix
    use.budget, use.cascade = budget, cascade
    rounds = 0
    while left:
        size = max(1, slots)
        if cascade and rounds == 0:
            size = cascade_rules.first_round(size)
        batch = left[:size]
        if budget.tokens is not None:
            batch = _within_tokens(batch, documents, meter, budget.tokens - use.read,
                                   prefix_chars, max(slots - warm, 0))
            if not batch:
                use.stopped = (f"the budget of {budget.tokens} prompt tokens was reached "
                               f"({use.read} read)")
                break
        if budget.seconds is not None:
            spent = time.monotonic() - started
            # the seconds a token has taken so far: a round that would end past the budget
            # is not started (the round's own deadline is the budget's end all the same)
            ahead = (spent / use.read * sum(meter.estimate(len(documents[i].text))
                                            for i in batch) if use.read else 0.0)
            if spent + ahead > budget.seconds:
                use.stopped = (f"the budget of {budget.seconds:g} s was reached" if ahead == 0
                               else f"the budget of {budget.seconds:g} s would be passed by "
                               f"the next round (about {ahead:.1f} s more)")
                break
        part = await run(batch, min(deadline, ends))
        if part.fault == "deadline" and ends < deadline:
            part.fault, part.stopped = "budget", None  # the budget's end, not a fault
        rounds += 1
        warm = min(slots, warm + len(batch))
        for j, verdict in part.scores.items():
            i = batch[j]
            merged.scores[i] = dataclasses.replace(verdict, index=i)
            count_verdict(use, i, verdict, documents[i], prefix_chars, meter)
        merged.skipped.update({batch[j]: why for j, why in part.skipped.items()})
        merged.notes.extend(part.notes)
        on_round(part, batch)
        done = set(batch)
        left = [i for i in left if i not in done]
        if part.fault == "budget":
            use.stopped = f"the budget of {budget.seconds:g} s was reached"
            break
        if part.stopped:
            merged.stopped, merged.fault = part.stopped, part.fault
            if part.fault == "deadline":  # the round's counts would say "1 of 2"
                merged.stopped = (f"the deadline passed after {len(merged.scores)} of "
                                  f"{len(order)} documents were scored")
            break
        if cascade and left:
            stop = cascade_rules.clear_yes((v.probability for v in merged.scores.values()),
                                           len(merged.scores))
            if stop is not None:
                use.stopped = stop
                break
    if left and use.stopped:
        use.unjudged = len(left)
        use.saved = sum(meter.estimate(len(documents[i].text)) for i in left)
    return merged


def _within_tokens(batch: list[int], documents: Sequence[Document], meter: _Meter,
                   room: int, prefix_chars: int, cold_slots: int) -> list[int]:
    """The start of ``batch`` whose estimated cost fits ``room`` tokens (a cold slot also
    reads the shared prefix)."""
    out: list[int] = []
    for n, i in enumerate(batch):
        cost = meter.estimate(len(documents[i].text))
        if n < cold_slots:
            cost += meter.estimate(prefix_chars)
        if cost > room:
            break
        room -= cost
        out.append(i)
    return out


def count_verdict(use: TokenUse, index: int, verdict: object, document: Document,
                  prefix_chars: int, meter: _Meter | None = None) -> None:
    """Add one verdict's cost to ``use`` (and to ``meter``'s characters per token)."""
    meter = meter if meter is not None else _Meter()
    prompt = getattr(verdict, "prompt_tokens", None)
    cached = getattr(verdict, "cached_tokens", None)
    if not isinstance(prompt, int) or prompt < 0:
        # the server did not count it (or gave a negative count, which would make what was
        # read shrink and a budget never be reached): the estimate stands in, JSON says so
        prompt, cached = meter.estimate(len(document.text) + prefix_chars), 0
        use.estimated += 1
    else:
        cached = max(0, min(cached if isinstance(cached, int) else 0, prompt))
        if cached:  # the prefix came from the cache: what was read is the document's
            meter.chars += len(document.text)
            meter.tokens += prompt - cached
    use.prompt += prompt
    use.cached += cached
    use.per_document[index] = (prompt, cached)
