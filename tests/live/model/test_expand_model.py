"""A short generation and query expansion asked of the real llama-server."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from model_helpers import generate

import slm_rerank
from slm_rerank.host import Host
from slm_rerank.registrations import Endpoint

#: How long a request to the shared real server may take before a test calls it hung. The
#: tests below are about what the server answers, not how fast: on two busy cores the
#: shared server may still be finishing requests an earlier test abandoned at its deadline,
#: and 8 tokens then take several seconds (a fixed 5 s failed on a busy machine).
REAL_SERVER_SECONDS = 120.0


def test_real_expansion_adds_model_words_at_half_weight(
        llama_server: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # about what expansion adds, not how fast: --timeout is the run's, and generous
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "cache.py").write_text("def invalidate(cache):\n    cache.clear()\n")
    host = Host.from_environment(start=repo, flags={"base_url": llama_server.base_url,
                                                    "cache_dir": str(tmp_path / "cache"),
                                                    "timeout": REAL_SERVER_SECONDS})
    report = slm_rerank.search("how is the cache invalidated", repo, fast=True, host=host,
                               expand=True, caller="test")
    added = [n for n in report.notes if n.startswith("expander llm")]
    assert added and "failed" not in added[0], report.notes
    assert [c.path for c in report.results][:1] == ["cache.py"]
    assert (tmp_path / "cache" / "expansions.json").is_file()


def test_real_llama_cpp_generates_a_short_line(llama_server: Any) -> None:
    endpoint = Endpoint(llama_server.base_url, "llama.cpp", llama_server.model_id)
    text = generate(endpoint, "Colours: red, green,", max_tokens=8,
                    timeout=REAL_SERVER_SECONDS)
    assert text.strip() and "\n" not in text
