from __future__ import annotations

import signal
from pathlib import Path

import pytest
from search_fixtures import REPO_FILES, make_repo

# Every test: the user's config, cache, plugins and environment names kept out (autouse).
from slm_rerank.testing.isolation import isolated_home  # noqa: F401


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A small git repository (``search_fixtures.REPO_FILES``): retry code and its neighbours."""
    return make_repo(tmp_path / "repo", REPO_FILES)

# `slm-rerank serve-api` as a subprocess or in process, for tests/servers and
# tests/live/servers alike.
# Extra threaded HTTP servers beside pytest-httpserver's, for the model-stage tests.
from model_helpers import servers  # noqa: E402, F401
from serve_api_fixtures import in_process_api, serve_api  # noqa: E402, F401


def pytest_configure(config: pytest.Config) -> None:
    """A suite started under ``nohup`` inherits SIGHUP ignored, and so would every process
    it starts: the tests of what a closed terminal does to a run need it at its default."""
    if signal.getsignal(signal.SIGHUP) is signal.SIG_IGN:
        signal.signal(signal.SIGHUP, signal.SIG_DFL)
