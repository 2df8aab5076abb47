"""What a code query asks for, so that the judge is asked a question it can answer.

"Does this chunk help answer the query?" is true of every test or doc page that mentions
the query's words, and a small judge takes it literally. The question has to fit the
query:

- ``change``: a bug report or a task (a traceback, "fails", "should", "add ...", a pasted
  issue of several lines). Would fixing it mean editing this code?
- ``locate``: a question or a bare description ("where are redirects resolved", "FITS
  header parsing"). Is this the code that implements or defines it?
- ``tests`` / ``docs``: the query asks for tests or documentation (the lexical stage's own
  reading of the query, ``QueryTerms.asks_tests`` / ``asks_docs``). Is this that?

A profile words each question for its model (``ModelProfile.intents``); a profile without
them keeps its one instruction whatever the intent.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from slm_rerank.lexical.terms import QueryTerms
from slm_rerank.registrations import INTENTS

__all__ = ["INTENTS", "Intent", "query_intent"]

#: a pasted traceback or error line: someone is reporting a failure
# [^\S\n], not \s, after ^: \s crosses newlines, so each of a run of blank lines started a
# scan of all the rest (32,000 newlines took 31 s, outside the model stage's deadline)
_TRACEBACK = re.compile(r"Traceback \(most recent call last\)|^[^\S\n]*File \"[^\"]+\", line \d+|"
                        r"^[^\S\n]*\w+(?:Error|Exception|Warning):", re.MULTILINE)
#: words of a bug report or of a request for a change
_CHANGE_WORDS = re.compile(
    r"\b(?:fix(?:e[sd])?|bugs?|broken|breaks?|crash(?:es|ed)?|errors?|exceptions?|"
    r"fail(?:s|ed|ing|ure|ures)?|wrong(?:ly)?|incorrect(?:ly)?|regression|raises?|raised|"
    r"should(?:n't)?|doesn't|does\s+not|don't|do\s+not|isn't|is\s+not|can't|cannot|"
    r"unable|won't|ignores?|ignored|missing|unexpected(?:ly)?|inconsistent|"
    r"add|allow|support|implement|make|deprecate|remove|rename|change|improve|avoid|"
    r"warns?|warning)\b", re.IGNORECASE)
#: how a question starts
_QUESTION = re.compile(r"^\s*(?:where|how|what|which|who|is\s+there|are\s+there|does|do|"
                       r"show\s+me|find)\b", re.IGNORECASE)
#: a query this long, over several lines, is a pasted issue rather than a question
_ISSUE_CHARS = 300


def reads_as_issue(query: str) -> bool:
    """A pasted issue or report (several lines, longer than a question) rather than a
    one-line query."""
    return len(query) > _ISSUE_CHARS and "\n" in query.strip()


@dataclass(frozen=True)
class Intent:
    """One query's intent and the evidence for it, in words for ``-v`` and JSON."""

    kind: str
    why: str


def query_intent(query: str, terms: QueryTerms) -> Intent:
    """The intent of a code query (see the module docstring); decided in this order:
    tests or docs asked for in its first line (not merely named: "docstring" is code, and a
    test runner's issues say "test" throughout), a traceback, a pasted issue, a question
    without words of a failure, words of a failure or a change, else ``locate``."""
    if terms.asks_tests:
        return Intent("tests", "the query asks for tests")
    if terms.asks_docs:
        return Intent("docs", "the query asks for documentation")
    if _TRACEBACK.search(query):
        return Intent("change", "the query holds a traceback or error line")
    if reads_as_issue(query):
        return Intent("change", "the query reads as a whole issue (several lines)")
    words = _CHANGE_WORDS.search(query)
    if _QUESTION.match(query) and not words:
        return Intent("locate", "the query is a question")
    if words:
        return Intent("change", f"the query reports a fault or asks for a change "
                                f"({words.group(0).lower()!r})")
    return Intent("locate", "the query describes what to find")
