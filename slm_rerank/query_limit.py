"""The longest query any front door takes: ``-q``, ``--query-file``, stdin, the MCP tool."""

from __future__ import annotations

#: A whole issue fits many times over, and a runaway source (``--query-file /dev/zero``)
#: stops here instead of filling memory.
MAX_QUERY_BYTES = 1_000_000
QUERY_LIMIT = f"{MAX_QUERY_BYTES // 1_000_000} MB"


def too_long(where: str) -> str:
    """The message for a query over the limit; ``where`` names it ("the query on stdin")."""
    return (f"{where} is longer than the query limit of {QUERY_LIMIT} "
            f"({MAX_QUERY_BYTES} bytes); shorten it (the title and the traceback are enough)")
