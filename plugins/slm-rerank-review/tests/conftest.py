"""The review's tests: the user's config, cache and plugins kept out; a fake llama-server.

The fake answers as llama-server does (the recorded payloads of slm_rerank.testing.recordings): its
``/completion`` generates the answer a test sets for a chunk (a request for many tokens), or
gives the top-20 first tokens of a yes/no verdict (``n_predict`` 1) with the probability a
test sets for each judge.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from pytest_httpserver import HTTPServer

# the helpers beside this file (review_fakes.py): not a package, and tests/ has a conftest too
sys.path.insert(0, str(Path(__file__).resolve().parent))

from review_fakes import COLOURS, RETRY, FakeLlama, serve  # noqa: E402

from slm_rerank.testing.helpers import git_init, write_tree  # noqa: E402

# Every test: the user's config, cache, plugins and environment names kept out (autouse).
from slm_rerank.testing.isolation import isolated_home  # noqa: E402, F401


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = git_init(tmp_path / "project")
    write_tree(root, {"src/retry.py": RETRY, "src/colours.py": COLOURS})
    return root.resolve()


@pytest.fixture
def fake_llama(httpserver: HTTPServer) -> FakeLlama:
    return serve(httpserver)
