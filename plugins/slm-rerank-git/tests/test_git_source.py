from __future__ import annotations

import slm_rerank_git

from slm_rerank.testing import CandidateSourceContract


class TestSource(CandidateSourceContract):
    plugin = slm_rerank_git
    distribution = "slm-rerank-git"
    names = {"git"}
