"""The semantic gates, best effort: does the evidence prove the claim, does the code deny it.

Both are the calibrated yes/no judge of a search (``slm_rerank.arerank_documents``: the
same server discovery, profile, scorer and score cache), each asked its own question in
place of the relevance instruction. One request per gate carries every finding, so the
server's slots judge them together. A judge that cannot answer a finding (no server, a
timeout, an answer that cannot be read, no verdict in its top-K) leaves it unverified:
``SUPPORT_UNVERIFIED``, never reported as supported.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import slm_rerank
from slm_rerank.errors import SlmRerankError
from slm_rerank.plugin_kit import command_host
from slm_rerank_review.findings import Finding

SUPPORT_INSTRUCTION = (
    "Judge whether the Document proves the claim in the Query: its Evidence lines, read "
    "with the Code around them, show that the claim is true. Answer only \"yes\" or \"no\".")
CONTRADICTION_INSTRUCTION = (
    "Judge whether the Document contradicts the claim in the Query: its Code shows that "
    "the claim is false. Answer only \"yes\" or \"no\".")
#: the query each judge is asked with; the finding's claim goes in the document, so one
#: request judges every finding
SUPPORT_QUERY = "Is the claim true of this code, as its evidence shows?"
CONTRADICTION_QUERY = "Does this code show that the claim is false?"
#: a finding is supported above this probability, and vetoed at or above the other
SUPPORT_MIN = 0.5
CONTRADICTION_VETO = 0.5
#: the scorer that answers both questions
JUDGE_SCORER = "yesno"
#: characters of the chunk shown around the evidence
CODE_CHARS = 4_000
#: who sets the judges' own settings, as a settings origin (``Host.with_overrides``)
JUDGES_WHERE = "the review's judges ({key})"


@dataclass(frozen=True)
class Verdicts:
    """One judge's probability for each finding (None: no verdict), and why any is missing."""

    probabilities: tuple[float | None, ...]
    #: why some findings have no verdict; None when all have one
    failure: str | None = None


def judges_host(root: Path, **flags: Any) -> Any:
    """The host the judges ask with: ``command_host``'s, without the user's cascade and
    budget. Those say how much of a search's head is judged; here they would leave findings
    without the verdict each needs (the cascade stops at the first clear yes). The deadline
    passed to ``judge`` still bounds them."""
    return command_host(root, **flags).with_overrides(
        JUDGES_WHERE, cascade=False, budget_tokens=None, budget_seconds=None)


def judged_text(finding: Finding, chunk_text: str) -> str:
    """What a judge reads about one finding: the claim, the evidence lines, the chunk."""
    span = finding.span
    candidate = finding.candidate
    evidence = "\n".join(span.lines)
    return (f"Claim: {candidate.claim}\n\n"
            f"Evidence ({candidate.path}:{span.start_line}-{span.end_line}):\n{evidence}\n\n"
            f"Code ({candidate.path}:{candidate.start_line}-{candidate.end_line}):\n"
            f"{chunk_text[:CODE_CHARS]}")


def judge(host: Any, texts: Sequence[str], *, instruction: str, query: str,
          deadline: float) -> Verdicts:
    """One judge's verdicts on ``texts`` within ``deadline`` (``time.monotonic()``)."""
    if not texts:
        return Verdicts(())
    left = deadline - time.monotonic()
    if left <= 0:
        return Verdicts((None,) * len(texts), "the review's deadline passed before the judge "
                                              "was asked")
    try:
        # the yes/no judge whatever the search's scorer is: a rerank API or a listwise
        # judge ignores the instruction and would score relevance, not support
        result = slm_rerank.rerank_documents(query, list(texts), host=host, timeout=left,
                                             instruction=instruction, scorer=JUDGE_SCORER)
    except SlmRerankError as exc:
        # a server that answers oddly, a chat endpoint the profile has no layout for: the
        # findings stay unverified, the review goes on
        return Verdicts((None,) * len(texts), str(exc))
    by_index: dict[int, float | None] = {}
    for ranked in result.results:
        score = ranked.score
        # P = 0.5 exactly with neither answer word in the top-K is no verdict
        if score is not None and ranked.note and ranked.note.startswith("neither"):
            score = None
        by_index[ranked.index] = score
    probabilities = tuple(by_index.get(i) for i in range(len(texts)))
    failure = result.degraded
    if failure is None and any(p is None for p in probabilities):
        failure = "the judge gave no verdict (neither yes nor no among its likeliest answers)"
    return Verdicts(probabilities, failure)
