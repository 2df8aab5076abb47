"""`slm-rerank review bench` without a model: the deterministic gates over the trust corpus.

The bench's contract (issues 19 and 27): every supported candidate is reported, every
fabricated, symbol-invented and injected one dropped with the reason its label names; the
precision with the gates and without them is printed.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner
from slm_rerank_review.bench_command import bench
from slm_rerank_review.trust_bench import run_deterministic
from slm_rerank_review.trust_labels import CORPUS

#: candidates the gates do not yet treat as labelled (none: the one the bench found, a
#: dotted name passing on its last part in a comment, is fixed in gates.py)
KNOWN_GAPS: frozenset[str] = frozenset()


def test_every_supported_candidate_of_the_corpus_is_reported() -> None:
    result = run_deterministic()

    supported = [o for o in result.outcomes if o.labelled.label == "supported"]

    assert len(supported) >= 30
    assert [o.labelled.id for o in supported if not o.reported] == []


def test_every_fabricated_and_invented_candidate_is_dropped_for_its_labelled_reason() -> None:
    result = run_deterministic()

    others = [o for o in result.outcomes
              if o.labelled.label != "supported" and o.labelled.id not in KNOWN_GAPS]

    assert len(others) >= 38
    assert [(o.labelled.id, o.reason) for o in others if not o.as_labelled] == []


def test_a_dotted_name_the_chunk_lacks_is_dropped_though_its_last_part_is_in_a_comment(
        ) -> None:
    result = run_deterministic()

    outcome = next(o for o in result.outcomes if o.labelled.id == "ts-symbol-this-queue")

    assert outcome.reason is not None and outcome.reason.value == "CLAIM_SYMBOL_NOT_IN_CHUNK"


def test_the_gates_raise_precision_from_the_share_of_supported_candidates_to_nearly_all(
        ) -> None:
    result = run_deterministic()

    without, evidence, both, every = (result.precision[stage].value for stage in (
        "no gates", "evidence gate", "evidence + identifier gates",
        "evidence + identifier + code gates"))

    assert without is not None and evidence is not None and both is not None
    assert without < 0.5 < evidence < both < every == 1.0
    supported = sum(o.labelled.label == "supported" for o in result.outcomes)
    assert without == pytest.approx(supported / len(result.outcomes))


def test_a_planted_prompt_injection_passes_evidence_and_identifiers_but_not_the_code_gate(
        ) -> None:
    result = run_deterministic()

    injected = [o for o in result.outcomes if o.labelled.label == "injected"]

    assert len(injected) >= 6
    assert {o.reason.value for o in injected if o.reason} == {"EVIDENCE_NOT_CODE",
                                                               "CLAIM_NAMES_NO_CODE"}
    assert all(o.as_labelled for o in injected)
    # without the code gate every one of them would be reported: its quote is on disk
    assert result.precision["evidence + identifier gates"].reported == (
        result.precision["evidence + identifier + code gates"].reported + len(injected))


def _corpus_copy(tmp_path: Path, keep: object) -> Path:
    """A corpus of the shipped files with the candidates ``keep(record)`` keeps."""
    corpus = tmp_path / "corpus"
    shutil.copytree(CORPUS / "files", corpus / "files")
    lines = (CORPUS / "candidates.jsonl").read_text(encoding="utf-8").splitlines()
    kept = [line for line in lines if keep(json.loads(line))]  # type: ignore[operator]
    (corpus / "candidates.jsonl").write_text("\n".join(kept) + "\n", encoding="utf-8")
    return corpus


def test_the_command_prints_the_precisions_and_exits_0_when_all_is_as_labelled(
        tmp_path: Path) -> None:
    corpus = _corpus_copy(tmp_path, lambda r: r["id"] not in KNOWN_GAPS)

    result = CliRunner().invoke(bench, ["--corpus", str(corpus)])

    assert result.exit_code == 0, result.output
    assert "precision of what is reported:" in result.output
    assert "no gates" in result.output and "evidence + identifier gates" in result.output
    assert "CLAIM_SYMBOL_NOT_IN_CHUNK" in result.output
    assert "not as labelled: 0" in result.output


def test_a_candidate_not_treated_as_labelled_is_named_and_the_command_exits_1(
        tmp_path: Path) -> None:
    def mislabel(record: dict[str, object]) -> bool:
        if record["id"] == "py-acquire-altered-comparison":  # a fabricated quote ...
            record.update(label="supported", expected_reason=None)  # ... called supported
        return record["id"] not in KNOWN_GAPS

    corpus = tmp_path / "corpus"
    shutil.copytree(CORPUS / "files", corpus / "files")
    records = [json.loads(line) for line in
               (CORPUS / "candidates.jsonl").read_text(encoding="utf-8").splitlines()]
    kept = [r for r in records if mislabel(r)]
    (corpus / "candidates.jsonl").write_text(
        "".join(json.dumps(r) + "\n" for r in kept), encoding="utf-8")

    result = CliRunner().invoke(bench, ["--corpus", str(corpus)])

    assert result.exit_code == 1
    assert ("py-acquire-altered-comparison (supported, altered): dropped EVIDENCE_NOT_FOUND, "
            "expected reported") in result.output


def test_the_json_lists_every_candidate_with_its_reason_and_the_precisions(
        tmp_path: Path) -> None:
    corpus = _corpus_copy(tmp_path, lambda r: r["id"] not in KNOWN_GAPS)

    result = CliRunner().invoke(bench, ["--corpus", str(corpus), "--json"])

    document = json.loads(result.output)["deterministic"]
    assert document["passed"] is True
    assert document["candidates"] == len(document["outcomes"])
    assert set(document["precision"]) == {"no gates", "evidence gate",
                                          "evidence + identifier gates",
                                          "evidence + identifier + code gates"}
    invented = next(o for o in document["outcomes"] if o["id"] == "js-onskip-not-in-chunk")
    assert invented["reason"] == "CLAIM_SYMBOL_NOT_IN_CHUNK"
    assert "onSkip" in invented["detail"]


def test_a_damaged_corpus_is_an_error_naming_its_line_not_a_traceback(tmp_path: Path) -> None:
    corpus = _corpus_copy(tmp_path, lambda r: True)
    labels = corpus / "candidates.jsonl"
    damaged = len(labels.read_text(encoding="utf-8").splitlines()) + 1
    with labels.open("a", encoding="utf-8") as handle:
        handle.write("{not json\n")

    result = CliRunner().invoke(bench, ["--corpus", str(corpus)])

    assert result.exit_code == 1
    assert f"candidates.jsonl:{damaged}: not JSON" in result.output
    assert "Traceback" not in result.output


def test_live_flags_without_live_are_a_usage_error() -> None:
    result = CliRunner().invoke(bench, ["--limit", "2"])

    assert result.exit_code == 2
    assert "are for --live" in result.output
