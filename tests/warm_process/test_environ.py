"""A command's environment is taken and put back by changing only what differs."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from slm_rerank.warm_process import isolation


def test_the_environment_becomes_exactly_the_one_given(monkeypatch: pytest.MonkeyPatch) -> None:
    saved = dict(os.environ)
    monkeypatch.setenv("SLM_TEST_KEPT", "same")
    monkeypatch.setenv("SLM_TEST_CHANGED", "old")
    monkeypatch.setenv("SLM_TEST_GONE", "x")
    wanted = {k: v for k, v in os.environ.items() if k != "SLM_TEST_GONE"}
    wanted.update(SLM_TEST_CHANGED="new", SLM_TEST_ADDED="added")
    try:
        isolation.set_environ(wanted)
        assert dict(os.environ) == wanted
        # what a child process is given is the same environment (putenv/unsetenv done)
        child = subprocess.run(
            [sys.executable, "-c", "import os, json; print(json.dumps(dict(os.environ)))"],
            capture_output=True, text=True, check=True).stdout
        seen = __import__("json").loads(child)
        assert seen.get("SLM_TEST_CHANGED") == "new" and seen.get("SLM_TEST_ADDED") == "added"
        assert "SLM_TEST_GONE" not in seen and seen.get("SLM_TEST_KEPT") == "same"
    finally:
        isolation.set_environ(saved)
    assert dict(os.environ) == saved
