"""What calibrate --write keeps of a judge on one repository: the rule that decides whether
it adds anything, the file it is kept in, and what a search makes of a bad file."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest

from slm_rerank.model.repository_judge import (
    MAX_BYTES,
    FindingsError,
    JudgeFinding,
    Measured,
    RepositoryJudge,
    finding,
    findings_path,
    for_repository,
    load_findings,
    write_finding,
)


def measured(without: float, fused: dict[float, tuple[float, float]],
             chosen: float | None = None, cases: int = 40) -> Measured:
    return Measured("qwen", cases, without, fused, chosen)


def test_a_judge_that_no_weight_makes_pay_is_not_asked() -> None:
    found = finding(measured(0.52, {0.25: (0.50, -0.04), 1.0: (0.52, -0.01)}), min_cases=30)

    assert found is not None and found.ask is False and found.weight is None
    assert found.reason == ("MRR@10 0.520 without it, at most 0.520 fused (w=1, gain 95 % "
                            "interval from -0.010), 40 cases")


def test_a_gain_that_is_not_sure_is_no_reason_to_ask_the_judge() -> None:
    # a hair above the order without it, as a weak judge gets by chance: its time is lost
    found = finding(measured(0.780, {0.1: (0.781, 0.0), 1.0: (0.762, -0.045)}),
                    min_cases=30)

    assert found is not None and found.ask is False


def test_a_judge_that_helps_is_asked_by_the_weight_chosen() -> None:
    found = finding(measured(0.50, {0.5: (0.58, 0.02), 1.0: (0.55, 0.01)}, chosen=0.5),
                    min_cases=30)

    assert found is not None and found.ask is True and found.weight == 0.5
    assert "at most 0.580 fused (w=0.5, gain 95 % interval from +0.020)" in found.reason


def test_a_judge_that_helps_without_a_weight_told_apart_keeps_the_weight_in_use() -> None:
    found = finding(measured(0.50, {0.5: (0.53, 0.01)}, chosen=None), min_cases=30)

    assert found is not None and found.ask is True and found.weight is None


def test_too_few_cases_decide_nothing() -> None:
    assert finding(measured(0.9, {1.0: (0.1, -0.5)}, cases=29), min_cases=30) is None
    assert finding(measured(0.9, {}, cases=40), min_cases=30) is None


def no(model_id: str) -> JudgeFinding:
    return JudgeFinding(model_id, False, None, "MRR@10 0.5 without it", 40, "2026-12-02")


def test_the_judge_is_declined_only_when_every_servers_model_adds_nothing() -> None:
    here = RepositoryJudge({"a": no("a"), "b": JudgeFinding("b", True, 0.5, "helps", 40)})

    assert here.declined(["a"]) is not None and "--ask-judge" in here.declined(["a"])
    assert here.declined(["a", "b"]) is None  # b helps: the head is judged
    assert here.declined(["a", "c"]) is None  # nothing measured of c
    assert here.declined([None]) is None and here.declined([]) is None
    assert here.weight("b") is not None and here.weight("b").weight == 0.5
    assert here.weight("a") is None and here.weight(None) is None


def test_findings_are_kept_per_repository_in_the_cache_and_per_model_id(
        tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    (repo / "src").mkdir()
    other = tmp_path / "other"
    (other / ".git").mkdir(parents=True)
    cache = tmp_path / "cache"

    path = findings_path(cache, repo / "src")  # any folder of the work tree
    assert path == findings_path(cache, repo) != findings_path(cache, other)
    assert path.parent == cache / "judges"
    write_finding(path, no("a"))
    write_finding(path, JudgeFinding("b", True, 0.25, "helps", 31, "2026-12-02"))
    write_finding(path, JudgeFinding("a", True, None, "helps now", 60, "2026-12-03"))

    kept = load_findings(path)
    assert set(kept) == {"a", "b"} and kept["a"].ask is True and kept["a"].cases == 60
    assert kept["b"].weight == 0.25


def test_a_missing_file_is_no_finding(tmp_path: Path) -> None:
    assert load_findings(tmp_path / "none.json") == {}
    assert for_repository(tmp_path, tmp_path / "cache").findings == {}
    assert for_repository(tmp_path, None) == RepositoryJudge()


@pytest.mark.parametrize(("text", "says"), [
    ("{not json", "not valid JSON"),
    ('{"format": 2, "models": {}}', "not a judge findings file of format 1"),
    ('{"format": 1, "models": []}', "'models' must be a table"),
    ('{"format": 1, "models": {"a": {"ask": "no"}}}', "'ask' must be true or false"),
    ('{"format": 1, "models": {"a": {"ask": true, "weight": NaN}}}', "'weight' must be"),
    ('{"format": 1, "models": {"a": {"ask": true, "weight": 11}}}', "'weight' must be"),
    ('{"format": 1, "models": {"a": {"ask": true, "weight": true}}}', "'weight' must be"),
    (b"\xff\xfe", "not valid JSON"),
])
def test_a_bad_file_is_an_error_naming_it(tmp_path: Path, text: str | bytes,
                                          says: str) -> None:
    path = tmp_path / "judges.json"
    path.write_bytes(text if isinstance(text, bytes) else text.encode())

    with pytest.raises(FindingsError) as error:
        load_findings(path)

    assert says in str(error.value) and "judges.json" in str(error.value)


def test_an_oversized_file_is_refused_without_reading_it_whole(tmp_path: Path) -> None:
    path = tmp_path / "judges.json"
    path.write_text('{"format": 1, "models": {}, "pad": "' + "x" * MAX_BYTES + '"}')

    with pytest.raises(FindingsError, match="over 256000 bytes"):
        load_findings(path)


def test_a_symlink_or_fifo_in_its_place_is_refused_at_once(tmp_path: Path) -> None:
    target = tmp_path / "elsewhere.json"
    target.write_text('{"format": 1, "models": {"a": {"ask": false}}}')
    link = tmp_path / "link.json"
    link.symlink_to(target)
    fifo = tmp_path / "fifo.json"
    os.mkfifo(fifo)

    started = time.monotonic()
    for path, what in ((link, "symbolic link"), (fifo, "FIFO")):
        with pytest.raises(FindingsError, match=what):
            load_findings(path)
    assert time.monotonic() - started < 5  # nobody writes the FIFO: never waited on


def test_a_search_warns_of_an_unusable_file_and_asks_the_judge(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    path = findings_path(cache, tmp_path)
    path.parent.mkdir(parents=True)
    path.write_text("{corrupt")

    here = for_repository(tmp_path, cache)

    assert here.findings == {} and here.declined(["a"]) is None
    assert here.warning is not None and str(path.name) in here.warning
    assert "the judge is asked as if nothing was measured here" in here.warning


def test_writing_replaces_an_unusable_file(tmp_path: Path) -> None:
    path = tmp_path / "judges.json"
    path.write_text("{corrupt")

    write_finding(path, no("a"))

    assert json.loads(path.read_text())["models"]["a"]["ask"] is False


def test_an_unreadable_file_is_an_error_naming_it(tmp_path: Path) -> None:
    if os.geteuid() == 0:
        # root reads a mode-000 file: take the read away with a directory instead
        path = tmp_path / "judges.json"
        path.mkdir()
    else:
        path = tmp_path / "judges.json"
        path.write_text('{"format": 1, "models": {}}')
        path.chmod(0)
    with pytest.raises(FindingsError, match="cannot read judge findings"):
        load_findings(path)
    subprocess.run(["chmod", "-R", "u+rwx", str(tmp_path)], check=False)
