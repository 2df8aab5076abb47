"""Long-lived front doors: the ``/v1/rerank`` HTTP server and the MCP server."""
