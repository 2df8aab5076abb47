"""The query's intent chooses the question the judge is asked (model/intent.py)."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest
import slm_rerank_ripgrep
from search_fixtures import linear_growth, make_repo

import slm_rerank
from slm_rerank.config import Settings
from slm_rerank.host import Host
from slm_rerank.lexical.terms import extract
from slm_rerank.model.intent import query_intent
from slm_rerank.model.passages import Passage
from slm_rerank.pipeline import SearchRequest, run_search
from slm_rerank.registrations import DocumentScore, ModelProfile, Scorer, ScoreRequest
from slm_rerank.testing import SAMPLE_CHAT_PROFILE


@pytest.mark.parametrize("query, kind", [
    ("where are redirects resolved", "locate"),
    ("how does the session pick a proxy", "locate"),
    ("FITS header card parsing", "locate"),
    ("Pickling a decorated function fails", "change"),
    ("autodoc should skip private members", "change"),
    ("add a timeout to the upload client", "change"),
    ("where does the parser raise on an empty file", "change"),
    ("Traceback (most recent call last):\n  File \"a.py\", line 3, in <module>\n", "change"),
    ("KeyError: 'name' when reading the config", "change"),
    ("Title of an issue\n\n" + "The value comes out shifted by one when the input is large. "
     * 6, "change"),
    ("where are the tests for the retry policy", "tests"),
    ("add a unit test for the parser", "tests"),
    ("which docs describe the config file", "docs"),
    # named, not asked for: the code is what is wanted
    ("napoleon renders the docstring default wrongly", "change"),
    ("the test report headline drops a bracket", "locate"),
    ("fix the fixture teardown order", "change"),
])
def test_each_kind_of_query_gets_its_intent(query: str, kind: str) -> None:
    intent = query_intent(query, extract(query))

    assert intent.kind == kind, intent.why
    assert intent.why


@pytest.mark.parametrize("blank", ["\n", " \n", "\t\r\n"])
def test_the_intent_of_a_query_of_blank_lines_takes_time_linear_in_it(blank: str) -> None:
    terms = extract("retry policy")

    def intent(query: str) -> None:
        query_intent(query, terms)

    ratio = linear_growth(intent, "retry\n" + blank * 500 + "policy",
                          "retry\n" + blank * 4000 + "policy")

    assert ratio < 20, f"8x the blank lines took {ratio:.0f}x the time"


def test_an_error_line_after_blank_lines_is_still_a_traceback() -> None:
    query = "the loader\n\n\n   \n  ValueError: bad header\n"

    assert query_intent(query, extract(query)).why == "the query holds a traceback or error line"


def test_a_profile_with_intent_wordings_asks_each_intents_question() -> None:
    profile = dataclasses.replace(SAMPLE_CHAT_PROFILE, intents=(
        ("change", "Is this the code to edit?"), ("locate", "Does this code do it?")))

    change = profile.for_intent("change")
    locate = profile.for_intent("locate")

    assert "Is this the code to edit?" in change.render_completion("q", "d")
    assert "Does this code do it?" in locate.render_completion("q", "d")
    # a different question is a different prompt: the score cache never mixes them
    assert len({profile.prompt_version, change.prompt_version, locate.prompt_version}) == 3
    # an intent it does not word, and no intent, keep its one instruction
    assert profile.for_intent("docs") is profile and profile.for_intent(None) is profile


@pytest.mark.parametrize("kind, line", [("test", "Kind: test code"),
                                        ("source", "Kind: source code"),
                                        ("doc", "Kind: documentation")])
def test_a_passage_tells_the_judge_what_kind_of_file_it_is(kind: str, line: str) -> None:
    passage = Passage("pkg/mod.py", 3, 9, "retry", "def retry():\n    pass", kind=kind)

    text = passage.document(0).text

    assert text.splitlines()[:2] == ["File: pkg/mod.py:3-9 (retry)", line]
    assert text.endswith("def retry():\n    pass")


def test_a_passage_of_unknown_kind_has_no_kind_line() -> None:
    text = Passage("notes", 1, 2, None, "hello").document(0).text

    assert text == "File: notes:1-2\nhello"


class Asking:
    """A serverless scorer that says yes to source and no to tests, and records the
    instruction and the documents it was asked about; and a profile that words intents."""

    asked: list[str] = []
    documents: list[str] = []

    @staticmethod
    @slm_rerank.hookimpl
    def register_scorers(register: Callable[[Scorer], None]) -> None:
        async def score(request: ScoreRequest) -> AsyncIterator[DocumentScore]:
            Asking.asked.append(request.profile.instruction if request.profile else "")
            for i, document in enumerate(request.documents):
                Asking.documents.append(document.text)
                yield DocumentScore(i, 0.6)

        register(Scorer("asking", "records what it is asked", score, needs_endpoint=False))

    @staticmethod
    @slm_rerank.hookimpl
    def register_model_profiles(register: Callable[[ModelProfile], None]) -> None:
        register(dataclasses.replace(SAMPLE_CHAT_PROFILE, name="worded", intents=(
            ("change", "Must this code change to fix it?"),
            ("locate", "Is this the code that does it?"))))


def test_a_search_asks_the_question_of_its_intent_and_reports_it_with_the_kind_prior(
        tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", {
        "net/retry.py": "def retry_backoff():\n    return 2\n",
        "tests/test_retry.py": "def test_retry_backoff():\n    assert retry_backoff()\n"})
    settings = dataclasses.replace(Settings(), scorer="asking", model="worded",
                                   score_cache=False)
    host = Host.with_plugins(settings, Asking, slm_rerank_ripgrep)
    Asking.asked.clear()
    Asking.documents.clear()

    report = run_search(SearchRequest(query="retry backoff should give up", root=repo,
                                      fast=False), host)

    assert Asking.asked == ["Must this code change to fix it?"]
    assert any("Kind: test code" in d for d in Asking.documents)
    assert report.model is not None and report.model.intent == "change"
    assert "'should'" in (report.model.intent_reason or "")
    doc = report.to_dict()
    by_path = {c.path: c for c in report.results}
    assert by_path["tests/test_retry.py"].kind == "test"
    assert by_path["tests/test_retry.py"].prior == pytest.approx(-0.693, abs=1e-3)
    assert by_path["net/retry.py"].prior == 0.0
    # same verdict for both: the prior keeps the test below the source
    assert [c.path for c in report.results] == ["net/retry.py", "tests/test_retry.py"]
    assert any(n.startswith("intent change: ") for n in report.notes)
    assert any(n.startswith("file-kind prior: judged chunks of test files -0.69")
               for n in report.notes), report.notes
    assert doc["model"]["intent"] == "change"
    assert [(r["kind"], r["prior"]) for r in doc["results"]] == [("source", 0.0),
                                                                  ("test", -0.6931)]
