"""slm-rerank: ranked file:line citations for a question about a codebase."""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

__version__ = "0.1.0"
__all__ = ["Candidate", "Reranker", "__version__", "arerank_documents", "hookimpl",
           "rerank_documents", "rrf_fuse", "search"]


def __getattr__(name: str) -> Any:
    # pluggy is imported on first use so that `slm-rerank --version` stays cheap.
    if name == "hookimpl":
        from slm_rerank.hookspecs import hookimpl

        return hookimpl
    if name == "search":
        from slm_rerank.api import search

        return search
    if name in ("rerank_documents", "arerank_documents"):
        from slm_rerank import documents

        return getattr(documents, name)
    if name == "rrf_fuse":
        from slm_rerank.rrf import fuse

        return fuse
    if name in ("Reranker", "Candidate"):
        from slm_rerank import reranker

        return getattr(reranker, name)
    raise AttributeError(f"module 'slm_rerank' has no attribute {name!r}")
