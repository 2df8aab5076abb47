"""``python -m slm_rerank.llama``: the detached supervisor ``serve --background`` starts.

``processes.SUPERVISOR_MODULE`` names this spelling: a supervisor is recognised by it.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from slm_rerank.errors import ServeError
from slm_rerank.llama.supervisor import DEFAULT_HOST, DEFAULT_PORT, ServeOptions, serve_foreground


def _main(argv: list[str]) -> int:
    """``python -m slm_rerank.llama``: what ``--background`` runs, detached."""
    import argparse

    ap = argparse.ArgumentParser(prog="slm-rerank serve (background)")
    ap.add_argument("--cache-dir", type=Path, required=True)
    ap.add_argument("--model-file", type=Path)
    ap.add_argument("--bind", default=DEFAULT_HOST)
    ap.add_argument("--port", type=int, default=DEFAULT_PORT)
    ap.add_argument("--slots", type=int, default=0)
    ap.add_argument("--idle", type=float, default=0.0)
    ap.add_argument("--log", type=Path)
    args = ap.parse_args(argv)
    options = ServeOptions(args.model_file, args.bind, args.port, args.slots, args.idle)

    def say(message: str) -> None:
        print(f"[{time.strftime('%Y-%m-%d %H:%M:%S')}] slm-rerank serve: {message}",
              flush=True)

    try:
        return serve_foreground(options, args.cache_dir, say, args.log)
    except ServeError as exc:
        say(f"error: {exc}")
        return 1


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
