"""The learned order's history is looked up beside the sources (``lexical/ordering.py``):
the same answers and notes, its git processes while rg runs, none for a query that needs no
history."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest
from git_history import History, git_stepping_in
from search_fixtures import search

from slm_rerank.config import Settings
from slm_rerank.lexical import history, ordering
from slm_rerank.lexical.terms import extract


@pytest.fixture
def repo(tmp_path: Path) -> History:
    repo = History(tmp_path / "repo")
    repo.commit("one", {"pkg/retry.py": "def retry():\n    return backoff()\n",
                        "pkg/backoff.py": "def backoff():\n    return 2\n"})
    repo.commit("two", {"pkg/retry.py": "def retry():\n    return backoff() + 1\n"})
    repo.commit("three", {"pkg/client.py": "from pkg.retry import retry\n"})
    return repo


def answer(root: Path, cache: Path) -> tuple[list[tuple[Any, ...]], list[str]]:
    report = search(root, "retry backoff", cache=cache, chunks=True)
    return ([(c.path, c.start_line, c.score, c.matched_terms) for c in report.results],
            report.notes)


def test_a_warm_search_takes_its_history_from_the_lookup_beside_the_sources(
        repo: History, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cache = tmp_path / "cache"
    answer(repo.root, cache)  # cold: the log is read (after the ranking) and kept
    where: list[str] = []
    real = history.kept_history

    def kept(*args: Any, **kwargs: Any) -> Any:
        where.append(threading.current_thread().name)
        return real(*args, **kwargs)

    monkeypatch.setattr(history, "kept_history", kept)
    monkeypatch.setattr(history, "read_history", lambda *a, **k: pytest.fail("read again"))
    warm = answer(repo.root, cache)
    monkeypatch.undo()
    monkeypatch.setattr(ordering, "read_ahead", lambda *args: None)  # as before
    history.forget()
    without = answer(repo.root, cache)

    assert where == ["slm-rerank-history"]
    assert warm == without
    assert any(note.startswith("order: learned ranker") for note in warm[1])


@pytest.mark.parametrize("query", ["retry backoff tests", "retry backoff docs",
                                   "what tests cover retry backoff",
                                   "retry backoff test cases", "fixtures for retry backoff"])
def test_a_query_about_tests_or_docs_looks_up_no_history(tmp_path: Path, query: str) -> None:
    assert ordering.read_ahead(tmp_path, tmp_path / "cache", extract(query), Settings()) is None


def test_a_report_that_only_names_tests_is_put_in_the_learned_order(
        repo: History, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    asks = search(repo.root, "tests for retry backoff", cache=cache)
    names = search(repo.root, "retry backoff fails when the tests run twice", cache=cache)

    assert any(n.startswith("order: fixed lexical factors (the query asks for tests")
               for n in asks.notes)
    assert any(n.startswith("order: learned ranker") for n in names.notes)


def test_without_a_cache_folder_or_the_learned_order_no_history_is_looked_up_ahead(
        tmp_path: Path) -> None:
    terms, cache = extract("retry backoff"), tmp_path / "cache"

    assert ordering.read_ahead(tmp_path, None, terms, Settings()) is None
    assert ordering.read_ahead(tmp_path, cache, terms, Settings(learned_order=False)) is None
    ahead = ordering.read_ahead(tmp_path, cache, terms, Settings())
    assert ahead is not None  # with both, it is
    ahead.finish()


def test_a_search_with_nothing_to_order_says_so_as_before_and_leaves_no_lookup_running(
        repo: History, tmp_path: Path) -> None:
    report = search(repo.root, "zzyzx_nowhere_to_be_found", cache=tmp_path / "cache")

    assert "order: fixed lexical factors" in report.notes
    assert not [t for t in threading.enumerate() if t.name == "slm-rerank-history"]


def test_a_lookup_that_ran_out_of_time_is_not_given_the_seconds_again(
        repo: History, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A git that does not answer: the lookup beside the sources spends the history's time
    (``HISTORY_SECONDS``, a total), and the search does not spend it a second time."""
    calls = tmp_path / "calls"
    git_stepping_in(monkeypatch, tmp_path / "bin", "--is-shallow-repository",
                    f'echo x >> "{calls}"; exec sleep 30')
    monkeypatch.setattr(ordering, "HISTORY_SECONDS", 0.5)

    notes = answer(repo.root, tmp_path / "cache")[1]

    assert calls.read_text().count("x") == 1
    assert f"no change history: git did not answer within 0.5 s in {repo.root}" in notes
