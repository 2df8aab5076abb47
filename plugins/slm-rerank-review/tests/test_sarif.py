"""`--format sarif`: SARIF 2.1.0 that validates against the official schema, one result per
reported finding at its evidence lines, and nothing for what was dropped."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
from click.testing import CliRunner
from review_fakes import FakeLlama, finding
from slm_rerank_review.cli import make_group
from slm_rerank_review.findings import Candidate, EvidenceSpan, Finding, GateScores
from slm_rerank_review.review import ReviewReport
from slm_rerank_review.sarif import render_sarif

SCHEMA = json.loads((Path(__file__).parent / "fixtures" / "sarif-2.1.0-rtm.5.json")
                    .read_text(encoding="utf-8"))


def validate(log: dict[str, Any]) -> None:
    jsonschema.Draft4Validator(SCHEMA).validate(log)


def test_the_schema_refuses_what_is_not_sarif() -> None:
    # the check below means something only if the schema can fail
    try:
        validate({"version": "2.1.0", "runs": [{"results": []}]})  # a run without its tool
    except jsonschema.ValidationError:
        return
    raise AssertionError("the SARIF schema accepted a run without a tool")


def test_a_review_as_sarif_validates_and_cites_the_evidence_lines(
        project: Path, fake_llama: FakeLlama) -> None:
    fake_llama.answers["src/retry.py"] = "\n".join([
        finding("`delay` starts at 0, so `retry` never backs off", "delay = delay * 2"),
        finding("`onRetry` is never called", "delay = delay * 2"),   # dropped
    ])

    result = CliRunner().invoke(make_group(), [
        str(project / "src"), "--root", str(project), "--fast", "-e", fake_llama.url,
        "-q", "retry backoff delay", "--format", "sarif"], catch_exceptions=False)

    assert result.exit_code == 0, result.output
    log = json.loads(result.stdout)
    validate(log)
    [run] = log["runs"]
    [reported] = run["results"]
    location = reported["locations"][0]["physicalLocation"]
    assert location["artifactLocation"] == {"uri": "src/retry.py", "uriBaseId": "%SRCROOT%"}
    assert location["region"]["startLine"] == location["region"]["endLine"] == 11
    assert location["region"]["snippet"]["text"] == "            delay = delay * 2"
    assert reported["level"] == "error"
    assert run["originalUriBaseIds"]["%SRCROOT%"]["uri"] == project.as_uri() + "/"


def test_an_odd_path_is_a_percent_encoded_relative_uri_and_still_validates(
        tmp_path: Path) -> None:
    candidate = Candidate("src/my file#1.py", 3, 9, "`x` leaks \x1b[31m", "x = open(p)",
                          ("x",), "note")
    report = ReviewReport("q", str(tmp_path), findings=[
        Finding(candidate, EvidenceSpan(4, 4, ("x = open(p)",)), GateScores(True, True))])

    text = render_sarif(report)

    log = json.loads(text)
    validate(log)
    result = log["runs"][0]["results"][0]
    assert result["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] == \
        "src/my%20file%231.py"
    assert "\x1b" not in text and result["message"]["text"] == "`x` leaks \x1b[31m"


def test_no_findings_is_a_valid_log_with_no_results(tmp_path: Path) -> None:
    log = json.loads(render_sarif(ReviewReport("q", str(tmp_path))))

    validate(log)
    assert log["runs"][0]["results"] == []


def test_a_finding_in_a_file_whose_name_is_not_utf8_is_reported_in_every_format(
        project: Path, fake_llama: FakeLlama) -> None:
    # a repository may name a file with any bytes: b"caf\xe9.py" is not UTF-8
    import os

    from review_fakes import RETRY
    name = os.fsdecode(b"src/caf\xe9.py")
    (project / name).write_text(RETRY, encoding="utf-8")
    (project / "src" / "retry.py").unlink()
    # the search cites (and the model is shown) the name with its byte escaped
    fake_llama.answers["src/caf\\xe9.py"] = finding(
        "`delay` starts at 0, so `retry` never backs off", "delay = delay * 2")

    outputs = {}
    for form in ("sarif", "json", "text"):
        result = CliRunner().invoke(make_group(), [
            str(project / "src"), "--root", str(project), "--fast", "-e", fake_llama.url,
            "-q", "retry backoff delay", "--format", form])
        assert result.exit_code == 0, (form, result.output, result.exception)
        outputs[form] = result.stdout_bytes.decode("utf-8")  # what is printed encodes

    log = json.loads(outputs["sarif"])
    validate(log)
    [reported] = log["runs"][0]["results"]
    # the URI names the file's own bytes, percent-encoded, so a viewer opens that file
    assert reported["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] == \
        "src/caf%E9.py"
    assert json.loads(outputs["json"])["findings"]
    assert "caf\\xe9.py" in outputs["text"]
