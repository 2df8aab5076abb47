"""`slm-rerank mcp`: the search as the MCP tool rerank_codebase over stdio.

The server itself is ``slm_rerank.servers.mcp`` (no click there); this is its command line.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import click

from slm_rerank.cli.model_flags import model_options
from slm_rerank.cli.terminal import fail
from slm_rerank.overrides import overrides


@click.command()
@model_options(only=("base_url", "host", "local"))
def mcp(**flags: Any) -> None:
    """Serve the search as the MCP tool rerank_codebase over stdio."""
    try:
        import mcp.server.mcpserver  # noqa: F401
    except ImportError as exc:
        fail(f"the MCP SDK cannot be imported ({exc}); pip install 'mcp>=2'")
    from slm_rerank.errors import SlmRerankError
    from slm_rerank.model.endpoints import pinned_urls
    from slm_rerank.servers.mcp import RerankService, build_server

    # --local too: the degraded note tells the agent's user to pass it
    service = RerankService(Path.cwd(), overrides(**flags))
    try:
        # Settings errors (a bad config file, SLM_ENDPOINT, -e) stop the server at once,
        # where the person registering it sees them, not at the agent's first call.
        pinned_urls(service.host_for(service.default_root).settings)
    except SlmRerankError as exc:
        fail(str(exc))
    # Between calls, what a search asked to have built (the ripgrep source's word index)
    # is built in a thread, a short window at a time, while no call runs (idle_work).
    from slm_rerank import idle_work

    idle_work.run_in_background()
    build_server(service).run("stdio")
    if service.busy:
        # The client closed stdin while a search ran: nobody is left to read its answer.
        # End its tools (rg, git) and the process now; the search thread, abandoned by the
        # server, would otherwise run on to its deadline, and the interpreter wait for it.
        from slm_rerank.lexical.matches import kill_tools

        kill_tools(close=True)
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)
