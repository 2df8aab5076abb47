#!/usr/bin/env python3
"""Fetch the judge model (Qwen2.5-Coder-1.5B-Instruct, Q4_K_M GGUF) into the user cache.

    python contrib/llama-server/judge_model.py [--dest DIR] [--parts-from DIR]

What ``make judge-model`` runs: a thin wrapper of ``slm_rerank.llama.judge_model`` (which
``slm-rerank serve --judge --fetch`` uses too), importable from this checkout with any
Python 3.10+, since that module needs the standard library only. Prints the GGUF's path.
"""

from __future__ import annotations

import sys
from pathlib import Path

# the checkout's package, whether or not this Python has slm-rerank installed
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from slm_rerank.llama.judge_model import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
