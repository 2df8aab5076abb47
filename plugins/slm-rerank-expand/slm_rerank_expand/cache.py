"""Expansions kept for 30 days in ``expansions.json`` in the cache folder.

One small JSON file: a query is expanded once per model and prompt, and an entry is a
handful of words. A file that cannot be read or parsed is a miss, never an error (the next
answer rewrites it); writes go to a temporary file renamed over the old one, so a reader
never sees half a file.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
import time
from pathlib import Path

from slm_rerank.plugin_kit import sha256

FILE_NAME = "expansions.json"
#: how long an answer is kept: a model's vocabulary for a query does not go stale quickly
MAX_AGE_SECONDS = 30 * 24 * 3600


def cache_key(model: str, prompt_version: str, query: str) -> str:
    """The entry of one question: model id, prompt version and the query, case and spacing
    normalised (``Where  are RETRIES`` asks what ``where are retries`` asks)."""
    normalised = " ".join(query.lower().split())
    return sha256("\0".join((model, prompt_version, normalised)).encode()).hexdigest()


class ExpansionCache:
    """``get(key)`` the words kept for a key, or None; ``put(key, words)`` keeps them."""

    def __init__(self, folder: Path, now: float | None = None) -> None:
        self.path = folder / FILE_NAME
        self._now = now

    def now(self) -> float:
        return self._now if self._now is not None else time.time()

    def _load(self) -> dict[str, dict]:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        entries = data.get("entries") if isinstance(data, dict) else None
        return entries if isinstance(entries, dict) else {}

    def get(self, key: str) -> list[str] | None:
        entry = self._load().get(key)
        if not isinstance(entry, dict):
            return None
        words, at = entry.get("terms"), entry.get("at")
        if (not isinstance(words, list) or not all(isinstance(w, str) for w in words)
                or not isinstance(at, (int, float)) or self.now() - at > MAX_AGE_SECONDS):
            return None
        return words

    def put(self, key: str, words: list[str]) -> None:
        """Keep ``words``; expired entries are dropped. A folder we cannot write is skipped:
        the cache saves a call, it must never cost a search."""
        now = self.now()
        entries = {k: v for k, v in self._load().items()
                   if isinstance(v, dict) and isinstance(v.get("at"), (int, float))
                   and now - v["at"] <= MAX_AGE_SECONDS}
        entries[key] = {"terms": words, "at": now}
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            handle, temp = tempfile.mkstemp(dir=self.path.parent, prefix=".expansions-",
                                            suffix=".tmp")
            try:
                with os.fdopen(handle, "w", encoding="utf-8") as out:
                    json.dump({"version": 1, "entries": entries}, out)
                os.replace(temp, self.path)
            except BaseException:
                with contextlib.suppress(OSError):
                    os.unlink(temp)
                raise
        except OSError:
            return
