"""Fixtures of the calibration tests."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from git_history import History


@pytest.fixture
def history(tmp_path: Path) -> Callable[[str], History]:
    def make(name: str = "repo") -> History:
        return History(tmp_path / name)

    return make
