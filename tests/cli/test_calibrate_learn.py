"""`slm-rerank calibrate --learn`: the learned ranker fitted to a repository's own history
on a time split, measured against the shipped model and the fixed order, kept in the user
cache only when it wins, and used by the next search."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from click.testing import CliRunner
from git_history import History
from oracle_judge import answer, seed_cases
from search_fixtures import cli, user_config

from slm_rerank.calibration import per_repository as per
from slm_rerank.calibration.mining import mine
from slm_rerank.calibration.per_repository import (
    FIXED,
    REPOSITORY,
    SHIPPED,
    Gain,
    Measured,
    decide,
    extract_examples,
    time_split,
)
from slm_rerank.calibration.trees import commit_tree
from slm_rerank.cli.commands import cli as group
from slm_rerank.host import Host
from slm_rerank.lexical import ranker
from slm_rerank.lexical.features import FEATURES
from slm_rerank.lexical.history import read_history
from slm_rerank.lexical.ranker import RankerModel, repository_model_path

# --- the time split ---------------------------------------------------------------------


@dataclass(frozen=True)
class Commit:
    name: str
    date: int
    position: int
    #: the lexical stage found its answer (the fit learns from it)
    useful: bool = True


def test_the_time_split_trains_on_no_commit_newer_than_a_test_commit() -> None:
    # a rebased history: commit dates are not in the order of the history, and some tie
    dates = [50, 90, 10, 70, 70, 30, 20, 90, 60, 40, 80, 70]
    commits = [Commit(f"c{i}", d, i) for i, d in enumerate(dates)]

    split = time_split(commits)

    assert (len(split.train), len(split.test)) == (8, 4)
    assert max(c.date for c in split.train) <= min(c.date for c in split.test)
    assert {c.date for c in split.test} == {90, 80, 70}
    # of the three commits at 70, the two furthest back in the history (the largest
    # positions) are the oldest: they train, the newest of them tests
    assert [c.name for c in split.train if c.date == 70] == ["c11", "c4"]
    assert [c.name for c in split.test if c.date == 70] == ["c3"]
    assert split.train_until == 70 and split.test_from == 70
    assert [c.date for c in split.train] == sorted(c.date for c in split.train)


def test_too_few_training_cases_with_their_answer_found_or_test_cases_fit_nothing() -> None:
    enough = [Commit(f"c{i}", i, 100 - i) for i in range(60)]
    # the lexical stage missed the answer of the oldest 11: 29 training cases teach
    missed = [Commit(c.name, c.date, c.position, useful=i > 10) for i, c in enumerate(enough)]

    assert per.too_few(time_split(enough)) is None
    assert "29 older ones" in (per.too_few(time_split(missed)) or "")
    assert "19 newest to test" in (per.too_few(time_split(enough[:59])) or "")
    assert per.too_few_mined(59) and per.too_few_mined(60) is None


def test_each_case_is_searched_with_the_history_as_it_was_at_its_parent(
        tmp_path: Path, isolated_home: Path) -> None:
    repo = History(tmp_path / "repo")
    seed_cases(repo, 3)  # the layout commit, then one fix of each word's _impl.py
    mined = mine(repo.root, 10)
    host = Host.from_environment(start=repo.root)
    notes: list[str] = []
    asked: list[str] = []

    def history_at(commit: str) -> object:
        asked.append(commit)
        return read_history(repo.root, cache_dir=isolated_home, notes=notes, rev=commit)

    dates = {case.id: n for n, case in enumerate(mined.cases)}
    found = extract_examples(mined.cases, dates, lambda case: commit_tree(
        repo.root, case.tree, isolated_home), history_at, host, isolated_home)

    assert asked == [case.tree for case in mined.cases] and not notes
    assert len(found.examples) == 3
    changes = list(FEATURES).index("changes")
    for example in found.examples:
        [gold] = example.gold
        # at its parent, the fixed file had changed once (laid out); the fix, and every
        # later commit, are not in the history its features were computed from
        values = example.values[example.paths.index(gold)]
        assert values[changes] == pytest.approx(math.log(2))


# --- the rule -------------------------------------------------------------------------


def measured(mrr: Gain, hit_at_1: Gain) -> Measured:
    zero = Gain(0.0, 0.0, 0.0)
    means = {order: {"hit_at_1": 0.5, "hit_at_5": 0.8, "mrr": 0.6}
             for order in (FIXED, SHIPPED, REPOSITORY)}
    gains = {label: {"hit_at_1": zero, "hit_at_5": zero, "mrr": zero}
             for label, _, _ in per.COMPARISONS}
    gains[f"{REPOSITORY} vs {SHIPPED}"] = {"hit_at_1": hit_at_1, "hit_at_5": zero, "mrr": mrr}
    return Measured(30, means, gains)


@pytest.mark.parametrize(("mrr", "hit", "wins", "says"), [
    (Gain(0.05, 0.01, 0.09), Gain(0.03, -0.02, 0.1), True, "beats the shipped model"),
    (Gain(0.05, 0.0, 0.09), Gain(0.0, -0.1, 0.1), True, "beats the shipped model"),
    (Gain(0.05, -0.01, 0.1), Gain(0.1, 0.0, 0.2), False, "reaches below 0"),
    (Gain(0.0, 0.0, 0.0), Gain(0.0, 0.0, 0.0), False, "not above the shipped"),
    (Gain(-0.02, -0.05, 0.0), Gain(0.0, 0.0, 0.0), False, "not above the shipped"),
    (Gain(0.04, 0.01, 0.08), Gain(-0.03, -0.1, 0.0), False, "Hit@1 is -3.0 points"),
    (Gain(math.nan, math.nan, math.nan), Gain(0.0, 0.0, 0.0), False, "not above"),
])
def test_the_repositorys_model_wins_only_by_the_rule(mrr: Gain, hit: Gain, wins: bool,
                                                     says: str) -> None:
    decision = decide(measured(mrr, hit))

    assert decision.wins is wins and says in decision.reason


# --- the command ------------------------------------------------------------------------

#: the shipped model the generated repositories' fits start from: the lexical order, and a
#: feature (the file's length) it does not weigh yet. The generated answer is the short
#: file, the lexical order's first a long decoy: only a repository's fit can learn that.
START = RankerModel("stand-in", ("lexical", "file_lines"), (0.5, 2.0), (0.25, 0.5),
                    (1.0, 0.0), 0.0, {"recipe": "the test's"})


@pytest.fixture
def start_model(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[RankerModel]:
    path = tmp_path / "shipped-ranker.json"
    path.write_text(json.dumps(START.to_json()))
    monkeypatch.setattr(ranker, "SHIPPED", path)
    ranker.shipped_model.cache_clear()
    yield START
    ranker.shipped_model.cache_clear()


def learn(args: list[str], repo: Path, monkeypatch: pytest.MonkeyPatch):  # noqa: ANN201
    monkeypatch.chdir(repo)
    return CliRunner().invoke(group, ["calibrate", "--learn", *args], catch_exceptions=False)


def small_minimums(monkeypatch: pytest.MonkeyPatch) -> None:
    # 30 training and 20 test cases in use; 8 and 4 generated ones tell the orders apart
    monkeypatch.setattr(per, "MIN_TRAIN", 6)
    monkeypatch.setattr(per, "MIN_TEST", 3)


def first_result(repo: Path, word: str) -> tuple[str, str]:
    run = cli("search", "--fast", "-v", "--format", "json", "-q",
              f"{word} zorblax widget must frobnicate", cwd=repo)
    assert run.returncode == 0, run.stderr
    return run.json()["results"][0]["path"], run.stderr


def test_write_keeps_a_winning_model_in_the_user_cache_and_the_next_search_uses_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, isolated_home: Path,
        start_model: RankerModel) -> None:
    small_minimums(monkeypatch)
    repo = History(tmp_path / "repo")
    chosen = seed_cases(repo, 12)
    _, said_before = first_result(repo.root, chosen[-1])

    done = learn(["--write"], repo.root, monkeypatch)

    assert done.exit_code == 0, done.output
    assert "split by time: 8 oldest cases train" in done.output
    assert "4 newest test" in done.output
    assert "rule: the repository's model is kept when" in done.output
    assert "this repository's model wins: it beats the shipped model" in done.output
    kept = repository_model_path(isolated_home, repo.root)
    assert f"written: {kept}" in done.output
    assert kept.is_relative_to(isolated_home)  # the user's cache, nothing in the repository
    assert repo.git("status", "--porcelain", "--ignored") == ""
    meta = json.loads(kept.read_text())["meta"]
    assert meta["repository"] == str(repo.root) and meta["wins"] is True
    assert meta["split"]["train"] == 8 and meta["split"]["test"] == 4
    assert meta["commits"]["newest"] == repo.git("rev-parse", "HEAD")
    assert meta["started_from"]["name"] == "stand-in"
    assert meta["measured"]["orders"][REPOSITORY]["hit_at_1"] == 1.0
    assert meta["measured"]["orders"][SHIPPED]["hit_at_1"] == 0.0
    # the next search (another process, the package's own shipped model) orders by it
    after, said = first_result(repo.root, chosen[-1])
    assert after == answer(chosen[-1])
    assert "(shipped)" in said_before and "fitted to this repository" not in said_before
    assert f"fitted to this repository ({kept})" in said


def test_without_a_win_write_writes_nothing_and_says_why(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, isolated_home: Path,
        start_model: RankerModel) -> None:
    small_minimums(monkeypatch)
    # the start model already puts the short file first: nothing left to win
    monkeypatch.setattr(ranker, "SHIPPED", tmp_path / "best.json")
    ranker.shipped_model.cache_clear()
    (tmp_path / "best.json").write_text(json.dumps(RankerModel(
        "already-right", START.features, START.mean, START.scale, (1.0, -8.0)).to_json()))
    repo = History(tmp_path / "repo")
    seed_cases(repo, 12)

    done = learn(["--write", "--format", "json"], repo.root, monkeypatch)

    assert done.exit_code == 0, done.output
    assert "--write: nothing written: its MRR@10 is not above the shipped model's" \
        in done.output
    document = json.loads(done.output[done.output.index("{"):])
    assert document["wins"] is False and document["written"] is None
    assert document["measured"]["orders"][SHIPPED]["hit_at_1"] == 1.0
    assert not (isolated_home / "rankers").exists()


def test_too_few_cases_is_one_line_and_writes_nothing(tmp_path: Path,
                                                      isolated_home: Path) -> None:
    repo = History(tmp_path / "repo")
    seed_cases(repo, 5)

    run = cli("calibrate", "--learn", "--write", cwd=repo.root, timeout=60)

    assert run.returncode == 1
    [line] = [ln for ln in run.stderr.splitlines() if "error" in ln]
    assert "5 cases mined are too few to fit and test a model for this repository" in line
    assert "raise --commits" in line and "nothing written" in line
    assert run.stdout == "" and not (isolated_home / "rankers").exists()


def test_a_corrupt_repository_model_is_a_warning_and_the_fixed_order(
        tmp_path: Path, isolated_home: Path) -> None:
    repo = History(tmp_path / "repo")
    chosen = seed_cases(repo, 3)
    kept = repository_model_path(isolated_home, repo.root)
    kept.parent.mkdir(parents=True)
    kept.write_text('{"format": 1, "name": "cut short", "features": ["lexic')
    user_config().write_text("learned_order = false\n")
    fixed = cli("search", "--fast", "--format", "json", "-q",
                f"{chosen[0]} zorblax widget must frobnicate", cwd=repo.root).json()
    user_config().unlink()

    path, said = first_result(repo.root, chosen[0])

    assert f"{kept.name}: not valid JSON" in said
    assert "the fixed lexical order is used" in said
    assert "order: fixed lexical factors (this repository's model is unusable)" in said
    assert path == fixed["results"][0]["path"] == f"src/{chosen[0]}_notes.py"


def test_a_repository_config_cannot_name_a_model_file(tmp_path: Path) -> None:
    repo = History(tmp_path / "repo")
    chosen = seed_cases(repo, 3)
    # a model that would put the short file first, were it ever read
    (repo.root / "evil.json").write_text(json.dumps(RankerModel(
        "evil", ("lexical", "file_lines"), (0.5, 2.0), (0.25, 0.5), (1.0, -8.0)).to_json()))
    query = f"{chosen[0]} zorblax widget must frobnicate"
    plain = cli("search", "--fast", "--format", "json", "-q", query, cwd=repo.root)
    (repo.root / ".slm-rerank.toml").write_text(
        'ranker_model = "evil.json"\n[ranker]\npath = "evil.json"\n')

    named = cli("search", "--fast", "-v", "--format", "json", "-q", query, cwd=repo.root)

    assert named.returncode == 0
    assert "unknown key 'ranker_model'" in named.stderr
    assert "unknown key 'ranker'" in named.stderr
    assert f"order: learned ranker '{ranker.shipped_model().name}' (shipped)" in named.stderr
    assert named.json()["results"] == plain.json()["results"]
