"""Answers recorded from real model servers (llama.cpp, llama-cpp-python, Ollama, vLLM),
with the requests that drew them: what a fake server of a plugin's tests replays.

A file of :data:`WIRE` is one server's answer as it came, or (those recorded by the host's
tests/model/record_wire.py) ``{"recorded_with": ..., "exchanges": [{"request": ...,
"response": ...}, ...]}``. They ship in the wheel.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

#: the folder of recordings, one JSON file per server and route
WIRE = Path(__file__).resolve().parent / "wire"


def recording(name: str) -> Any:
    """The whole file ``name`` of :data:`WIRE`, parsed."""
    return json.loads((WIRE / name).read_text(encoding="utf-8"))


def recorded_answer(name: str, exchange: int = 0) -> Any:
    """The server's answer in exchange ``exchange`` of the recording ``name`` (a file with
    ``exchanges``)."""
    return recording(name)["exchanges"][exchange]["response"]
