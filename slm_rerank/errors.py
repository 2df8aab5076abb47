"""Every exception slm-rerank raises on purpose, in one place.

Two families matter to a caller:

- ``SlmRerankError`` and its subclasses other than ``TransientError`` are *permanent*: the
  configuration, a plugin, the query or a server's answer is wrong, and running again will
  not help. The CLI prints the message on one line and exits non-zero; the Python API
  raises them.
- ``TransientError`` is a fault that may pass (a refused connection, a timeout, a 5xx, a
  server still loading its model). The pipeline catches it, keeps whatever was already
  scored, and returns a ``Report`` whose ``degraded`` says why; it never reaches the user
  as an exception.

Every message names the thing at fault (the file, key, endpoint or plugin) and what to do.
"""

from __future__ import annotations


class SlmRerankError(Exception):
    """Base of every error slm-rerank raises on purpose."""


class ConfigError(SlmRerankError):
    """A configuration file or value is wrong; the message names the file and the key."""


class RegistrationError(SlmRerankError):
    """A plugin registered something wrong: a duplicate name, a wrong type, or it raised."""


class SearchError(SlmRerankError):
    """The search cannot run; the message says what to change."""


class QueryError(SearchError):
    """The query itself is unusable (empty, or only stop words)."""


class ScopeError(SearchError):
    """A path the user named (an argument, a name piped on stdin, the root) cannot be
    searched; the message names it."""


class SourceError(SearchError):
    """A candidate source (rg, git) failed; the message names it and carries its stderr."""


class EndpointError(SlmRerankError):
    """Something went wrong talking to a model server; ``endpoint`` names its URL."""

    def __init__(self, message: str, endpoint: str | None = None) -> None:
        super().__init__(message)
        self.endpoint = endpoint


class TransientError(EndpointError):
    """A fault that may pass: refused, timed out, 5xx, still loading. Degrades, never fails."""


class ContractError(EndpointError):
    """A server answered with something we cannot use (unparseable, missing logprobs)."""


class RequestRejected(ContractError):
    """A server refused the request itself with a 4xx (400, 422: a field it does not take),
    not its endpoint, credentials or load: the same request without that field may pass."""


class ServeError(SlmRerankError):
    """The managed server cannot be found, started, reached or stopped; says what to do."""


class ToolInputError(SlmRerankError):
    """An MCP tool argument the tool cannot use; the message names the parameter."""


class ApiError(Exception):
    """A ``serve-api`` request answered with an error status; ``message`` says what to change.

    Not a ``SlmRerankError``: it never leaves the rerank server, which turns it into an HTTP
    error body (``status``, ``kind``) for the client that sent the request.
    """

    def __init__(self, status: int, kind: str, message: str,
                 headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.kind = kind
        self.message = message
        self.headers = headers or {}
