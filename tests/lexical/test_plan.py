"""A search plan narrows a search to the terms that say where to look and a few files."""

from __future__ import annotations

from pathlib import Path

import pytest
from search_fixtures import make_repo, search

from slm_rerank.lexical import rank
from slm_rerank.lexical.file_scores import FileEvidence
from slm_rerank.lexical.plan import SearchPlan, choose_terms, planned_files, planned_terms
from slm_rerank.lexical.terms import extract


def test_named_terms_come_first_then_the_repositorys_words_then_the_rest() -> None:
    terms = extract("the uploader drops progress when RetryPolicy gives up after a minute").terms
    files_naming = {"uploader": 3, "progress": 40, "minute": 1}.get  # of 100 files

    kept = choose_terms(terms, files_naming, ceiling=25, keep=3)

    # RetryPolicy is named; "uploader" and "minute" are the repository's words (progress is
    # in too many of its files to point anywhere); "drops", "gives" come last
    assert kept == ("retrypolicy", "uploader", "minute")


def test_without_a_vocabulary_the_query_order_decides_after_the_named_terms() -> None:
    terms = extract("the uploader drops progress when RetryPolicy gives up").terms

    kept = choose_terms(terms, lambda word: None, ceiling=0, keep=3)

    # extract's order: the weightiest (the named one), then the longest words
    assert kept == ("retrypolicy", "progress", "uploader")


def test_planned_terms_keep_only_the_plans_and_never_leave_none() -> None:
    terms = extract("retry the upload after a timeout")

    assert [t.root for t in planned_terms(terms, SearchPlan(terms=("upload",))).terms] == [
        "upload"]
    assert planned_terms(terms, SearchPlan(terms=("absent",))) is terms


def test_planned_files_take_the_best_by_evidence_then_the_best_by_path() -> None:
    evidence = [FileEvidence(f"body{i}.py", body_score=100.0 - i) for i in range(30)]
    evidence += [FileEvidence("named.py", path_score=5.0), FileEvidence("other.py",
                                                                        path_score=1.0)]

    kept = [e.path for e in planned_files(evidence, SearchPlan(max_files=8))]

    assert kept == [f"body{i}.py" for i in range(6)] + ["named.py", "other.py"]


def test_planned_files_fill_the_cap_by_evidence_when_few_paths_match() -> None:
    evidence = [FileEvidence(f"body{i}.py", body_score=100.0 - i) for i in range(30)]

    kept = [e.path for e in planned_files(evidence, SearchPlan(max_files=8))]

    assert kept == [f"body{i}.py" for i in range(8)]


def test_a_search_with_a_plan_reads_at_most_its_files(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    root = make_repo(tmp_path / "repo", {f"src/m{i}.py": f"def upload_{i}():\n"
                                         "    return 'upload'\n" for i in range(80)})
    read: list[str] = []
    real = rank.read_candidate

    def counting(root: Path, rel: str, limit: int):  # type: ignore[no-untyped-def]
        read.append(rel)
        return real(root, rel, limit)

    monkeypatch.setattr(rank, "read_candidate", counting)

    search(root, "upload")
    unplanned = len(read)
    read.clear()
    report = search(root, "upload", plan=SearchPlan(max_files=7))

    assert unplanned > 7
    assert len(read) == 7
    assert len(report.results) == 7
