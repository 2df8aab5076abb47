"""What the model stage did for one query: its verdicts, and how they were obtained.

``stage.judge`` and ``stage.judge_documents_async`` return a ``Judgement``;
``fusion.apply_verdicts`` places its verdicts in the lexical order, and the report says
from it which server, profile and scorer ran.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from slm_rerank.model.intent import Intent
from slm_rerank.model.judge_budget import TokenUse
from slm_rerank.model.profiles import ProfileChoice
from slm_rerank.model.scoring import EndpointUse
from slm_rerank.registrations import DocumentScore, Endpoint


@dataclass
class Judgement:
    """What the model stage did for one query."""

    #: chunk index -> the model's verdict
    scores: dict[int, DocumentScore] = field(default_factory=dict)
    endpoint: Endpoint | None = None
    profile: ProfileChoice | None = None
    scorer: str | None = None
    #: chunks sent to the model (after de-duplication and the cache)
    sent: int = 0
    cache_hits: int = 0
    model_ms: float = 0.0
    degraded: str | None = None
    notes: list[str] = field(default_factory=list)
    #: every server the chunks were spread over (``endpoint`` is the first)
    endpoints: list[Endpoint] = field(default_factory=list)
    #: how many verdicts each server gave, and which failed mid-run
    uses: list[EndpointUse] = field(default_factory=list)
    #: chunk index -> why the server would not judge it (its prompt was still longer than
    #: the server's context); such a chunk has no verdict
    skipped: dict[int, str] = field(default_factory=dict)
    #: what a person must be told without -v (chunks left unjudged, and which; a score
    #: cache the disk refused)
    warnings: list[str] = field(default_factory=list)
    #: how the judged text differs from what was given (chunks shortened after their
    #: tokens were counted), for the documents API to pass on; also in ``notes``
    shortened: list[str] = field(default_factory=list)
    #: what the judge was asked, by the query's intent (``model/intent.py``); None for the
    #: documents API and for a profile that words one question for every intent
    intent: Intent | None = None
    #: what the verdicts cost on the server, and what a budget or the cascade left out
    tokens: TokenUse = field(default_factory=TokenUse)
