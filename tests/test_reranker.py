"""Reranker's arguments: a wrong one is a clear error before any model server is asked."""

from __future__ import annotations

import asyncio
import math
import os
import time
import warnings
from pathlib import Path

import pytest
from pytest_httpserver import HTTPServer
from search_fixtures import user_config

import slm_rerank
from slm_rerank.errors import ConfigError
from slm_rerank.report import Citation

#: a port nothing listens on
DEAD_SERVER = "http://127.0.0.1:9"


@pytest.fixture
def reranker(isolated_home: object, httpserver: HTTPServer) -> slm_rerank.Reranker:
    # a server that would answer anything: the point is that it is never asked
    return slm_rerank.Reranker(base_url=httpserver.url_for("/"), cache=False)


def candidate(path: str = "net/retry.py", score: float = 1.0) -> slm_rerank.Candidate:
    return slm_rerank.Candidate(path, 1, 2, "def retry():\n    pass\n", lexical_score=score)


@pytest.mark.parametrize("score", [math.nan, math.inf, -math.inf])
def test_a_lexical_score_that_is_not_a_finite_number_is_refused_naming_the_candidate(
        reranker: slm_rerank.Reranker, httpserver: HTTPServer, score: float) -> None:
    candidates = [candidate("a.py", 2.0), candidate("net/retry.py", score)]

    with pytest.raises(ValueError, match=r"candidates\[1\] \(net/retry\.py:1-2\) has "
                                         r"lexical_score (nan|inf|-inf); give a finite"):
        reranker.rerank_sync("retry", candidates)
    assert not httpserver.log


@pytest.mark.parametrize(("fields", "error", "says"), [
    ({"text": None}, TypeError, r"has a text of type NoneType; give a str"),
    ({"text": b"def retry(): pass"}, TypeError, r"has a text of type bytes; give a str"),
    ({"path": None}, TypeError, r"candidates\[0\]\.path is None"),
    ({"start_line": "1"}, ValueError, r"has lines '1'-2; give ints"),
    ({"start_line": 5, "end_line": 2}, ValueError, r"has lines 5-2; give ints with 1 <="),
    ({"symbol": 7}, TypeError, r"candidates\[0\]\.symbol is 7"),
    ({"lexical_score": 10**400}, ValueError, r"has lexical_score 1000.*give a finite number"),
])
def test_a_candidate_field_of_the_wrong_kind_is_refused_before_the_server_is_asked(
        reranker: slm_rerank.Reranker, httpserver: HTTPServer, fields: dict[str, object],
        error: type[Exception], says: str) -> None:
    given = {"path": "net/retry.py", "start_line": 1, "end_line": 2,
             "text": "def retry():\n    pass\n", **fields}

    with pytest.raises(error, match=says):
        reranker.rerank_sync("retry", [slm_rerank.Candidate(**given)])
    assert not httpserver.log


def test_a_citation_with_a_nan_score_is_refused_too(
        reranker: slm_rerank.Reranker, httpserver: HTTPServer) -> None:
    citation = Citation("net/retry.py", 3, 4, None, score=0.5, lexical_score=math.nan)

    with pytest.raises(ValueError, match=r"candidates\[0\] \(net/retry\.py:3-4\)"):
        reranker.rerank_sync("retry", [citation])
    assert not httpserver.log


@pytest.mark.parametrize("candidates", ["abc", b"abc", 42, {"path": "a.py"}])
def test_candidates_that_are_not_a_list_are_a_type_error_as_for_documents(
        reranker: slm_rerank.Reranker, candidates: object) -> None:
    with pytest.raises(TypeError, match=r"candidates must be a list \(of Candidate or "
                                        r"Citation objects, or a Report\), not"):
        reranker.rerank_sync("retry", candidates)  # type: ignore[arg-type]


def test_an_item_that_is_not_a_candidate_is_a_type_error_naming_its_position(
        reranker: slm_rerank.Reranker) -> None:
    with pytest.raises(TypeError, match=r"candidates\[1\] is a str, not a Candidate"):
        reranker.rerank_sync("retry", [candidate(), "net/retry.py"])  # type: ignore[list-item]


@pytest.mark.parametrize("top_k", [0, -1, True, 2.5])
def test_top_k_below_one_is_a_value_error_as_top_n_is_for_documents(
        reranker: slm_rerank.Reranker, httpserver: HTTPServer, top_k: object) -> None:
    with pytest.raises(ValueError, match="top_k must be a positive integer"):
        reranker.rerank_sync("retry", [candidate()], top_k=top_k)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="top_n must be a positive integer"):
        slm_rerank.rerank_documents("retry", ["def retry(): pass"], top_n=top_k,
                                    base_url=httpserver.url_for("/"))  # type: ignore[arg-type]
    assert not httpserver.log


@pytest.mark.parametrize("query", ["", "   ", None])
def test_an_empty_query_is_a_value_error(reranker: slm_rerank.Reranker, query: object) -> None:
    with pytest.raises(ValueError, match="query must be a non-empty string"):
        reranker.rerank_sync(query, [candidate()])  # type: ignore[arg-type]


def test_a_threshold_above_one_is_refused_like_the_constructors(
        reranker: slm_rerank.Reranker) -> None:
    with pytest.raises(ConfigError, match="threshold"):
        reranker.rerank_sync("retry", [candidate()], threshold=2.0)


def test_a_long_query_over_long_candidates_is_cut_in_time(isolated_home: object) -> None:
    # Every word of a pasted log was tried on every line of every candidate (20,000 words
    # on 200 lines took 2 s a candidate); the query's search terms are at most 40.
    reranker = slm_rerank.Reranker(base_url=DEAD_SERVER, cache=False)
    query = "retry backoff " + " ".join(f"word{i}" for i in range(100_000))
    body = "".join(f"    value_{i} = compute(argument_{i})\n" for i in range(1000))
    candidates = [slm_rerank.Candidate(f"m{i}.py", 1, 1000, body, lexical_score=1.0)
                  for i in range(10)]

    started = time.monotonic()
    result = reranker.rerank_sync(query, candidates)

    assert time.monotonic() - started < 60  # a few seconds; before, minutes
    assert result.degraded  # nothing listens there: the cut ran, the judging could not


def test_a_citation_whose_file_is_a_fifo_is_an_error_not_a_hang(
        reranker: slm_rerank.Reranker, httpserver: HTTPServer, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    os.mkfifo(tmp_path / "retry.py")  # nobody writes it: reading it by name blocks for ever
    monkeypatch.chdir(tmp_path)

    with pytest.raises(FileNotFoundError, match=r"retry\.py: not a regular file"):
        reranker.rerank_sync("retry", [Citation("retry.py", 1, 2, None, 0.5, 1.0)])
    assert not httpserver.log


def test_a_citation_whose_file_is_over_max_file_bytes_is_an_error(
        isolated_home: object, httpserver: HTTPServer, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "big.py").write_text("retry = 1\n" * 100)
    monkeypatch.chdir(tmp_path)
    user_config().write_text("max_file_bytes = 100\n")
    reranker = slm_rerank.Reranker(base_url=httpserver.url_for("/"), cache=False)

    with pytest.raises(FileNotFoundError, match=r"big\.py: huge"):
        reranker.rerank_sync("retry", [Citation("big.py", 1, 2, None, 0.5, 1.0)])
    assert not httpserver.log


def test_rerank_sync_inside_an_event_loop_says_to_await_rerank() -> None:
    reranker = slm_rerank.Reranker(base_url="http://127.0.0.1:9")

    async def inside_a_loop() -> None:
        reranker.rerank_sync("retry", [slm_rerank.Candidate("a.py", 1, 2, "def retry(): ...",
                                                             lexical_score=1.0)])

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(RuntimeError, match=r"inside a running event loop.*await "
                                               r"reranker\.rerank"):
            asyncio.run(inside_a_loop())


def test_a_bad_setting_is_an_error_when_the_reranker_is_made() -> None:
    with pytest.raises(ConfigError, match="threshold"):
        slm_rerank.Reranker(threshold=3.0)
