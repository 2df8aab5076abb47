from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from search_fixtures import isolate


@pytest.fixture(autouse=True)
def isolated_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Keep user config and cache inside the test's own folder; returns the cache folder."""
    return isolate(monkeypatch, tmp_path)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A git repository with a retry module and an unrelated one."""
    root = tmp_path / "repo"
    (root / "src").mkdir(parents=True)
    (root / "src" / "retry.py").write_text("def backoff(attempt):\n    return 2 ** attempt\n")
    (root / "src" / "colour.py").write_text("RED = 'red'\n")
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    return root
