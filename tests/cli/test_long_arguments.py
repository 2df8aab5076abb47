"""An error about a huge argument is one short line: the argument is quoted by its first
characters and its length, never echoed whole (click's own usage errors included)."""

from __future__ import annotations

from pathlib import Path

import pytest
from search_fixtures import cli

#: an argument of 100 KB
LONG = "a" * 100_000


@pytest.mark.parametrize(("args", "status"), [
    (("--root", "/no" + LONG, "-q", "x"), 2),
    (("-q", "x", "--format", LONG), 2),
    (("-q", "x", "-k", LONG), 2),
    (("-q", "x", "-e", LONG), 2),
    ((f"--{LONG}",), 2),
    (("cache", LONG), 2),
    (("calibrate", "--weights", LONG, "."), 2),
    (("config", "set", LONG, "1"), 2),
    (("bench", "--cases", "/no" + LONG), 1),
    (("serve-api", "--api-key-env", LONG), 1),
])
def test_an_error_quotes_a_long_argument_cut_not_whole(tmp_path: Path, args: tuple[str, ...],
                                                        status: int) -> None:
    env = {"HOME": str(tmp_path), "XDG_CONFIG_HOME": str(tmp_path / "config"),
           "SLM_RERANK_CACHE_DIR": str(tmp_path / "cache")}
    run = cli(*args, cwd=tmp_path, env=env)

    assert run.returncode == status
    assert run.stderr.startswith("slm-rerank: error: ")
    assert run.stderr.count("\n") == 1, run.stderr[:300]
    assert len(run.stderr) < 1000, run.stderr[:300]
    assert "... (10000" in run.stderr  # what was cut, and how long it was
    assert run.stdout == ""
