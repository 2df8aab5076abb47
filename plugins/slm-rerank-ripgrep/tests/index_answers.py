"""What the word index's tests compare: a search of a tree as the plugin answers it (from
the index, when one is kept), and rg's own answer with every index set aside."""

from __future__ import annotations

from pathlib import Path

import slm_rerank_ripgrep
from slm_rerank_ripgrep import word_index

from slm_rerank.registrations import SourceHits, SourceQuery


def search(root: Path, terms: list[str], max_filesize: int) -> SourceHits:
    return slm_rerank_ripgrep.search(SourceQuery(root=root, terms=terms,
                                                 max_filesize=max_filesize))


def by_rg(root: Path, terms: list[str], max_filesize: int) -> SourceHits:
    """The same search with no index kept: rg's matching pass answers it."""
    kept = dict(word_index._TREES)
    word_index._TREES.clear()
    try:
        return search(root, terms, max_filesize)
    finally:
        word_index._TREES.update(kept)


def same(a: SourceHits, b: SourceHits) -> None:
    assert a.body_counts == b.body_counts
    assert a.skipped == b.skipped
    assert sorted(a.files) == sorted(b.files)
