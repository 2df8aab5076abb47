"""The MCP server builds the ripgrep source's word index between calls (idle work in a
thread, ``slm_rerank.idle_work``): once it is built, a call runs no rg matching pass and
answers as a server without it does, also after a file changed and for calls that arrive
while it is being built; and the server still exits at once when its client leaves.

rg is played by a wrapper (``SLM_RERANK_RG``) that logs each run's arguments and runs the
real rg: the matching pass is the run given ``-o``.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

from mcp import ClientSession, StdioServerParameters, stdio_client
from search_fixtures import CLI, REPO_FILES, make_repo

T = TypeVar("T")
TOOL = "rerank_codebase"
QUERY = {"query": "retry backoff", "fast": True}
#: calls a test makes at most while it waits for the index to be built
PATIENCE = 100


def with_server(cwd: Path, session_work: Callable[[ClientSession], Awaitable[T]],
                env: dict[str, str]) -> T:
    """Spawn `slm-rerank mcp` in ``cwd`` and run ``session_work`` against it through the
    SDK's stdio client (as tests/servers/test_mcp.py does)."""
    params = StdioServerParameters(command=str(CLI), args=["mcp"], cwd=str(cwd),
                                   env={**os.environ, **env})

    async def run() -> T:
        async with stdio_client(params, errlog=sys.stderr) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                return await session_work(session)

    return asyncio.run(asyncio.wait_for(run(), timeout=180))


def text(result: Any) -> str:
    return "\n".join(block.text for block in result.content)


def real_rg() -> str:
    beside = Path(sys.executable).parent / "rg"
    found = str(beside) if beside.is_file() else shutil.which("rg")
    assert found is not None, "rg is needed"
    return found


def logging_rg(folder: Path) -> tuple[Path, Path]:
    """A wrapper for rg that appends each run's arguments (one line, NUL-separated) to a log."""
    log = folder / "rg.log"
    wrapper = folder / "rg"
    wrapper.write_text(f"#!/bin/sh\nprintf '%s\\0' \"$@\" >> '{log}'\nprintf '\\n' >> '{log}'\n"
                       f"exec '{real_rg()}' \"$@\"\n")
    wrapper.chmod(0o755)
    log.write_bytes(b"")
    return wrapper, log


def matching_passes(log: Path) -> int:
    """rg's matching passes (the runs given ``-o``) logged since the log was last emptied."""
    lines = log.read_bytes().decode("utf-8", "surrogateescape").splitlines()
    log.write_bytes(b"")
    return sum("-o" in line.split("\0") for line in lines)


def env_for(rg: Path, idle_thread: bool = True) -> dict[str, str]:
    # the tests' isolation turns the thread off (SLM_RERANK_IDLE_THREAD=0): on here
    return {"SLM_RERANK_RG": str(rg), "SLM_RERANK_IDLE_THREAD": "1" if idle_thread else "0"}


#: the index's clock an hour ahead in the server: the files just written look old enough to
#: be taken on their stamps (else each call reads again every file changed in the last
#: minute, and more than 64 of them leave the call to rg)
LATER = """\
import time
from slm_rerank_ripgrep import word_index

word_index.now_ns = lambda: time.time_ns() + 3600 * 10**9
"""


def later(folder: Path) -> dict[str, str]:
    probe = folder / "later"
    probe.mkdir()
    (probe / "sitecustomize.py").write_text(LATER)
    path = os.pathsep.join(p for p in (str(probe), os.environ.get("PYTHONPATH", "")) if p)
    return {"PYTHONPATH": path}


def answer(result: Any) -> list[tuple[str, int, int, float]]:
    assert not result.is_error, text(result)
    return [(r["path"], r["start_line"], r["end_line"], round(r["score"], 9))
            for r in result.structured_content["results"]]


async def until_indexed(session: ClientSession, log: Path, query: dict[str, Any]
                        ) -> list[Any]:
    """Calls until one runs no matching pass (the index answered it); all their results."""
    found = []
    for _ in range(PATIENCE):
        found.append(await session.call_tool(TOOL, query))
        if matching_passes(log) == 0:
            return found
        await asyncio.sleep(0.05)
    raise AssertionError("no call was answered from the word index")


def test_a_call_after_the_index_is_built_runs_no_matching_pass_and_answers_the_same(
        repo: Path, tmp_path: Path) -> None:
    rg, log = logging_rg(tmp_path)
    retry = repo / "src/net/retry.py"

    async def work(session: ClientSession) -> dict[str, Any]:
        first = await session.call_tool(TOOL, QUERY)
        assert matching_passes(log) == 1  # no index yet: rg matched
        calls = await until_indexed(session, log, QUERY)
        again = await session.call_tool(TOOL, QUERY)
        passes_again = matching_passes(log)
        # a file edited behind the same size and modification time
        before = retry.stat()
        retry.write_text(retry.read_text().replace("backoff", "BACKOF_").replace("retry", "rerun"))
        assert retry.stat().st_size == before.st_size
        os.utime(retry, ns=(before.st_atime_ns, before.st_mtime_ns))
        edited = await session.call_tool(TOOL, QUERY)
        passes_edited = matching_passes(log)
        # a file added
        (repo / "src/backoff_retry.py").write_text("RETRY = BACKOFF = 'retry backoff'\n")
        added = await session.call_tool(TOOL, QUERY)
        return {"first": first, "calls": calls, "again": again, "passes_again": passes_again,
                "edited": edited, "passes_edited": passes_edited, "added": added,
                "passes_added": matching_passes(log)}

    got = with_server(repo, work, env=env_for(rg))

    assert all(answer(call) == answer(got["first"]) for call in got["calls"])
    assert answer(got["again"]) == answer(got["first"]) and got["passes_again"] == 0
    assert got["passes_edited"] == 0 and got["passes_added"] == 0
    assert answer(got["edited"]) != answer(got["first"])

    # what a server without the index answers now, for the same tree
    async def alone(session: ClientSession) -> Any:
        return await session.call_tool(TOOL, QUERY)

    plain = with_server(repo, alone, env=env_for(rg, idle_thread=False))
    assert matching_passes(log) == 1
    assert answer(got["added"]) == answer(plain)
    assert "src/backoff_retry.py" in [place[0] for place in answer(plain)]


def many_files(root: Path, count: int) -> Path:
    """A repository of ``count`` small files, a few about retries: a build of several windows."""
    files: dict[str, str | bytes] = dict(REPO_FILES)
    for n in range(count):
        words = " ".join(f"word{(n * 7 + k) % 5000}" for k in range(60))
        extra = " retry backoff" if n % 97 == 0 else ""
        files[f"pkg{n % 20}/mod{n}.py"] = f"# {words}{extra}\nVALUE_{n} = {n}\n"
    return make_repo(root, files)


def test_calls_arriving_while_the_index_is_built_are_answered_as_without_it(
        tmp_path: Path) -> None:
    repo = many_files(tmp_path / "big", 3000)
    rg, log = logging_rg(tmp_path)
    queries = [QUERY, {"query": "word17 word4000 value", "fast": True},
               {"query": "retry backoff word3", "fast": True}]

    async def calls(session: ClientSession) -> list[Any]:
        # back to back: the build runs between them, a window at a time
        found = [await session.call_tool(TOOL, queries[n % 3]) for n in range(9)]
        found += await until_indexed(session, log, queries[0])
        found += [await session.call_tool(TOOL, q) for q in queries]
        assert matching_passes(log) == 0
        return found

    with_index = with_server(repo, calls, env={**env_for(rg), **later(tmp_path)})

    async def plain(session: ClientSession) -> list[Any]:
        return [await session.call_tool(TOOL, q) for q in queries]

    without = [answer(r) for r in with_server(repo, plain, env=env_for(rg, idle_thread=False))]
    for n, result in enumerate(with_index[:9]):
        assert answer(result) == without[n % 3], n
    assert [answer(r) for r in with_index[-3:]] == without


def test_the_server_exits_at_once_when_its_client_leaves_during_a_build(
        tmp_path: Path) -> None:
    repo = many_files(tmp_path / "big", 3000)
    rg, log = logging_rg(tmp_path)
    server = subprocess.Popen([str(CLI), "mcp"], cwd=repo, stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              env={**os.environ, **env_for(rg)})
    try:
        assert server.stdin is not None and server.stdout is not None

        def send(message: dict[str, Any]) -> None:
            assert server.stdin is not None
            server.stdin.write(json.dumps({"jsonrpc": "2.0", **message}).encode() + b"\n")
            server.stdin.flush()

        send({"id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "test", "version": "1"}}})
        assert b'"id":1' in server.stdout.readline()
        send({"method": "notifications/initialized"})
        send({"id": 2, "method": "tools/call", "params": {"name": TOOL, "arguments": QUERY}})
        assert b'"id":2' in server.stdout.readline()
        assert matching_passes(log) == 1  # answered by rg; the build starts now

        server.stdin.close()
        server.wait(timeout=30)  # a server that waited for the build would still be there
        assert server.returncode == 0, server.stderr.read() if server.stderr else ""
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()
