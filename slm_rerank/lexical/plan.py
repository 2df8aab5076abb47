"""A narrower lexical search, for a caller with a small budget (the prompt hook).

A search plan names the query terms to search for and the most candidate files to read and
slice. Both are the search's main costs on a large tree: every term is one more literal rg
looks for and one more count on every matching file, and every candidate file is read,
hashed, sliced (or its slices loaded) and scored chunk by chunk. The plan only narrows: it
never adds a term or a file the query would not have found.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from slm_rerank.lexical.file_scores import FileEvidence
from slm_rerank.lexical.terms import QueryTerms, Term

#: Of a capped candidate list, the share given to the best files by evidence; the rest go
#: to the best by path alone (a file named like the query may hold few of its words).
EVIDENCE_SHARE = 0.75


@dataclass(frozen=True)
class SearchPlan:
    """What a narrowed search looks for and reads."""

    #: the roots (``Term.root``) of the query terms to search for; None: every term
    terms: tuple[str, ...] | None = None
    #: the most candidate files read and sliced; None: the lexical stage's own rule
    max_files: int | None = None


def choose_terms(terms: Sequence[Term], files_naming: Callable[[str], int | None],
                 ceiling: int, keep: int) -> tuple[str, ...]:
    """The roots of at most ``keep`` of ``terms``: the ones that best say where to look.

    In this order: terms of identifier or file-name shape (the user named them); then the
    words the repository's own names hold (``files_naming``: how many files name the word,
    None when none does) in at most ``ceiling`` files; then the rest. Within each group the
    terms keep their order (``terms.extract`` puts the weightiest and longest first).
    """
    def group(term: Term) -> int:
        if term.strong:
            return 0
        files = files_naming(term.root)
        return 1 if files is not None and files <= ceiling else 2

    ordered = sorted(range(len(terms)), key=lambda i: (group(terms[i]), i))
    return tuple(terms[i].root for i in ordered[:max(1, keep)])


def planned_terms(terms: QueryTerms, plan: SearchPlan | None) -> QueryTerms:
    """``terms`` restricted to the plan's; unchanged when the plan names none of them."""
    if plan is None or plan.terms is None:
        return terms
    wanted = set(plan.terms)
    kept = [t for t in terms.terms if t.root in wanted]
    return dataclasses.replace(terms, terms=kept) if kept else terms


def planned_files(evidence: list[FileEvidence], plan: SearchPlan | None
                  ) -> list[FileEvidence]:
    """At most the plan's ``max_files`` of ``evidence`` (best first): the best by evidence,
    then the best by path alone, in the lexical stage's order."""
    if plan is None or plan.max_files is None or len(evidence) <= plan.max_files:
        return evidence
    cap = max(1, plan.max_files)
    best = evidence[:max(1, int(cap * EVIDENCE_SHARE))]
    chosen = {e.path for e in best}
    by_path = sorted((e for e in evidence if e.path_score > 0 and e.path not in chosen),
                     key=lambda e: (-e.path_score, e.path))[:cap - len(best)]
    chosen.update(e.path for e in by_path)
    # too few named by path: the next best by evidence fill the cap
    rest = [e for e in evidence if e.path not in chosen][:cap - len(best) - len(by_path)]
    return best + by_path + rest
