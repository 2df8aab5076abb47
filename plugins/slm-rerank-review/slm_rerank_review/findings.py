"""What a review produces: the model's candidate findings, the reported ones, the dropped ones.

A candidate is only what the model said; it becomes a :class:`Finding` when every gate
passed, else a :class:`Dropped` with one stable :class:`Reason`. Both carry the gate scores,
so ``--json`` (and the trust benchmark) can show why each candidate went where it went.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum


class Reason(str, Enum):
    """Why a candidate finding is not reported; the value is stable (JSON, SARIF, docs)."""

    #: the model quoted nothing (or only whitespace)
    EMPTY_EVIDENCE = "EMPTY_EVIDENCE"
    #: the quote is too short to pin a line (``gates.MIN_EVIDENCE_CHARS`` / ``_WORDS``)
    EVIDENCE_TOO_SHORT = "EVIDENCE_TOO_SHORT"
    #: the quote is not a line, or consecutive lines, of the cited chunk on disk
    EVIDENCE_NOT_FOUND = "EVIDENCE_NOT_FOUND"
    #: the claim names a code identifier the cited chunk does not contain
    CLAIM_SYMBOL_NOT_IN_CHUNK = "CLAIM_SYMBOL_NOT_IN_CHUNK"
    #: the quoted lines hold only comment or string text: words on disk, not code (a
    #: comment that tells the model what to report is quoted exactly)
    EVIDENCE_NOT_CODE = "EVIDENCE_NOT_CODE"
    #: the claim names no code name that the code of its quoted lines holds: nothing in
    #: the claim can be checked against the code it cites
    CLAIM_NAMES_NO_CODE = "CLAIM_NAMES_NO_CODE"
    #: the support judge said the evidence does not prove the claim (or the code contradicts it)
    CLAIM_NOT_SUPPORTED = "CLAIM_NOT_SUPPORTED"
    #: a semantic judge could not answer (no server, timeout, malformed answer)
    SUPPORT_UNVERIFIED = "SUPPORT_UNVERIFIED"
    #: the cited file could not be read (gone, not a regular file, too large, not text)
    CHUNK_UNREADABLE = "CHUNK_UNREADABLE"


@dataclass(frozen=True)
class Candidate:
    """One finding as the model proposed it, citing the chunk it was shown.

    ``start_line``/``end_line`` (1-based, inclusive) are the cited chunk's lines on disk;
    ``evidence`` is the model's quote of one or more of them; ``identifiers`` are the code
    names the model says the claim is about.
    """

    path: str
    start_line: int
    end_line: int
    claim: str
    evidence: str
    identifiers: tuple[str, ...] = ()
    severity: str = "warning"


@dataclass(frozen=True)
class GateScores:
    """What each gate measured; None where the gate did not run (or was turned off)."""

    #: the evidence was found as whole lines of the chunk
    evidence: bool | None = None
    #: every identifier of the claim occurs in the chunk
    identifiers: bool | None = None
    #: the support judge's probability that the evidence proves the claim
    support: float | None = None
    #: the contradiction judge's probability that the code contradicts the claim
    contradiction: float | None = None


@dataclass(frozen=True)
class EvidenceSpan:
    """The lines on disk (1-based, inclusive) the evidence was found as, and their text."""

    start_line: int
    end_line: int
    lines: tuple[str, ...]


@dataclass(frozen=True)
class Finding:
    """A candidate every gate let through: reported, citing ``path:span.start_line``."""

    candidate: Candidate
    span: EvidenceSpan
    scores: GateScores = field(default_factory=GateScores)


@dataclass(frozen=True)
class Dropped:
    """A candidate a gate stopped, with its stable reason and what the gate saw."""

    candidate: Candidate
    reason: Reason
    #: one line for a person: which identifier was missing, which judge failed and why
    detail: str = ""
    scores: GateScores = field(default_factory=GateScores)
