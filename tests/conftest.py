from __future__ import annotations

from pathlib import Path

import pytest
from search_fixtures import isolate


@pytest.fixture(autouse=True)
def isolated_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Keep user config and cache inside the test's own folder; returns the cache folder."""
    return isolate(monkeypatch, tmp_path)
