"""The documents API with the real llama-server as its judge."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import slm_rerank


def test_the_real_server_judges_plain_documents_with_the_yes_no_scorer(
        llama_server: Any, tmp_path: Path) -> None:
    docs = ["To rotate an API key, open Settings > Security and press Rotate.",
            "Our office is closed on public holidays.",
            {"id": "k", "text": "API keys expire after 90 days unless rotated."}]

    result = slm_rerank.rerank_documents("how do I rotate an API key?", docs,
                                         base_url=llama_server.base_url, cache=False)

    assert result.degraded is None, result.degraded
    assert result.endpoint == llama_server.base_url and result.scorer == "yesno"
    assert result.profile == "gemma-base"
    assert sorted(r.index for r in result) == [0, 1, 2]
    assert all(r.score is not None and 0.0 < r.score < 1.0 for r in result)
    assert [r.score for r in result] == sorted((r.score for r in result), reverse=True)
    assert next(r for r in result if r.id == "k").document is docs[2]
