"""The helpers plugins share, in one public module: what a plugin may use of the host's code.

A plugin imports from ``slm_rerank`` (``hookimpl``), ``slm_rerank.registrations`` (what it
registers), ``slm_rerank.errors``, ``slm_rerank.report``, ``slm_rerank.testing`` (its tests)
and this module; nothing else (``tests/test_plugin_surface.py`` holds the built-in plugins
to that). The host may move its modules; the names here keep their meaning.

``ModelClient`` and ``gather_all`` are loaded on first use: loading a plugin must not cost
a ``--fast`` search the HTTP client (import them under ``TYPE_CHECKING`` for annotations).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

# --- digests, without the OpenSSL library that importing hashlib loads (sha256, blake2b) ----
from slm_rerank.digests import blake2b, sha256

# --- running git on the user's repository: a total deadline and a cap on its output, and
# nothing the repository's git configuration names may run (git_output; start_git streams) -
from slm_rerank.git_runner import GitError, git_output, start_git

# --- work a long-lived process may do once a command was answered (an index to build) -----
from slm_rerank.idle_work import Unfinished, when_idle

# --- chunks and file kinds as the search cuts and reads files (the review's --diff) --------
# --- and a candidate source that runs a search tool (see the ripgrep and git plugins) ------
from slm_rerank.lexical.chunking import Chunk, chunk_text
from slm_rerank.lexical.filetypes import is_source_path, path_kind, size_reason
from slm_rerank.lexical.matches import (
    GroupedCounts,
    count_grouped_terms,
    count_terms,
    listed_path,
    order_for_search,
    split_file_list,
    start_tool,
    stderr_excerpt,
    stream_output,
)

# --- words, as the lexical stage reads them (for an expander whose terms must match) -------
from slm_rerank.lexical.terms import STOP_WORDS, light, split_identifier, stem

# --- what a long-lived process lets go of when over its memory budget (mapped pages) -------
from slm_rerank.memory_budget import give_back, on_over_budget, resident_file_bytes

# --- talking to a model server (for a scorer or an expander) --------------------------------
from slm_rerank.model.answers import NextToken, TokenChoice, endpoint_url, excerpt
from slm_rerank.model.fusion import sigmoid
from slm_rerank.registrations import Endpoint, ModelProfile
from slm_rerank.safefile import read_at_most

if TYPE_CHECKING:
    from slm_rerank.host import Host
    from slm_rerank.model.client import ModelClient, gather_all

__all__ = [
    # sources
    "GroupedCounts", "count_grouped_terms", "count_terms", "listed_path", "order_for_search",
    "size_reason", "split_file_list", "start_tool", "stderr_excerpt", "stream_output",
    # git
    "GitError", "git_output", "start_git",
    # chunks and file kinds
    "Chunk", "chunk_text", "is_source_path", "path_kind",
    # terms
    "STOP_WORDS", "light", "split_identifier", "stem",
    # model servers
    "ModelClient", "NextToken", "TokenChoice", "endpoint_url", "excerpt", "gather_all",
    "sigmoid",
    # a plugin's own command (register_commands) that talks to a model server
    "ModelServer", "command_host", "find_model_server",
    # reading a file a repository holds, within a cap; digests without loading OpenSSL
    "read_at_most", "blake2b", "sha256",
    # work for a long-lived process once the command was answered
    "Unfinished", "give_back", "on_over_budget", "resident_file_bytes", "when_idle",
]


def command_host(start: Path, **flags: Any) -> Host:
    """The host a plugin's command runs with: the settings layers, its flags on top.

    ``flags`` are the search's (``base_url``, ``model``, ``timeout``, ``api``, ``local``,
    ``top_k``, ...; None means not given), checked as the search checks them; pass the host
    to ``slm_rerank.search(host=...)`` and ``rerank_documents(host=...)``.
    """
    from slm_rerank.host import Host
    from slm_rerank.overrides import overrides

    return Host.from_environment(start=start, flags=overrides(**flags))


@dataclass(frozen=True)
class ModelServer:
    """The server a search would ask, and the profile that talks to it; or why there is none."""

    endpoint: Endpoint | None
    profile: ModelProfile | None
    #: how they were chosen, for -v
    notes: list[str] = field(default_factory=list)
    #: why no server answered; None when one did
    degraded: str | None = None


async def find_model_server(host: Host, client: ModelClient) -> ModelServer:
    """The first server a search of ``host``'s settings would ask, found as the search finds it.

    Pinned servers (``-e``, ``SLM_ENDPOINT``, config) are probed, else the ports are scanned,
    all within the client's timeout; none answering is ``degraded``, not an error. A pinned
    URL that is no model server, or an unknown ``--model``, raises ``ConfigError``.
    """
    from slm_rerank.model.endpoints import choose_endpoints
    from slm_rerank.model.profiles import choose_profile

    found = await choose_endpoints(host.settings, client, host.model_session)
    if not found.endpoints:
        return ModelServer(None, None, found.notes, found.degraded or "no model server answered")
    endpoint = found.endpoints[0]
    choice = choose_profile(host.registry.profiles(), model_id=endpoint.model_id,
                            requested=host.settings.model)
    notes = list(found.notes)
    if choice is not None:
        notes.append(f"profile {choice.profile.name}: {choice.reason}")
    return ModelServer(endpoint, choice.profile if choice else None, notes)


def __getattr__(name: str) -> Any:
    # The model client pulls in httpx: only a plugin that talks to a server pays for it.
    if name in ("ModelClient", "gather_all"):
        from slm_rerank.model import client

        return getattr(client, name)
    raise AttributeError(f"module 'slm_rerank.plugin_kit' has no attribute {name!r}")
