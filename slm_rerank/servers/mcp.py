"""The search as one MCP tool over stdio, for coding agents (`slm-rerank mcp`, cli/mcp.py).

Built on the official ``mcp`` SDK (``MCPServer``). The server keeps one plugin ``Host`` per
root while the config files it was read from are unchanged (``slm_rerank.warm``), so a
second call pays no plugin loading and no config read; each call runs the same
``slm_rerank.search`` the CLI runs, in a worker thread (the model stage runs its own event
loop, which cannot nest inside the server's).

No ``from __future__ import annotations`` here: the SDK builds the tool's input schema from
its annotations at run time, and they name types imported only when the server starts (so
that every other command stays free of the SDK's import cost).
"""

import dataclasses
import json
import logging
import os
import sys
import threading
import traceback
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any

from slm_rerank.errors import SlmRerankError, ToolInputError
from slm_rerank.host import Host
from slm_rerank.lexical.scope import GLOB_CHARS, resolve_root, shown
from slm_rerank.report import Report, display_path, visible
from slm_rerank.warm import HostCache

TOOL_NAME = "rerank_codebase"
CALLER = "mcp"
#: Libraries that log each HTTP request at INFO.
_QUIET_LOGGERS = ("httpx", "httpcore")

TOOL_DESCRIPTION = (
    "Find where in a codebase the answer to a question lives: ranked file:line citations. "
    "Candidates are found lexically (ripgrep/git), then a small language model judges the "
    "best chunks; fast=true skips the model. Paths and globs are relative to root."
)


class _LazySession:
    """A ModelSession started the first time a call needs the model."""

    def __init__(self) -> None:
        self._session: Any = None

    def __getattr__(self, name: str) -> Any:
        if self._session is None:
            from slm_rerank.model.session import ModelSession

            self._session = ModelSession()
        return getattr(self._session, name)


@dataclasses.dataclass
class RerankService:
    """What the server keeps warm across calls: a Host per root and config, built from the
    same flags."""

    default_root: Path
    #: settings the command line overrides (``--host``, ``-e``), from ``overrides``
    flags: dict[str, Any] = dataclasses.field(default_factory=dict)
    # Searches run one at a time: the pipeline and its caches were written for one run
    # per process, and an agent waits for each answer anyway.
    _lock: threading.Lock = dataclasses.field(default_factory=threading.Lock)
    # one event loop and keep-alive client for every call and host (made on first use, so
    # a server that only ever answers fast calls never starts them)
    _session: _LazySession = dataclasses.field(default_factory=_LazySession)
    _hosts: HostCache = dataclasses.field(init=False)

    def __post_init__(self) -> None:
        self.default_root = self.default_root.resolve()
        self._hosts = HostCache(prepare=self._give_session)

    def _give_session(self, host: Host) -> None:
        host.model_session = self._session

    @property
    def busy(self) -> bool:
        """Whether a search is running (in its worker thread, perhaps abandoned)."""
        return self._lock.locked()

    def host_for(self, root: Path) -> Host:
        """The warm Host for ``root``: plugins loaded and checked once; the settings read
        again when a config file they come from (the user's, the repository's
        ``.slm-rerank.toml``) has changed since the last call."""
        return self._hosts.host_for(root, self.flags)

    def rerank(self, query: str, paths_or_globs: Sequence[str] = (),
               threshold: float | None = None,
               top_k: int = 5, fast: bool = False, root: str | None = None,
               expand: bool = False, stubs: str | None = None, dirty: bool = False,
               by_slice: bool = False, learned_order: bool | None = None) -> Report:
        """Run one search; raises ``SlmRerankError`` with a one-line message on bad input."""
        from slm_rerank.api import search
        from slm_rerank.overrides import overrides
        from slm_rerank.query_limit import MAX_QUERY_BYTES, too_long

        # The CLI's cap: calls run one at a time, so one oversized query would hold up
        # every call after it. (surrogatepass: a JSON string may hold a lone surrogate.)
        if len(query.encode("utf-8", errors="surrogatepass")) > MAX_QUERY_BYTES:
            raise ToolInputError(too_long("parameter 'query'"))
        if not query.strip():
            raise ToolInputError("parameter 'query' is empty; ask a question, e.g. "
                                 "'where are retries configured'")
        folder = resolve_root(Path(root), self.default_root) if root else self.default_root
        paths = [_inside_root(p, folder) for p in paths_or_globs]
        with self._lock:
            # A copy that shares the loaded plugins: the threshold and top_k are this
            # call's alone (an unset threshold leaves the user's configured one).
            host = self.host_for(folder).with_overrides(
                "parameter '{key}'", **overrides(threshold=threshold, top_k=top_k,
                                                 learned_order=learned_order))
            return search(query, folder, paths=paths, fast=fast, caller=CALLER, host=host,
                          expand=expand, stubs=stubs, dirty=dirty, by_slice=by_slice,
                          root_name="root")


def _inside_root(name: str, root: Path) -> str:
    """``name`` as an absolute path under ``root``; one that leaves it is refused."""
    if "\0" in name:
        raise ToolInputError(f"path '{shown(name)}' holds a NUL byte; no file has such a name")
    candidate = Path(name).expanduser()
    full = candidate if candidate.is_absolute() else root / candidate
    relative = os.path.relpath(os.path.abspath(full), root)
    if relative == ".." or relative.startswith(".." + os.sep):
        kind = "glob" if GLOB_CHARS & set(name) else "path"
        raise ToolInputError(f"{kind} '{shown(name)}' is outside the root "
                             f"{display_path(str(root))}; pass root to search another folder")
    return str(full)


def _score_words(report: Report, score: float) -> str:
    """A result's score as an agent reads it, with what it is when the scale is not
    obvious: the learned ranker's is a share among the candidate files."""
    if report.score_kind == "learned":
        return f"learned score {score:.2f}: the ranker's estimate that this file is the answer"
    return f"{report.score_kind} score {score:.2f}"


def citations_text(report: Report) -> str:
    """The ranked citations as an agent reads them: one ``file:line`` per line, grouped
    under ``slice NAME:`` lines with ``by_slice``, then the ghost stubs if asked for.

    Names, symbols, notes and server messages are the repository's or a server's words:
    each is escaped (``visible``) so that none can start a line of its own or carry raw
    control characters into what the agent reads; a stub keeps its newlines and tabs.
    """
    lines: list[str] = []

    def add(line: str) -> None:
        lines.append(visible(line))

    if report.degraded:
        add(f"degraded: {report.degraded.reason}")
        add("(results below keep their lexical order: the model did not judge them all)")
    for message in report.warnings:
        add(f"warning: {message}")
    if not report.results:
        add(f"no results for {report.query!r} under {display_path(report.root)}")
    groups = [(None, range(len(report.results)))] if report.slices is None else [
        (g.name or "(outside any slice)", g.members) for g in report.slices]
    for heading, members in groups:
        if heading is not None:
            add(f"slice {heading}:")
        for index in members:
            c = report.results[index]
            where = f"{display_path(c.path)}:{c.start_line}"
            shown = report.shown_score(c)
            detail = [f"lines {c.start_line}-{c.end_line}",
                      "not judged" if shown is None else _score_words(report, shown)]
            if c.symbol:
                detail.insert(0, c.symbol)
            if c.dirty:
                detail.append(f"uncommitted: {c.dirty}")
            add(f"{index + 1}. {where}  ({', '.join(detail)})")
    for rank, c in enumerate(report.results, 1):
        if c.stub is None:
            continue
        add("")
        add(f"--- {rank}. {display_path(c.path)} (stub: {c.stub.kept_lines} of "
            f"{c.stub.total_lines} lines kept, {c.stub.folded_lines} folded; line numbers "
            "are the file's)")
        if c.stub.note:
            add(f"note: {c.stub.note}")
        if c.stub.text:
            lines.append(visible(c.stub.text.rstrip("\n"), keep_lines=True))
    return "\n".join(lines)


#: how an argument error shows a JSON type of the tool's input schema
_JSON_TYPES = {"string": "a string", "integer": "an integer", "number": "a number",
               "boolean": "true or false", "null": "null", "object": "an object"}
#: how much of a rejected argument an error shows
_SHOWN_ARGUMENT = 60


def expected_type(schema: dict[str, Any]) -> str:
    """What a parameter of the tool's JSON schema takes, in words: "an integer of at least
    1", "a list of strings or null"."""
    words = []
    for option in schema.get("anyOf", [schema]):
        kind = option.get("type")
        if kind == "array":
            item = _JSON_TYPES.get(option.get("items", {}).get("type", ""), "")
            word = f"a list of {item.split(' ', 1)[1]}s" if item.startswith("a") else "a list"
        else:
            word = _JSON_TYPES.get(kind, str(kind))
        low, high = option.get("minimum"), option.get("maximum")
        if low is not None and high is not None:
            word += f" from {low:g} to {high:g}"
        elif low is not None:
            word += f" of at least {low:g}"
        elif high is not None:
            word += f" of at most {high:g}"
        words.append(word)
    return " or ".join(words)


def argument_error(errors: Sequence[Any], arguments: dict[str, Any],
                   schema: dict[str, Any]) -> str:
    """One line for pydantic's ``errors()`` of a call's arguments: each parameter at fault,
    what it takes and what it got (not pydantic's several lines and its URL)."""
    properties = schema.get("properties", {})
    said: dict[str, str] = {}
    for error in errors:
        location = error.get("loc") or ("?",)
        name = str(location[0])
        if name in said:
            continue
        takes = expected_type(properties.get(name, {})) or "another value"
        if error.get("type") == "missing":
            said[name] = f"parameter '{name}' is required: {takes}"
            continue
        got = json.dumps(arguments.get(name), default=repr)
        if len(got) > _SHOWN_ARGUMENT:
            got = got[:_SHOWN_ARGUMENT] + "..."
        said[name] = f"parameter '{name}' must be {takes}, got {got}"
    return "; ".join(said.values()) or "the arguments do not fit the tool's input schema"


def build_server(service: RerankService) -> Any:
    """An ``MCPServer`` with the one tool, bound to ``service``."""
    import anyio
    from mcp.server.mcpserver import MCPServer
    from mcp.server.mcpserver.exceptions import ToolError, UnexpectedToolError
    from mcp.types import CallToolResult, TextContent
    from pydantic import Field, ValidationError

    from slm_rerank import __version__

    class Server(MCPServer):
        """Arguments that do not fit the schema get one line naming each parameter."""

        async def call_tool(self, name: str, arguments: dict[str, Any],
                            context: Any = None) -> Any:
            try:
                return await super().call_tool(name, arguments, context)
            except ToolError as exc:
                cause = exc.__cause__
                if isinstance(exc, UnexpectedToolError) or not isinstance(cause,
                                                                          ValidationError):
                    raise
                schema = next((tool.input_schema for tool in await self.list_tools()
                               if tool.name == name), {})
                raise ToolError(argument_error(cause.errors(), arguments, schema)) from cause

    server = Server(name="slm-rerank", version=__version__,
                    instructions="Call rerank_codebase to locate code that answers a "
                                 "question; it returns ranked file:line citations.")
    # The SDK logs at INFO to stderr, and httpx then reports every request to a model
    # server there ("HTTP Request: GET .../api/version 404" from a probe), which an MCP
    # client's log shows as if it were an error; what goes wrong reaches the agent in the
    # result (degraded), so only their warnings are worth a line.
    for name in _QUIET_LOGGERS:
        logging.getLogger(name).setLevel(logging.WARNING)

    def error(message: str) -> CallToolResult:
        return CallToolResult(content=[TextContent(type="text", text=message)], is_error=True)

    async def rerank_codebase(
        query: Annotated[str, Field(description="The question, e.g. 'where are retries "
                                                "configured', or a pasted error or issue.")],
        paths_or_globs: Annotated[list[str] | None, Field(
            description="Only search these files, folders or globs (relative to root).")] = None,
        threshold: Annotated[float | None, Field(
            description="Drop model-judged results whose P(relevant), the judge's own "
                        "score, is below this (0-1); unset: nothing is dropped.",
            ge=0.0, le=1.0, strict=True)] = None,
        top_k: Annotated[int, Field(description="Number of results.", ge=1, strict=True)] = 5,
        stub: Annotated[bool, Field(description="Add a ghost stub of each result's file: "
                                                "imports, declarations and signatures with "
                                                "the cited code in full, other bodies "
                                                "folded; true line numbers.",
                                    strict=True)] = False,
        skeleton: Annotated[bool, Field(description="Add each result file's skeleton alone "
                                                    "(every body folded); instead of stub.",
                                        strict=True)] = False,
        dirty: Annotated[bool, Field(description="Lift files with uncommitted changes "
                                                 "(modified, staged, untracked) that match "
                                                 "the query.", strict=True)] = False,
        by_slice: Annotated[bool, Field(description="Group the results by architectural "
                                                    "slice (packages/x, services/x, src/x, "
                                                    "...), best slice first.",
                                        strict=True)] = False,
        expand: Annotated[bool, Field(description="Ask the model for words the query lacks "
                                                  "and search them at half weight (needs a "
                                                  "model server; without one, a note).",
                                      strict=True)] = False,
        fast: Annotated[bool, Field(description="Lexical ranking only: no model server is "
                                                "contacted (fast, always available).",
                                          strict=True)] = False,
        learned_order: Annotated[bool | None, Field(
            description="Order the candidate files by the learned ranker (true) or by the "
                        "fixed lexical factors (false); unset: the user's setting.",
            strict=True)] = None,
        root: Annotated[str | None, Field(
            description="Folder to search (default: the server's working directory).")] = None,
    ) -> CallToolResult:
        if stub and skeleton:
            return error("parameters 'stub' and 'skeleton' exclude each other: stub keeps "
                         "the cited code, skeleton folds every body; pass one")
        stubs = "stub" if stub else "skeleton" if skeleton else None
        try:
            # abandon_on_cancel: when the client closes stdin, the server cancels this call
            # and returns at once instead of waiting for the search (the command then ends
            # the process, and with it the search: cli/mcp.py)
            report = await anyio.to_thread.run_sync(
                lambda: service.rerank(query, paths_or_globs or (), threshold, top_k, fast,
                                       root, expand, stubs, dirty, by_slice,
                                       learned_order),
                abandon_on_cancel=True)
        except SlmRerankError as exc:
            return error(str(exc))
        except Exception as exc:  # a bug must cost one call, never the agent's server
            traceback.print_exc(file=sys.stderr)
            return error(f"internal error ({type(exc).__name__}: {exc}); the server is still "
                         "running, please report this with the server's stderr")
        return CallToolResult(content=[TextContent(type="text", text=citations_text(report))],
                              structured_content=report.to_dict())

    server.add_tool(rerank_codebase, name=TOOL_NAME, description=TOOL_DESCRIPTION)
    return server
