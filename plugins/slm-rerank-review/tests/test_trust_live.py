"""`slm-rerank review bench --live`: the flow, against a fake llama-server.

The fake (conftest.py's ``fake_llama``, answering with the recorded llama-server payloads)
says what the generator proposes and what each judge answers, so these tests check the
bookkeeping: which gate a candidate is counted at, what is correct, what the separation is
computed from, how a missing server or a silent one degrades. They make no claim about
any model's quality; docs/review-bench.md has the measured tables.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner
from pytest_httpserver import HTTPServer
from review_fakes import FakeLlama, finding, recorded, serve
from slm_rerank_review.bench_command import bench
from slm_rerank_review.findings import Candidate, Finding
from slm_rerank_review.gates import deterministic_gates
from slm_rerank_review.review import ReviewReport
from slm_rerank_review.trust_labels import CORPUS, CorpusError, load_seeded
from slm_rerank_review.trust_live import copy_case, verdicts_of
from werkzeug import Request, Response

#: the first two seeded cases, which --limit 2 reviews
FIRST, SECOND = "requests-iter-slices", "requests-unquote-unreserved"


def _claims(case: str) -> dict[str, str]:
    return {c.label: c.claim for c in load_seeded() if c.case == case}


@pytest.fixture
def fake_llama(httpserver: HTTPServer) -> FakeLlama:
    """The review's fake llama-server, its array answers numbered as llama-server numbers
    them (llamacpp-completion-array.json: ``index`` 0..n-1; the fake gives each 0)."""
    fake = serve(httpserver)
    handle = fake.handle

    def numbered(request: Request) -> Response:
        response = handle(request)
        items = json.loads(response.get_data())
        if isinstance(items, list):
            for index, item in enumerate(items):
                item["index"] = index
            response.set_data(json.dumps(items))
        return response

    httpserver.clear_all_handlers()
    httpserver.expect_request("/v1/models").respond_with_json(recorded("llamacpp-v1-models.json"))
    httpserver.expect_request("/props").respond_with_json(recorded("llamacpp-props.json"))
    httpserver.expect_request("/api/version").respond_with_data("", status=404)
    httpserver.expect_request("/tokenize").respond_with_data("", status=404)
    httpserver.expect_request("/completion", method="POST").respond_with_handler(numbered)
    return fake


def _live(url: str, *extra: str) -> dict[str, object]:
    result = CliRunner().invoke(bench, ["--live", "-e", url, "--limit", "2", "--json",
                                        "--timeout", "60", *extra])
    assert result.exit_code in (0, 1), result.output  # 1: the deterministic gap, not --live
    return json.loads(result.stdout)["live"]


def test_every_seeded_claim_passes_the_deterministic_gates_so_only_the_judges_decide(
        ) -> None:
    for claim in load_seeded():
        lines = (CORPUS / claim.path).read_text(encoding="utf-8").splitlines()
        candidate = Candidate(claim.path, claim.chunk_start, claim.chunk_end, claim.claim,
                              claim.evidence, claim.identifiers)

        verdict = deterministic_gates(
            candidate, "\n".join(lines[claim.chunk_start - 1:claim.chunk_end]))

        assert not hasattr(verdict, "reason"), (claim.id, verdict)


def test_live_counts_each_candidate_at_the_gate_that_dropped_it(
        fake_llama: FakeLlama) -> None:
    fake_llama.answers["requests/utils.py"] = "\n".join([
        finding("`iter_slices` stops one slice early because of `pos < len(string) - 1`",
                "    while pos < len(string) - 1:", ["iter_slices"]),
        finding("`iter_slices` copies the whole string each step",
                "yield string[:]", ["iter_slices"]),  # fabricated: no such line
        finding("`iter_slices` calls `memoryview`", "pos += slice_length", ["memoryview"]),
        # its docstring: on disk, but no code
        finding("`iter_slices` iterates over slices", '"""Iterate over slices of a string."""',
                ["iter_slices"]),
    ]) + "\nEND"

    live = _live(fake_llama.url)

    gates = {g["gate"]: g for g in live["gates"]}
    assert gates["evidence"]["dropped"] >= 1
    assert gates["identifiers"]["dropped"] >= 1
    assert gates["code"]["dropped"] >= 1
    for gate in ("evidence", "identifiers", "code", "support", "contradiction"):
        assert gates[gate]["passed"] + gates[gate]["dropped"] == gates[gate]["reached"]
    assert gates["identifiers"]["reached"] == gates["evidence"]["passed"]
    assert gates["code"]["reached"] == gates["identifiers"]["passed"]


def test_live_scores_a_finding_on_the_seeded_line_as_correct_and_recall_per_case(
        fake_llama: FakeLlama) -> None:
    fake_llama.answers["requests/utils.py"] = finding(
        "`iter_slices` stops one slice early because of `pos < len(string) - 1`",
        "    while pos < len(string) - 1:", ["iter_slices"]) + "\nEND"

    live = _live(fake_llama.url)

    reported = {r["stage"]: r for r in live["reported"]}["after every gate (reported)"]
    assert reported["cases"] == 2
    # the fake gives every chunk of both cases the same answer: it quotes a line only the
    # first case has, so the second case's candidates fail the evidence gate
    assert reported["found"] == 1
    assert reported["correct"] == reported["reported"] >= 1
    cases = {c["case"]: c for c in live["cases"]}
    assert cases[FIRST]["found"] is True and cases[SECOND]["found"] is False


def test_live_separates_the_judges_probabilities_by_the_claims_labels(
        fake_llama: FakeLlama) -> None:
    for case in (FIRST, SECOND):
        claims = _claims(case)
        fake_llama.support[claims["defect"][:60]] = 0.8
        fake_llama.support[claims["false_claim"][:60]] = 0.3
        fake_llama.contradiction[claims["defect"][:60]] = 0.2
        fake_llama.contradiction[claims["false_claim"][:60]] = 0.7

    live = _live(fake_llama.url)

    separation = {s["judge"]: s for s in live["separation"]}
    assert separation["support"]["true"] == pytest.approx([0.8, 0.8], abs=0.01)
    assert separation["support"]["false"] == pytest.approx([0.3, 0.3], abs=0.01)
    assert separation["support"]["auc"] == 1.0
    assert separation["contradiction"]["auc"] == 1.0
    assert live["decisions"] == {"true_kept": 2, "true": 2, "false_dropped": 2, "false": 2}
    assert live["degraded"] is None


def test_live_with_no_server_answering_degrades_visibly_and_exits_0(tmp_path: Path) -> None:
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]

    result = CliRunner().invoke(bench, ["--live", "-e", f"http://127.0.0.1:{port}",
                                        "--limit", "1", "--timeout", "10",
                                        "--corpus", str(_corpus_without_gaps(tmp_path))])

    assert result.exit_code == 0, result.output
    assert "--live degraded" in result.stderr
    assert "trust benchmark, --live: 1 seeded cases" in result.stdout


@pytest.fixture
def silent_server() -> Iterator[str]:
    """A server that accepts connections and never answers: only a deadline ends a call."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    listener.settimeout(0.2)
    stop = threading.Event()
    held: list[socket.socket] = []

    def accept() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except OSError:
                continue
            held.append(conn)

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    finally:
        stop.set()
        thread.join(5)
        for conn in held:
            conn.close()
        listener.close()


def test_live_against_a_server_that_never_answers_ends_within_its_deadline(
        silent_server: str, tmp_path: Path) -> None:
    deadline = 4.0
    started = time.monotonic()

    result = CliRunner().invoke(bench, ["--live", "-e", silent_server, "--limit", "1",
                                        "--timeout", str(deadline),
                                        "--corpus", str(_corpus_without_gaps(tmp_path))])

    assert time.monotonic() - started < 5 * deadline
    assert result.exit_code == 0, result.output
    assert "--live degraded" in result.stderr


def _corpus_without_gaps(tmp_path: Path) -> Path:
    """The shipped corpus less the candidates the gates do not yet treat as labelled."""
    from test_trust_bench import KNOWN_GAPS, _corpus_copy

    corpus = _corpus_copy(tmp_path, lambda r: r["id"] not in KNOWN_GAPS)
    shutil.copytree(CORPUS / "seeded", corpus / "seeded")
    shutil.copy(CORPUS / "seeded.jsonl", corpus / "seeded.jsonl")
    return corpus


def test_a_fifo_or_a_link_in_a_case_folder_is_left_out_of_its_copy(tmp_path: Path) -> None:
    source = tmp_path / "case"
    (source / "src").mkdir(parents=True)
    (source / "src" / "a.py").write_text("x = 1\r\n", encoding="utf-8")
    os.mkfifo(source / "src" / "pipe.py")  # opening it would block the copy for ever
    (source / "src" / "link.py").symlink_to("/etc/hostname")

    copy_case(source, tmp_path / "copy")

    assert sorted(p.name for p in (tmp_path / "copy" / "src").iterdir()) == ["a.py"]
    assert (tmp_path / "copy" / "src" / "a.py").read_bytes() == b"x = 1\r\n"


def test_a_case_of_the_labels_without_its_folder_is_an_error_naming_it(tmp_path: Path) -> None:
    with pytest.raises(CorpusError, match="seeded case's folder is missing"):
        copy_case(tmp_path / "nowhere", tmp_path / "copy")


def test_case_reviews_only_the_named_cases_and_an_unknown_one_is_named(
        fake_llama: FakeLlama) -> None:
    picked = CliRunner().invoke(bench, ["--live", "-e", fake_llama.url, "--case", SECOND,
                                        "--json"])
    unknown = CliRunner().invoke(bench, ["--live", "-e", fake_llama.url, "--case", "nope"])

    assert [c["case"] for c in json.loads(picked.stdout)["live"]["cases"]] == [SECOND]
    assert unknown.exit_code == 1
    assert "no seeded case nope; the cases are: requests-iter-slices" in unknown.output


def test_only_a_finding_on_the_seeded_line_or_beside_it_counts_as_finding_the_defect(
        tmp_path: Path) -> None:
    defect = next(c for c in load_seeded() if c.id == "sphinx-rpartition")
    root = tmp_path / "case"
    copy_case(CORPUS / "seeded" / defect.case, root)
    path = "sphinx/util/__init__.py"
    chunk = "\n".join((root / path).read_text(encoding="utf-8").splitlines()[12:20])

    def reported(claim: str, evidence: str) -> Finding:
        found = deterministic_gates(Candidate(path, 13, 20, claim, evidence, ("rpartition",)),
                                    chunk)
        assert isinstance(found, Finding)
        return found

    # true, but about the deprecation warning three lines above the seeded offset
    near = reported("`rpartition` is deprecated", "    warnings.warn('rpartition() is now "
                    "deprecated.', RemovedInSphinx50Warning, stacklevel=2)")
    on = reported("`rpartition` skips one character", "        return s[:i], s[i + 1:]")
    report = ReviewReport("q", str(root), findings=[near, on])

    verdicts = verdicts_of(report, defect, root)

    assert [v.correct for v in verdicts] == [False, True]
