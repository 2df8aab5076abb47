"""Which order a search used and why each result sits where it does, end to end: JSON's
``order`` and each result's ``why``, ``-v``'s why lines, ``--fixed-order``, and a
per-repository model file that cannot be used (one warning, the fixed order)."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest
from search_fixtures import cli, make_repo

import slm_rerank
from slm_rerank.lexical.ranker import MODEL_FORMAT, repository_model_path, shipped_model

#: the rare word "templating" names one file; the common words fill the others
FILES = {
    "pkg/templating.py": ('"""Find and load templates."""\n\n\n'
                          "def load_template(name):\n    return open(name).read()\n"),
    "pkg/app.py": ('class App:\n    """The app: it finds the app config, the app folder, the '
                   'app templates, the app files and the templating loader."""\n\n'
                   "    def find(self, name):\n        return self.folder / name\n"),
    "pkg/config.py": "def find_config(app):\n    return app.config\n",
    "tests/test_app.py": "def test_app_find():\n    assert App().find('x')\n",
}
QUERY = "how does the app find the templating loader"

#: a model that weighs the path naming a query word above all
PATH_MODEL = {"format": MODEL_FORMAT, "name": "path-first",
              "features": ["names_file", "body", "kind_test"],
              "mean": [0.0, 0.0, 0.0], "scale": [1.0, 1.0, 1.0], "weights": [3.0, 0.5, -1.0],
              "bias": 0.0, "meta": {"version": "7"}}


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return make_repo(tmp_path / "repo", FILES)


def _own_model(cache: Path, repo: Path, content: str) -> Path:
    path = repository_model_path(cache, repo)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(content)
    return path


def _json(repo: Path, *args: str) -> dict:
    return cli("-q", QUERY, "--fast", "--format", "json", "-k", "4", *args, cwd=repo).json()


def _places(doc: dict) -> list[tuple[str, int, int, float]]:
    return [(r["path"], r["start_line"], r["end_line"], r["lexical_score"])
            for r in doc["results"]]


def test_the_shipped_model_orders_by_default_and_json_says_which_and_what_the_score_is(
        repo: Path) -> None:
    doc = _json(repo)

    assert doc["order"] == {"kind": "learned", "model": shipped_model().name,
                            "origin": "shipped", "file": None,
                            "version": doc["order"]["version"], "reason": None}
    assert doc["score_kind"] == "learned"
    assert doc["score_meaning"].startswith("score is the learned ranker's estimate, 0 to 1")
    scores = [r["score"] for r in doc["results"]]
    assert scores == sorted(scores, reverse=True)
    assert all(0 <= s <= 1 for s in scores) and abs(sum(scores) - 1) < 1e-3
    for row in doc["results"]:
        assert isinstance(row["why"], list)
        for reason in row["why"]:
            assert set(reason) == {"feature", "effect", "says"} and reason["says"]


def test_a_repository_model_puts_the_file_the_rare_word_names_first_and_says_why(
        repo: Path, isolated_home: Path) -> None:
    own = _own_model(isolated_home, repo, json.dumps(PATH_MODEL))

    doc = _json(repo)

    assert doc["order"] == {"kind": "learned", "model": "path-first",
                            "origin": "this repository", "file": str(own), "version": "7",
                            "reason": None}
    first = doc["results"][0]
    assert first["path"] == "pkg/templating.py"
    top = first["why"][0]
    assert top["feature"] == "names_file" and top["effect"] > 0
    assert "path names 'templating'" in top["says"]
    effects = [abs(r["effect"]) for r in first["why"]]
    assert effects == sorted(effects, reverse=True)
    test_row = next(r for r in doc["results"] if r["path"] == "tests/test_app.py")
    # measured from the average candidate: the one test file among four is below it
    kind = next(r for r in test_row["why"] if r["feature"] == "kind_test")
    assert kind["effect"] < 0 and kind["says"] == "a test file"


def test_lexical_score_stays_the_lexical_score_under_the_learned_order(
        repo: Path, isolated_home: Path) -> None:
    _own_model(isolated_home, repo, json.dumps(PATH_MODEL))

    learned = {r["path"]: r["lexical_score"] for r in _json(repo)["results"]}
    fixed = {r["path"]: r["lexical_score"] for r in _json(repo, "--fixed-order")["results"]}

    assert learned == fixed


def test_verbose_prints_a_why_line_per_result_under_the_table(
        repo: Path, isolated_home: Path) -> None:
    _own_model(isolated_home, repo, json.dumps(PATH_MODEL))

    run = cli("-q", QUERY, "--fast", "-v", cwd=repo)

    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    assert lines[0].startswith("# location  score  symbol  (score: learned ranker's estimate")
    shown = [line.split(":", 1)[0] for line in lines[1:]]
    why = [line.removeprefix("slm-rerank: ") for line in run.stderr.splitlines()
           if line.startswith("slm-rerank: why ")]
    assert [line.split(":", 1)[0].removeprefix("why ") for line in why] == shown
    assert re.match(r"why pkg/templating\.py: path names 'templating' \(rare here\) \+\d+\.\d; ",
                    why[0])
    assert "order: learned ranker 'path-first' fitted to this repository" in run.stderr


def test_fixed_order_gives_lexical_scores_and_no_why(repo: Path, isolated_home: Path) -> None:
    _own_model(isolated_home, repo, json.dumps(PATH_MODEL))

    doc = _json(repo, "--fixed-order")
    verbose = cli("-q", QUERY, "--fast", "-v", "--fixed-order", cwd=repo)

    assert doc["score_kind"] == "lexical"
    assert doc["score_meaning"].startswith("score is the lexical score")
    assert doc["order"]["kind"] == "fixed" and doc["order"]["model"] is None
    assert "learned_order = false, from flag: --fixed-order" in doc["order"]["reason"]
    assert all(r["why"] is None for r in doc["results"])
    assert [r["score"] for r in doc["results"]] == [r["lexical_score"] for r in doc["results"]]
    assert "slm-rerank: why " not in verbose.stderr
    assert verbose.stdout.startswith("# location  score  symbol  (score: lexical")


def test_a_corrupt_repository_model_is_one_warning_and_the_fixed_order(
        repo: Path, isolated_home: Path) -> None:
    own = _own_model(isolated_home, repo, '{"format": 1, "features": [')

    run = cli("-q", QUERY, "--fast", "--format", "json", "-k", "4", cwd=repo)
    fixed = _json(repo, "--fixed-order")

    doc = run.json()
    lines = run.stderr.splitlines()
    assert len(lines) == 1 and str(own) in lines[0], run.stderr
    assert "not valid JSON" in lines[0] and "fixed lexical order is used" in lines[0]
    assert doc["warnings"] == [lines[0].removeprefix("slm-rerank: ")]
    assert _places(doc) == _places(fixed)
    assert [r["score"] for r in doc["results"]] == [r["score"] for r in fixed["results"]]
    assert doc["score_kind"] == "lexical"
    assert doc["order"] == {"kind": "fixed", "model": None, "origin": None, "file": None,
                            "version": None,
                            "reason": "fixed lexical factors (this repository's model is "
                                      "unusable)"}


def test_the_python_api_takes_the_same_knob(repo: Path, isolated_home: Path) -> None:
    _own_model(isolated_home, repo, json.dumps(PATH_MODEL))

    learned = slm_rerank.search(QUERY, repo)
    fixed = slm_rerank.search(QUERY, repo, learned_order=False)

    assert (learned.score_kind, learned.order and learned.order.model) == ("learned",
                                                                           "path-first")
    assert learned.results[0].path == "pkg/templating.py" and learned.results[0].why
    assert fixed.score_kind == "lexical" and all(c.why is None for c in fixed.results)
    assert fixed.order is not None and "search(learned_order=...)" in (fixed.order.reason or "")


def test_a_result_placed_by_its_commits_messages_names_the_words_they_said(
        tmp_path: Path) -> None:
    """Two sibling files the query's words match alike; the commits that changed one of
    them said the query's words, and its reason, in JSON and in ``-v``, names them."""
    body = "def render(value):\n    return value\n"
    repo = make_repo(tmp_path / "repo", {"pkg/table.py": body, "pkg/grid.py": body})
    for message, name in (("Start", "pkg/grid.py"), ("Fix wrapping of long cells",
                                                     "pkg/table.py"),
                          ("Cells wrap at the column width", "pkg/table.py"),
                          ("Tidy up", "pkg/grid.py")):
        with open(repo / name, "a", encoding="utf-8") as handle:
            handle.write("# edited\n")
        subprocess.run(["git", "-C", str(repo), "add", "-A"], check=True)
        subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t",
                        "commit", "-qm", message], check=True)
    query = "render wraps long cells wrongly"

    doc = cli("-q", query, "--fast", "--format", "json", cwd=repo).json()
    verbose = cli("-q", query, "--fast", "-v", cwd=repo)

    first = doc["results"][0]
    assert first["path"] == "pkg/table.py"
    told = next(r for r in first["why"] if r["feature"] == "messages")
    assert told["effect"] > 0
    assert told["says"].startswith("the messages of the commits that changed it say ")
    assert {"'wrap'", "'cell'", "'long'"} <= set(re.findall(r"'[a-z]+'", told["says"]))
    line = next(x for x in verbose.stderr.splitlines() if "why pkg/table.py" in x)
    assert told["says"] in line
