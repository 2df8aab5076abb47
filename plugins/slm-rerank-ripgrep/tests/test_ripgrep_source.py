from __future__ import annotations

import slm_rerank_ripgrep

from slm_rerank.testing import CandidateSourceContract


class TestSource(CandidateSourceContract):
    plugin = slm_rerank_ripgrep
    distribution = "slm-rerank-ripgrep"
    names = {"ripgrep"}
