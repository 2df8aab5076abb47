"""A profile's judge weight is shown with where it was measured, or that it never was."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

from click.testing import CliRunner, Result
from pytest_httpserver import HTTPServer
from slm_rerank_qwen import QWEN

from slm_rerank.cli.commands import cli
from slm_rerank.model.profiles import weight_text
from slm_rerank.registrations import ModelProfile

WIRE = Path(__file__).resolve().parents[1] / "fixtures" / "wire"

PROFILE = ModelProfile(name="p", description="d", instruction="i", completion="{document}",
                       yes_words=("yes",), no_words=("no",), judge_weight=1.0)


def recorded(name: str) -> Any:
    return json.loads((WIRE / name).read_text(encoding="utf-8"))["exchanges"][0]["response"]


def qwen_server(httpserver: HTTPServer) -> str:
    """A llama.cpp server serving the Qwen judge, as discovery sees it (recorded answers)."""
    models = recorded("llamacpp-v1-models.json")
    models["data"][0]["id"] = "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"
    httpserver.expect_request("/v1/models").respond_with_json(models)
    httpserver.expect_request("/props").respond_with_json(recorded("llamacpp-props.json"))
    return httpserver.url_for("/").rstrip("/")


def run(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args))


def test_a_weight_nobody_measured_says_not_measured() -> None:
    assert weight_text(PROFILE) == "judge weight 1.0, not measured"


def test_a_measured_weight_says_where_it_was_measured() -> None:
    measured = dataclasses.replace(PROFILE, judge_weight=0.4,
                                   weight_measured="docs/benchmarks.md, judge weight")

    assert weight_text(measured) == ("judge weight 0.4, measured: docs/benchmarks.md, "
                                     "judge weight")


def test_the_field_is_empty_unless_a_profile_says_where(isolated_home: Path) -> None:
    assert PROFILE.weight_measured == ""


def test_endpoints_shows_the_chosen_profiles_weight_and_that_it_was_not_measured(
        isolated_home: Path, httpserver: HTTPServer) -> None:
    url = qwen_server(httpserver)

    text = run("endpoints", "-e", url)
    (row,) = json.loads(run("endpoints", "-e", url, "--format", "json").output)

    assert text.exit_code == 0, text.output
    assert ("profile qwen (judge weight 1.0 (0.1 for a one-line query), measured: "
            "docs/benchmarks.md" in text.output)
    assert (row["profile"], row["judge_weight"], row["weight_measured"]) == (
        "qwen", 1.0, QWEN.weight_measured)


def test_plugins_shows_each_profiles_weight_and_whether_it_was_measured() -> None:
    text = run("plugins").output
    rows = json.loads(run("plugins", "--format", "json").output)

    # qwen-think claims Qwen3 models nobody here has run; the two measured ones say where
    assert "      qwen-think: judge weight 1.0, not measured\n" in text
    assert "      lfm: judge weight 1.0, not measured\n" in text
    assert "      qwen: judge weight 1.0 (0.1 for a one-line query), measured: docs/" in text
    assert "      gemma-base: judge weight 0.1, measured: docs/benchmarks.md" in text
    qwen = next(r for r in rows if r["name"] == "qwen")
    assert qwen["judge_weights"]["qwen-think"] == {"judge_weight": 1.0, "weight_measured": ""}
    assert qwen["judge_weights"]["qwen"]["weight_measured"] == QWEN.weight_measured
    sources = next(r for r in json.loads(run("plugins", "--all", "--format", "json").output)
                   if r["name"] == "ripgrep")
    assert sources["judge_weights"] == {}


def test_a_search_names_the_profiles_weight_in_json_and_verbose(
        isolated_home: Path, httpserver: HTTPServer, repo: Path, monkeypatch: Any) -> None:
    url = qwen_server(httpserver)  # it answers no prompt: the search degrades, visibly
    monkeypatch.chdir(repo)

    done = run("-q", "retry", "-e", url, "--format", "json", "-v")

    assert done.exit_code == 0, done.output
    model = json.loads(done.stdout)["model"]
    # a one-line query: the profile's short_query_weight, and where it was measured
    assert (model["profile"], model["judge_weight"], model["weight_measured"]) == (
        "qwen", 0.1, QWEN.weight_measured)
    assert QWEN.weight_measured.startswith("docs/benchmarks.md")
    assert "profile qwen:" in done.stderr
    assert ("judge weight 1.0 (0.1 for a one-line query), measured: docs/benchmarks.md"
            in done.stderr)
    assert ("judge weight 0.1 from profile qwen, short_query_weight (a one-line query)"
            in done.stderr)
