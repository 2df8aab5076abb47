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

# The real llama-server fixtures (and the LLAMA_SERVER=skip rule), for every test folder.
from live_fixtures import (  # noqa: E402, F401
    cache,
    in_process_api,
    llama_server,
    llama_server_factory,
    pytest_collection_modifyitems,
)

# `slm-rerank serve-api` as a subprocess, for tests/servers and tests/live/servers alike.
from serve_api_fixtures import serve_api  # noqa: E402, F401
