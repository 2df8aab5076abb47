"""The measurement: orders from one judgement per case, metrics, intervals, the weight."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path

import pytest
import slm_rerank_openai
import slm_rerank_ripgrep
from fake_plugins import LengthJudge
from git_history import History
from oracle_judge import MODEL_ID, OracleJudge, answer, seed_cases

from slm_rerank.calibration.measure import (
    JUDGE_ALONE,
    LEXICAL,
    CaseOrders,
    choose_weight,
    fused_name,
    hit_at,
    paired_interval,
    readable_gold,
    reciprocal_rank,
)
from slm_rerank.calibration.mining import Case, mine
from slm_rerank.calibration.run import run_cases
from slm_rerank.calibration.trees import commit_tree
from slm_rerank.config import Settings
from slm_rerank.host import Host
from slm_rerank.model import stage


def measured(history: Callable[[str], History], tmp_path: Path, count: int, fast: bool,
             judge: OracleJudge | None = None, monkeypatch: pytest.MonkeyPatch | None = None,
             settings: Settings | None = None):  # noqa: ANN201 - a Measurement
    repo = history("repo")
    seed_cases(repo, count)
    if judge is not None and monkeypatch is not None:
        monkeypatch.setattr(stage, "judge", judge)
    settings = settings or Settings()
    host = Host.with_plugins(settings, slm_rerank_ripgrep)
    cache = tmp_path / "cache"
    cases = mine(repo.root, count).cases
    return run_cases(cases, lambda case: commit_tree(repo.root, case.tree, cache), host,
                     cache, [0.5, 2.0], fast)


def test_fast_measures_the_lexical_order_alone_and_never_asks_a_judge(
        history: Callable[[str], History], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
        ) -> None:
    judge = OracleJudge()

    result = measured(history, tmp_path, 4, fast=True, judge=judge, monkeypatch=monkeypatch)

    assert judge.calls == 0 and result.model is None and result.choice is None
    assert [s.order for s in result.summaries] == [LEXICAL]
    assert result.summaries[0].cases == 4
    assert result.summaries[0].hit_at_1 == 0.0  # the decoy notes outrank every answer
    assert result.summaries[0].hit_at_5 == 1.0


def test_every_weight_is_fused_from_one_judgement_per_case(
        history: Callable[[str], History], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
        ) -> None:
    judge = OracleJudge()

    result = measured(history, tmp_path, 4, fast=False, judge=judge, monkeypatch=monkeypatch)

    assert judge.calls == 4
    orders = {s.order: s for s in result.summaries}
    # the profile's weight (0) is measured beside the asked ones: a choice is made against it
    assert list(orders) == [LEXICAL, JUDGE_ALONE, fused_name(0), fused_name(0.5),
                            fused_name(2)]
    assert orders[JUDGE_ALONE].hit_at_1 == orders[fused_name(2)].hit_at_1 == 1.0
    assert orders[fused_name(0)].hit_at_1 == 0.0
    assert orders[fused_name(2)].mrr_delta > 0
    assert result.model is not None and result.model.model_id == MODEL_ID
    assert result.model.weight == 0.0 and result.model.weight_source == "profile raw"
    assert all(r.head_recall for r in result.results)


def test_a_measured_weight_in_the_user_settings_is_the_one_a_choice_is_made_against(
        history: Callable[[str], History], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
        ) -> None:
    settings = dataclasses.replace(Settings(), judge_weights={MODEL_ID: 0.5},
                                   origins={"judge_weights": "user: /x/config.toml"})

    result = measured(history, tmp_path, 3, fast=False, judge=OracleJudge(),
                      monkeypatch=monkeypatch, settings=settings)

    assert result.model is not None and result.model.weight == 0.5
    assert result.model.weight_source == f"judge_weights['{MODEL_ID}'] (user: /x/config.toml)"
    assert result.choice is not None and result.choice.current == 0.5


def test_a_case_whose_model_run_degraded_is_left_out_and_counted(
        history: Callable[[str], History], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
        ) -> None:
    judge = OracleJudge(degraded="timed out", on_calls={2})

    result = measured(history, tmp_path, 4, fast=False, judge=judge, monkeypatch=monkeypatch)

    assert len(result.results) == 3 and result.dropped == {"model run degraded": 1}
    assert result.model is not None and len(result.model.degraded) == 1
    assert JUDGE_ALONE in result.results[0].orders


def test_a_server_that_never_answers_is_given_up_on_and_the_lexical_order_measured(
        history: Callable[[str], History], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
        ) -> None:
    judge = OracleJudge(degraded="refused")

    result = measured(history, tmp_path, 6, fast=False, judge=judge, monkeypatch=monkeypatch)

    assert judge.calls == 3  # not once more per case, each waiting out its timeout
    assert [s.order for s in result.summaries] == [LEXICAL]
    assert result.summaries[0].cases == 6 and not result.dropped
    assert result.model is not None and "no verdict in the first 3 cases" in \
        result.model.degraded[-1]
    assert result.choice is not None and not result.choice.separated


def orders(hits: list[tuple[int, int]]) -> list[CaseOrders]:
    """Cases whose answer is at rank a in the order w=0 and rank b in the order w=1."""
    gold = "gold.py"
    results = []
    for n, (a, b) in enumerate(hits):
        def at(rank: int) -> list[str]:
            return [f"other{i}.py" for i in range(rank - 1)] + [gold]
        results.append(CaseOrders(Case(str(n), "q", (gold,)), {
            LEXICAL: at(a), JUDGE_ALONE: at(b), fused_name(0): at(a), fused_name(1): at(b)}))
    return results


def test_too_few_cases_choose_no_weight_to_write() -> None:
    choice = choose_weight(orders([(3, 1)] * 10), [0, 1], current=0)

    assert choice.best == 1 and not choice.separated
    assert "10 cases are too few" in choice.reason


def test_a_weight_no_better_beyond_noise_is_not_written() -> None:
    mixed = [(3, 1)] * 16 + [(1, 3)] * 15

    choice = choose_weight(orders(mixed), [0, 1], current=0)

    assert choice.best == 1 and not choice.separated
    assert choice.ci is not None and choice.ci[0] <= 0 <= choice.ci[1]
    assert "not measurably better" in choice.reason


def test_a_weight_better_on_most_cases_is_chosen_against_the_one_in_use() -> None:
    choice = choose_weight(orders([(3, 1)] * 28 + [(1, 2)] * 4), [0, 1], current=0)

    assert choice.best == 1 and choice.separated
    assert choice.ci is not None and choice.ci[0] > 0


def test_the_weight_in_use_is_kept_when_it_measures_best() -> None:
    choice = choose_weight(orders([(1, 3)] * 40), [0, 1], current=0)

    assert choice.best == 0 and not choice.separated
    assert "already the best" in choice.reason


def test_the_paired_interval_is_seeded_and_holds_the_mean() -> None:
    differences = [1.0] * 20 + [0.0] * 20

    first, again = paired_interval(differences), paired_interval(differences)

    assert first == again and first[0] < 0.5 < first[1]
    assert paired_interval([0.25] * 9) == (0.25, 0.25)


def test_hit_and_reciprocal_rank_count_the_first_gold_file() -> None:
    ranked = ["a.py", "b.py", "gold.py", "other.py"]

    assert (hit_at(ranked, ["gold.py"], 1), hit_at(ranked, ["gold.py"], 3)) == (0.0, 1.0)
    assert reciprocal_rank(ranked, ["gold.py", "other.py"]) == pytest.approx(1 / 3)
    assert reciprocal_rank(ranked, ["gold.py"], k=2) == 0.0


def test_a_generated_gold_file_is_no_fair_answer(tmp_path: Path) -> None:
    (tmp_path / "src").mkdir()
    (tmp_path / "src/parser.py").write_text("# @generated by the grammar tool\nx = 1\n")
    (tmp_path / "src/lexer.py").write_text("def lex():\n    pass\n")
    case = Case("c", "q", ("src/parser.py", "src/lexer.py", "src/gone.py"))

    assert readable_gold(case, tmp_path) == ("src/lexer.py",)


def test_the_oracle_answer_is_what_the_decoys_hide(tmp_path: Path) -> None:
    # the fixture's premise, checked: the answers exist and are not generated
    assert answer("bababa") == "src/bababa_impl.py"


def test_a_scorer_plugin_judges_each_case_through_the_real_model_stage(
        history: Callable[[str], History], tmp_path: Path) -> None:
    # no monkeypatch: the host's own stage asks a registered scorer that needs no server
    repo = history("repo")
    seed_cases(repo, 3)
    settings = dataclasses.replace(Settings(), scorer="length", score_cache=False)
    host = Host.with_plugins(settings, LengthJudge, slm_rerank_openai, slm_rerank_ripgrep)
    cache = tmp_path / "cache"
    LengthJudge.seen.clear()

    result = run_cases(mine(repo.root, 3).cases,
                       lambda case: commit_tree(repo.root, case.tree, cache), host,
                       cache, [1.0], fast=False)

    assert len(result.results) == 3 and not result.dropped
    assert [s.order for s in result.summaries][:2] == [LEXICAL, JUDGE_ALONE]
    assert sum(q.endswith("zorblax widget must frobnicate") for q in LengthJudge.seen) == 3
    assert result.model is not None and result.model.model_id is None
