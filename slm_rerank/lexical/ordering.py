"""Which order a search's candidate files take: the learned ranker's (``ranker.py``), by
this repository's own model when ``calibrate --learn --write`` kept one, else the shipped
one; or the fixed lexical factors (``learned_order = false``, or a model that cannot be
used, which is a warning)."""

from __future__ import annotations

from pathlib import Path

from slm_rerank.lexical.features import HISTORY_FEATURES
from slm_rerank.lexical.gather import Gathered
from slm_rerank.lexical.rank import Ranked
from slm_rerank.lexical.ranker import choose_model, learned_order

#: the most a search spends reading the repository's change history for the learned ranker
HISTORY_SECONDS = 1.0


def fixed_note(origin: str) -> str:
    """The -v note of a search the user asked for the fixed order."""
    # the flag's off side is what the user typed: --learned-order/--fixed-order
    origin = origin.replace("--learned-order", "--fixed-order")
    return f"order: fixed lexical factors (learned_order = false, from {origin})"


def learn_order(root: Path, cache_dir: Path | None, gathered: Gathered, ranked: Ranked,
                notes: list[str]) -> None:
    """Put ``ranked``'s files in the learned ranker's order; ``ranked.lexical`` keeps each
    chunk's lexical score. A model that cannot be used leaves the lexical order, with a
    warning in ``ranked.warnings``."""
    if gathered.terms.about_tests or gathered.terms.about_docs:
        # The models learn from fixes, whose answers are source files: none has seen a
        # test or a doc page be the answer, and it would bury the very files asked for.
        notes.append("order: fixed lexical factors (the query asks for "
                     f"{'tests' if gathered.terms.about_tests else 'docs'}, and the learned "
                     "ranker learned from fixes, whose answers are source files)")
        return
    chosen = choose_model(root, cache_dir)
    notes.append(chosen.note)
    if chosen.warning:
        ranked.warnings.append(chosen.warning)
    if chosen.model is None:
        return
    history = None
    if HISTORY_FEATURES & set(chosen.model.features):
        from slm_rerank.lexical.history import read_history

        # one bounded git log, cached by commit: a warm read is one rev-parse
        history = read_history(root, cache_dir=cache_dir, notes=notes,
                               deadline_s=HISTORY_SECONDS)
    lexical = {(c.path, c.chunk.start_line): c.score for c in ranked.chunks}
    ranked.chunks, ranked.placed = learned_order(
        ranked.chunks, gathered.evidence, gathered.terms, gathered.stats, ranked.texts,
        chosen.model, history)
    ranked.model = chosen.model
    ranked.lexical = lexical
