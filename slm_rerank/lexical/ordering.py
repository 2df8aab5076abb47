"""Which order a search's candidate files take: the learned ranker's (``ranker.py``), by
this repository's own model when ``calibrate --learn --write`` kept one, else the shipped
one; or the fixed lexical factors (``learned_order = false``, or a model that cannot be
used, which is a warning)."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING

from slm_rerank.config import Settings
from slm_rerank.lexical.features import (
    FIRST_LINE_FEATURES,
    HISTORY_FEATURES,
    STRONG_FEATURES,
)
from slm_rerank.lexical.gather import Gathered
from slm_rerank.lexical.rank import Ranked
from slm_rerank.lexical.ranker import Chosen, choose_model, learned_order
from slm_rerank.lexical.terms import QueryTerms

if TYPE_CHECKING:
    from slm_rerank.lexical.history import KeptHistory

#: the most a search spends reading the repository's change history for the learned ranker
HISTORY_SECONDS = 1.0


def fixed_note(origin: str) -> str:
    """The -v note of a search the user asked for the fixed order."""
    # the flag's off side is what the user typed: --learned-order/--fixed-order
    origin = origin.replace("--learned-order", "--fixed-order")
    return f"order: fixed lexical factors (learned_order = false, from {origin})"


class HistoryAhead:
    """The change history looked up in a worker thread while the sources search: its two
    git processes (the driver names, rev-parse) then run beside rg rather than after the
    ranking. Only a history kept from before (in memory or the cache folder), or the
    certainty that there is none, is taken from it (``history.kept_history``); anything
    else is read by ``learn_order`` as before, with what the lookup left of
    ``HISTORY_SECONDS``."""

    def __init__(self, root: Path, cache_dir: Path, chosen: Chosen) -> None:
        from slm_rerank.lexical.history import kept_history

        self.chosen = chosen
        self._found: KeptHistory | None = None
        self._error: BaseException | None = None
        #: seconds the lookup took: spent of ``HISTORY_SECONDS``, which is a total
        self.spent = 0.0

        def look() -> None:
            started = time.monotonic()
            try:
                self._found = kept_history(root, cache_dir=cache_dir,
                                           deadline_s=HISTORY_SECONDS)
            except BaseException as exc:  # raised again in the search's own thread
                self._error = exc
            finally:
                self.spent = time.monotonic() - started

        self._thread = threading.Thread(target=look, name="slm-rerank-history",
                                        daemon=True)
        self._thread.start()

    def finish(self) -> None:
        """Wait for the lookup, whose answer is not needed (no git is left running)."""
        self._thread.join()

    def result(self) -> KeptHistory | None:
        """The history found, once the lookup has ended (None: read it)."""
        self._thread.join()
        if self._error is not None:
            raise self._error
        return self._found


def read_ahead(root: Path, cache_dir: Path | None, terms: QueryTerms, settings: Settings
               ) -> HistoryAhead | None:
    """Start looking up the history ``learn_order`` will need, if it will need one: the
    settings ask for the learned order, the query does not ask for tests or docs, the model
    chosen weighs history features, and there is a cache folder to have kept it in."""
    if (not settings.learned_order or cache_dir is None or terms.asks_tests
            or terms.asks_docs):
        return None
    chosen = choose_model(root, cache_dir)
    if chosen.model is None or not HISTORY_FEATURES & set(chosen.model.features):
        return None
    return HistoryAhead(root, cache_dir, chosen)


def put_in_order(root: Path, cache_dir: Path | None, settings: Settings, gathered: Gathered,
                 ranked: Ranked, notes: list[str], ahead: HistoryAhead | None = None,
                 query: str = "") -> None:
    """Put ``ranked``'s files in the order ``settings`` ask for, and say which in ``notes``;
    ``ahead`` (``read_ahead``'s lookup) is ended either way: no git is left running.
    ``query``: the query's text, whose first line the learned ranker also weighs alone."""
    try:
        if settings.learned_order and ranked.chunks:
            learn_order(root, cache_dir, gathered, ranked, notes, ahead, query)
        elif not settings.learned_order:
            notes.append(fixed_note(settings.origins.get("learned_order", "default")))
        else:
            notes.append("order: fixed lexical factors")
    finally:
        if ahead is not None:
            ahead.finish()


def learn_order(root: Path, cache_dir: Path | None, gathered: Gathered, ranked: Ranked,
                notes: list[str], ahead: HistoryAhead | None = None, query: str = "") -> None:
    """Put ``ranked``'s files in the learned ranker's order; ``ranked.lexical`` keeps each
    chunk's lexical score. A model that cannot be used leaves the lexical order, with a
    warning in ``ranked.warnings``. ``ahead``: the model and history ``read_ahead`` began
    looking up for this search; ``query``: the text whose first line the model weighs
    alone (``first_line.py``)."""
    if gathered.terms.asks_tests or gathered.terms.asks_docs:
        # The models learn from fixes, whose answers are source files: none has seen a
        # test or a doc page be the answer, and it would bury the very files asked for. A
        # query that only names them ("ValueError when collecting tests", "docstring
        # default arg is broken") is a report like any other (tests/bench/ranker_asks_cv.py).
        notes.append("order: fixed lexical factors (the query asks for "
                     f"{'tests' if gathered.terms.asks_tests else 'docs'}, and the learned "
                     "ranker learned from fixes, whose answers are source files)")
        return
    chosen = ahead.chosen if ahead is not None else choose_model(root, cache_dir)
    notes.append(chosen.note)
    if chosen.warning:
        ranked.warnings.append(chosen.warning)
    if chosen.model is None:
        return
    history = None
    if HISTORY_FEATURES & set(chosen.model.features):
        from slm_rerank.lexical.history import read_history

        found = ahead.result() if ahead is not None else None
        if found is not None:
            notes.extend(found.notes)
            history = found.history
        else:
            # one bounded git log, cached by commit: a warm read is one rev-parse
            history = read_history(root, cache_dir=cache_dir, notes=notes,
                                   deadline_s=HISTORY_SECONDS,
                                   spent=ahead.spent if ahead is not None else 0.0)
    first = strong = None
    used = set(chosen.model.features)
    if FIRST_LINE_FEATURES & used:
        from slm_rerank.lexical.first_line import first_line_view

        first = first_line_view(query, gathered, ranked)
    if STRONG_FEATURES & used:
        from slm_rerank.lexical.first_line import strong_view

        strong = strong_view(gathered, ranked)
    lexical = {(c.path, c.chunk.start_line): c.score for c in ranked.chunks}
    ranked.chunks, ranked.placed = learned_order(
        ranked.chunks, gathered.evidence, gathered.terms, gathered.stats, ranked.texts,
        chosen.model, history, ranked.files, first, strong)
    ranked.model = chosen.model
    ranked.lexical = lexical
