"""The helpers plugins share, in one public module: what a plugin may use of the host's code.

A plugin imports from ``slm_rerank`` (``hookimpl``), ``slm_rerank.registrations`` (what it
registers), ``slm_rerank.errors``, ``slm_rerank.report``, ``slm_rerank.testing`` (its tests)
and this module; nothing else (``tests/test_plugin_surface.py`` holds the built-in plugins
to that). The host may move its modules; the names here keep their meaning.

``ModelClient`` and ``gather_all`` are loaded on first use: loading a plugin must not cost
a ``--fast`` search the HTTP client (import them under ``TYPE_CHECKING`` for annotations).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

# --- a candidate source that runs a search tool (see the ripgrep and git plugins) ----------
from slm_rerank.lexical.filetypes import size_reason
from slm_rerank.lexical.matches import (
    count_grouped_terms,
    count_terms,
    listed_path,
    order_for_search,
    split_file_list,
    start_tool,
    stderr_excerpt,
)

# --- words, as the lexical stage reads them (for an expander whose terms must match) -------
from slm_rerank.lexical.terms import STOP_WORDS, light, split_identifier, stem

# --- talking to a model server (for a scorer or an expander) --------------------------------
from slm_rerank.model.answers import NextToken, TokenChoice, endpoint_url, excerpt
from slm_rerank.model.fusion import sigmoid

if TYPE_CHECKING:
    from slm_rerank.model.client import ModelClient, gather_all

__all__ = [
    # sources
    "count_grouped_terms", "count_terms", "listed_path", "order_for_search", "size_reason",
    "split_file_list", "start_tool", "stderr_excerpt",
    # terms
    "STOP_WORDS", "light", "split_identifier", "stem",
    # model servers
    "ModelClient", "NextToken", "TokenChoice", "endpoint_url", "excerpt", "gather_all",
    "sigmoid",
]


def __getattr__(name: str) -> Any:
    # The model client pulls in httpx: only a plugin that talks to a server pays for it.
    if name in ("ModelClient", "gather_all"):
        from slm_rerank.model import client

        return getattr(client, name)
    raise AttributeError(f"module 'slm_rerank.plugin_kit' has no attribute {name!r}")
