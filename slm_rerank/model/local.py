"""``--local``: start the managed server when a query finds no model server, or reuse it.

Used by the CLI's ``--local``, ``auto_serve`` and ``slm_rerank.search``; the scan that
decides "no server answers" is the model stage's own (``discovery.scan``). It sits in the
model stage, above the managed server (``slm_rerank.llama``), which imports nothing of the
model stage.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from pathlib import Path

from slm_rerank.errors import ServeError
from slm_rerank.llama.control import start_background
from slm_rerank.llama.ports import listening
from slm_rerank.llama.processes import clear_stale, running
from slm_rerank.llama.state import touch
from slm_rerank.llama.supervisor import DEFAULT_HOST, ServeOptions

#: Ports ``--local`` tries, the default first; all are in the range queries scan.
LOCAL_PORTS = (8035, 8036, 8037, 8038, 8039, 8040, 8033, 8034)


def _stderr(message: str) -> None:
    print(f"slm-rerank: {message}", file=sys.stderr, flush=True)


def local_model(cache_dir: Path, serve_model: str) -> Path | None:
    """The GGUF ``--local`` starts for the user's ``serve_model``: None for the bundled one.

    ``judge`` is the checked file in the cache folder; when it is not there this says how
    to fetch it and fetches nothing (a search never downloads 1.1 GB unasked).
    """
    if serve_model != "judge":
        return None
    from slm_rerank.llama import judge_model

    dest = cache_dir / "models"
    judge = judge_model.JUDGE  # looked up at the call: tests swap it for a small one
    found = judge_model.cached(dest, judge)
    if found is None:
        raise ServeError(f"--local: serve_model = \"judge\", but "
                         f"{judge_model.missing_text(dest, judge)}; or set serve_model = "
                         "\"bundled\"")
    return found


def ensure_local(cache_dir: Path, idle: float, scan_host: str | None = None,
                 say: Callable[[str], None] = _stderr, serve_model: str = "bundled"
                 ) -> str | None:
    """Start the managed server unless a model server already answers; say what was done.

    Returns a line for stderr when a server was started, None when one was there. The scan
    is the model stage's own (``discovery.scan``), so "a server answers" means the same here
    as there. ``say`` hears progress while the model loads (stderr by default).
    ``serve_model`` (the user's setting, never a repository's) picks the model it starts.
    """
    if running(cache_dir) is not None:
        touch(cache_dir)
        return None
    # A llama-server whose supervisor died would answer the scan and then never idle out.
    clear_stale(cache_dir)
    import asyncio

    from slm_rerank.model import discovery  # here: the HTTP stack only when it scans

    probes = asyncio.run(discovery.scan(scan_host or discovery.DEFAULT_HOST))
    if any(p.endpoint is not None for p in probes):
        return None
    port = next((p for p in LOCAL_PORTS if not listening(DEFAULT_HOST, p)), None)
    if port is None:
        raise ServeError("--local: every port 8033-8040 on 127.0.0.1 is taken by something "
                         "that is not a model server; free one, or run slm-rerank serve "
                         "--port N and pass -e")
    model_file = local_model(cache_dir, serve_model)
    options = ServeOptions(model_file=model_file, port=port, idle=idle)
    argv = ["--cache-dir", str(cache_dir), "--port", str(port), "--idle", str(idle)]
    if model_file is not None:
        argv += ["--model-file", str(model_file)]
    which = "the judge model" if model_file is not None else "the bundled model"
    started = time.monotonic()
    heard: list[str] = []

    def relay(message: str) -> None:
        heard.append(message)
        say(f"--local: {message}")

    state = start_background(options, cache_dir, argv, relay)
    touch(cache_dir)
    if any(m.startswith(("already running", "a managed server is already starting"))
           for m in heard):
        # another query (or a serve command) started it while this one waited for the lock
        return (f"--local: using the model another process started at {state.url} "
                f"({Path(state.model).name})")
    idle_note = f"; it stops after {idle:g} s without a query" if idle else ""
    return (f"--local: no model server was running, so started {which} at "
            f"{state.url} in {time.monotonic() - started:.1f} s (slm-rerank serve stop "
            f"stops it{idle_note})")

