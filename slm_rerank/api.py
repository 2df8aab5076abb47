"""The Python API: one call from a question to a Report, for scripts and RAG pipelines.

    import slm_rerank
    report = slm_rerank.search("where are retries configured", root="~/src/app")
    for c in report.results:
        print(c.location, c.score, c.symbol)
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from slm_rerank import idle_work, usage
from slm_rerank.cache_folder import cache_path, usable_folder
from slm_rerank.event_loop import refuse_running_loop
from slm_rerank.host import Host
from slm_rerank.lexical.plan import SearchPlan
from slm_rerank.lexical.scope import choose_root, resolve_root, resolve_scope
from slm_rerank.overrides import overrides
from slm_rerank.pipeline import SearchRequest, run_search
from slm_rerank.report import Report
from slm_rerank.warm import API_HOSTS

#: The query expander ``expand=True`` (``--expand``) asks: slm-rerank-expand's.
EXPANDER = "llm"
#: the process whose searches are counted, and how many it ran: from its second, a
#: process is taken to be long-lived and runs idle work between calls (a fork counts anew)
_CALLS = {"pid": 0, "calls": 0}


def search(
    query: str,
    root: str | os.PathLike[str] | None = None,
    *,
    paths: Sequence[str] = (),
    top_k: int | None = None,
    chunks: bool | None = None,
    fast: bool = True,
    caller: str = "python",
    host: Host | None = None,
    piped_paths: Sequence[str] = (),
    explain: bool = False,
    expand: bool = False,
    stubs: str | None = None,
    dirty: bool = False,
    by_slice: bool = False,
    root_name: str = "root=",
    plan: SearchPlan | None = None,
    learned_order: bool | None = None,
    ask_judge: bool | None = None,
) -> Report:
    """Rank the places under ``root`` (default: the repository holding the cwd) for ``query``.

    Settings come from the usual layers; ``top_k`` and ``chunks`` override them like flags,
    also when a ``host`` is given. Raises ``SearchError`` (``QueryError`` for an unusable
    query), ``ConfigError`` or ``RegistrationError`` (all ``slm_rerank.errors``) with a
    message naming what to fix; a model server that fails comes back as
    ``report.degraded``, not an exception. The query is logged to ``usage.jsonl`` under
    ``caller`` unless ``usage_log = false``; a log that cannot be written is a warning on
    stderr and never costs the result. ``explain`` asks the sources to find every file they
    skip, for ``report.notes`` (what ``-v`` prints), at some extra cost on big trees.
    ``expand`` asks a model for words the query lacks (the ``llm`` query expander, from
    slm-rerank-expand) and searches for them too, at half a typed word's weight; it
    contacts the model server even when ``fast``.

    ``stubs="stub"`` gives each result a ghost stub of its file (``citation.stub``: the
    skeleton with the cited chunk in full), ``stubs="skeleton"`` the skeleton alone. ``dirty``
    lifts files with uncommitted changes (``--dirty``); ``by_slice`` fills each citation's
    ``slice`` and ``report.slices`` (``--by-slice``). ``root_name`` is how the caller's
    user sets the root, for the error a path outside it gets (the MCP tool's ``root``).
    ``plan`` narrows the search to fewer terms and files (``lexical.plan``; the prompt hook's).
    ``learned_order`` overrides the ``learned_order`` setting like ``--learned-order`` and
    ``--fixed-order``: False orders the files by the fixed lexical factors. ``ask_judge``
    overrides ``ask_judge_anyway`` like ``--ask-judge``: True asks the judge even where
    ``calibrate --write`` measured that it adds nothing in this repository.

    From the second call in a process, the process runs idle work between calls: a daemon
    thread builds what a plugin asked for once a search was answered (the ripgrep source's
    word index of the tree, which later searches of the whole tree then answer from),
    5 ms at a time and only while no search runs; a search arriving meanwhile waits for
    that window to end. The thread ends when that work is done, and never holds up the
    interpreter's exit. ``SLM_RERANK_IDLE_THREAD=0`` turns it off (``idle_work``).
    """
    if not isinstance(query, str):
        raise TypeError(f"search(query=...) must be a str, not {type(query).__name__}")
    for name, given in (("paths", paths), ("piped_paths", piped_paths)):
        # a str is a sequence too: its characters were searched as paths one by one
        if isinstance(given, (str, bytes)) or not all(isinstance(p, str) for p in given):
            raise TypeError(f"search({name}=...) must be a list of str, not {given!r}")
    if stubs not in (None, "stub", "skeleton"):
        raise ValueError(f"stubs must be None, 'stub' or 'skeleton', not {stubs!r}")
    if (not fast or expand) and (host is None or host.model_session is None):
        # checked before the lexical work, which the model stage's asyncio.run would waste
        refuse_running_loop("slm_rerank.search() with the model (fast=False or expand=True)",
                            "run it in a worker thread: "
                            "`await asyncio.to_thread(slm_rerank.search, ...)`")
    pid = os.getpid()
    if _CALLS["pid"] != pid:
        _CALLS.update(pid=pid, calls=0)
    _CALLS["calls"] += 1
    if _CALLS["calls"] >= 2:
        idle_work.run_in_background()
    with idle_work.calling():
        return _search(query, root, paths=paths, fast=fast, caller=caller, host=host,
                       top_k=top_k, chunks=chunks, piped_paths=piped_paths, explain=explain,
                       expand=expand, stubs=stubs, dirty=dirty, by_slice=by_slice,
                       root_name=root_name, plan=plan, learned_order=learned_order,
                       ask_judge=ask_judge)


def _search(query: str, root: str | os.PathLike[str] | None, *, paths: Sequence[str],
            top_k: int | None, chunks: bool | None, fast: bool, caller: str,
            host: Host | None, piped_paths: Sequence[str], explain: bool, expand: bool,
            stubs: str | None, dirty: bool, by_slice: bool, root_name: str,
            plan: SearchPlan | None, learned_order: bool | None, ask_judge: bool | None
            ) -> Report:
    started = time.perf_counter()
    cwd = Path.cwd()
    root_path = resolve_root(Path(root), cwd) if root is not None else None
    if host is None:
        # kept by this process while the config files it was read from are unchanged
        host = API_HOSTS.host_for(root_path or cwd)
    host = host.with_overrides("search({key}=...)", **overrides(top_k=top_k, chunks=chunks,
                                                                learned_order=learned_order,
                                                                ask_judge_anyway=ask_judge))
    host.validate()  # first: it may leave out a repository's value (a format, a source)
    settings = host.settings
    folder = usable_folder(cache_path(settings))
    cache_dir = folder.path
    # no root given: the repository holding the cwd, else the cwd itself, said on stderr
    chosen = choose_root(cwd, root_name) if root_path is None else None
    where = chosen.path if chosen is not None else root_path
    assert where is not None  # no root was chosen only when one was given
    scope = resolve_scope(where, paths, piped_paths, cwd, root_name)
    request = SearchRequest(
        query=query, root=scope.root, paths=scope.paths, globs=scope.globs, notes=scope.notes,
        fast=fast, cache_dir=cache_dir,
        explain=explain, expanders=[EXPANDER] if expand else [], stubs=stubs, dirty=dirty,
        by_slice=by_slice, plan=plan,
    )
    started_note = None
    if not fast:
        from slm_rerank.llama.state import touch
        from slm_rerank.model import local
        from slm_rerank.model.endpoints import pinned_urls

        # --local: with no server given (-e, SLM_ENDPOINT, an endpoints list, the [endpoints]
        # entry of --model) or to scan (--host), start ours; a pinned server is the one used.
        if cache_dir is None:
            pass  # a managed server keeps its state there: none is started or touched
        elif settings.auto_serve and not settings.host and not pinned_urls(settings)[0]:
            started_note = local.ensure_local(cache_dir, settings.serve_idle, None,
                                              serve_model=settings.serve_model)
        else:
            touch(cache_dir)  # a managed server found by the scan is in use too
    report = run_search(request, host)
    if chosen is not None:
        report.root_source = chosen.source
        if chosen.reason and not scope.paths and not scope.globs:
            # the whole folder was walked: say which and why (stderr, the JSON's warnings)
            report.warnings.insert(0, chosen.reason)
    if started_note:
        report.warnings.insert(0, started_note)
    if folder.warning:
        report.warnings.insert(0, folder.warning)
    if settings.usage_log and cache_dir is not None:
        try:
            usage.append(cache_dir, report, caller, (time.perf_counter() - started) * 1000)
        except OSError as exc:
            print(f"slm-rerank: warning: cannot append to {cache_dir / usage.LOG_NAME}: "
                  f"{exc.strerror or exc}; set usage_log = false or cache_dir to a writable "
                  "folder", file=sys.stderr)
    return report
