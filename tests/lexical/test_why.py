"""What ``why`` says of each feature: the query's terms the file matched and the values the
ranker read, in words ("path names 'templating'", "defines 'find_best_app'")."""

from __future__ import annotations

import math

import pytest

from slm_rerank.lexical.chunking import Chunk
from slm_rerank.lexical.features import FEATURES
from slm_rerank.lexical.file_scores import FileEvidence
from slm_rerank.lexical.ranker import Placed
from slm_rerank.lexical.scores import ScoredChunk, TermStats
from slm_rerank.lexical.terms import extract
from slm_rerank.lexical.why import reasons, why_line

TERMS = extract("how does the flask cli find_best_app in templating")
#: the rarity of each term, by literal: 'find_best_app' rarest, 'templating' next
STATS = TermStats({t.literal: {"find_best_app": 9.0, "templating": 6.0}.get(t.root, 1.0)
                   for t in TERMS.terms})
PATH = "src/flask/templating.py"
EVIDENCE = FileEvidence(PATH, path_score=4.0, body_score=2.0,
                        matched={"templating": 4.0, "find_best_app": 1.5, "flask": 0.5},
                        path_terms=["templating"])
BEST = ScoredChunk(PATH, Chunk(10, 29, "Environment.find_best_app", ("find_best_app",)), 6.0,
                   ["find_best_app", "templating"])


def placed(values: dict[str, float]) -> Placed:
    """A file whose every feature moved it, in FEATURES order, by what ``values`` say."""
    full = tuple(values.get(name, 0.0) for name in FEATURES)
    return Placed(PATH, 1.0, 0.5, tuple((name, 1.0) for name in values), full)


def said(values: dict[str, float]) -> dict[str, str]:
    return {r.feature: r.says for r in reasons(placed(values), EVIDENCE, BEST, TERMS, STATS)}


def test_each_feature_says_the_terms_and_values_it_read() -> None:
    words = said({
        "names_file": 0.6, "body": 0.3, "declares": 0.5, "enclosing": 0.0, "mentions": 0.2,
        "kind_test": 1.0, "kind_doc": 0.0, "chunk_comment": 0.8, "chunk_lines": math.log1p(20),
        "changes": math.log1p(12), "recent": 1 / (1 + 3), "together": 0.0,
        "lexical_rank": math.log1p(2), "named_path": 0.0, "rare_term": 1.0,
        "depth": 2.0, "file_lines": math.log1p(140),
    })

    assert words == {
        "names_file": "path names 'templating'",
        "body": "body mentions 'find_best_app', 'flask'",
        "declares": "defines 'find_best_app'",
        "enclosing": "its class is no query term",
        "mentions": "its best chunk mentions 'find_best_app', 'templating'",
        "kind_test": "a test file",
        "kind_doc": "not a doc page",
        "chunk_comment": "docstring or comment of 'Environment.find_best_app' (80 % of the "
                         "chunk)",
        "chunk_lines": "its best chunk is 20 lines long",
        "changes": "changed in 12 recent commits",
        "recent": "last changed 3 commits ago",
        "together": "never changed with files the query names",
        "lexical_rank": "lexical rank 3",
        "named_path": "the query names no file of it",
        "rare_term": "matches 'find_best_app', the query's rarest word here",
        "depth": "2 folders deep",
        "file_lines": "the file is 140 lines long",
    }


def test_the_path_names_the_querys_rarest_word() -> None:
    evidence = FileEvidence(PATH, matched={"find_best_app": 3.0},
                            path_terms=["find_best_app"])
    found = reasons(placed({"names_file": 0.9}), evidence, BEST, TERMS, STATS)

    assert [r.says for r in found] == ["path names 'find_best_app' (rare here)"]


@pytest.mark.parametrize(("feature", "value", "says"), [
    ("kind_test", 0.0, "not a test file"),
    ("chunk_comment", 0.0, "its best chunk is code, no comment"),
    ("changes", 0.0, "not changed in recent commits"),
    ("recent", 1.0, "changed in the latest commit"),
    ("recent", 0.0, "not changed lately"),
    ("named_path", 1.0, "the query names this file"),
    ("together", math.log1p(2), "changed with files the query names, 2 times"),
    ("coverage", 0.75, "has 3 of the query's 7 terms (75 % of their weight)"),
    ("test_like", 1.0, "a test, benchmark or example by its path"),
    ("vendored", 0.0, "not vendored code"),
    ("name_stem", 0.4, "file name shares a stem with 'templating'"),
    ("messages", 0.5, "the messages of the commits that changed it say the query's words "
                      "(50 % of the file they say most of)"),
    ("messages", 0.0, "no message of a commit that changed it says the query's words"),
])
def test_a_feature_is_said_whichever_way_it_went(feature: str, value: float,
                                                  says: str) -> None:
    assert said({feature: value}) == {feature: says}


def test_the_messages_reason_names_the_words_the_commits_said() -> None:
    values = tuple(0.8 if n == "messages" else 0.0 for n in FEATURES)
    one = Placed(PATH, 1.0, 0.5, (("messages", 1.2),), values, ("wrap", "cell"))
    many = Placed(PATH, 1.0, 0.5, (("messages", 1.2),), values,
                  ("wrap", "cell", "column", "width"))

    assert [r.says for r in reasons(one, EVIDENCE, BEST, TERMS, STATS)] == [
        "the messages of the commits that changed it say 'wrap', 'cell' "
        "(80 % of the file they say most of)"]
    assert [r.says for r in reasons(many, EVIDENCE, BEST, TERMS, STATS)] == [
        "the messages of the commits that changed it say 'wrap', 'cell', 'column' (+1) "
        "(80 % of the file they say most of)"]


def test_the_verbose_line_lists_each_reason_with_its_effect() -> None:
    found = reasons(Placed(PATH, 1.0, 0.5, (("names_file", 1.84), ("kind_test", -0.9)),
                           tuple(1.0 if n == "kind_test" else 0.6 for n in FEATURES)),
                    EVIDENCE, BEST, TERMS, STATS)

    assert why_line(PATH, found) == (f"why {PATH}: path names 'templating' +1.8; "
                                     "a test file -0.9")


def test_the_new_features_say_their_values() -> None:
    words = said({"file_bm25": 0.5, "file_bm25_rank": math.log1p(2), "digit_name": 0.0,
                  "stub": 1.0, "bundle": 0.0})
    assert words == {
        "stub": "a type declaration stub",
        "bundle": "not a generated copy of the sources",
        "file_bm25": "whole-file match 50 % of the best",
        "file_bm25_rank": "whole-file match rank 3",
        "digit_name": "no word with digits of the file name is in the query",
    }
    digits = reasons(Placed("pkg/parser_v2.go", 1.0, 0.5, (("digit_name", 1.0),),
                            tuple(1.0 if n == "digit_name" else 0.0 for n in FEATURES)),
                     None, None, TERMS, STATS)
    assert [r.says for r in digits] == ["file name's 'v2' is in the query"]


def test_the_test_partner_and_first_line_features_say_their_values() -> None:
    assert said({"test_partner": 0.5, "test_partner_top": 1.0, "first_line": 0.25,
                 "first_line_top": 0.0}) == {
        "test_partner": "a test file named for it matches the query (50 % of the best)",
        "test_partner_top": "the best-matching test file is named for it",
        "first_line": "the query's first line alone scores it 25 % of the best",
        "first_line_top": "not first for the query's first line alone",
    }
    assert said({"test_partner": 0.0, "test_partner_top": 0.0, "first_line": 0.0,
                 "first_line_top": 1.0}) == {
        "test_partner": "no test file named for it matches the query",
        "test_partner_top": "the best-matching test file is not named for it",
        "first_line": "the query's first line alone does not find it",
        "first_line_top": "first for the query's first line alone",
    }
