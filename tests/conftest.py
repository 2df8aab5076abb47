from __future__ import annotations

from pathlib import Path

import pytest
from search_fixtures import REPO_FILES, isolate, make_repo


@pytest.fixture(autouse=True)
def isolated_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Keep user config, cache and plugins out of the test; returns the cache folder."""
    return isolate(monkeypatch, tmp_path)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A small git repository (``search_fixtures.REPO_FILES``): retry code and its neighbours."""
    return make_repo(tmp_path / "repo", REPO_FILES)

# `slm-rerank serve-api` as a subprocess or in process, for tests/servers and
# tests/live/servers alike.
# Extra threaded HTTP servers beside pytest-httpserver's, for the model-stage tests.
from model_helpers import servers  # noqa: E402, F401
from serve_api_fixtures import in_process_api, serve_api  # noqa: E402, F401
