"""--stub and --slice as a user meets them: after the table, in JSON, and when files misbehave."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from search_fixtures import RETRY, cli, make_repo, search
from slm_rerank_formatters import render_markdown

from slm_rerank import pipeline
from slm_rerank.context.grouping import SliceGroup
from slm_rerank.context.stubs import build_stub
from slm_rerank.report import Citation, Report

#: A module where the cited method has siblings to fold.
SERVICE = """\
import json

PATH = "db.json"


def load():
    with open(PATH) as handle:
        return json.load(handle)


def save_checkpoint(state):
    data = json.dumps(state)
    with open(PATH, "w") as handle:
        handle.write(data)
    return len(data)


def close():
    global PATH
    PATH = None
    return True
"""


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return make_repo(tmp_path / "repo", {"store.py": SERVICE, "retry.py": RETRY})


def numbered(stub_text: str) -> dict[int, str]:
    """line number -> source line, for every numbered line of a stub."""
    out = {}
    for line in stub_text.splitlines():
        match = re.match(r"^\s*(\d+)[> ] (.*)$", line)
        if match:
            out[int(match.group(1))] = match.group(2)
    return out


def test_json_gives_each_result_a_stub_with_true_line_numbers(repo: Path) -> None:
    doc = cli("--fast", "--stub", "--chunks", "--format", "json", "-k", "1",
              "-q", "save checkpoint", cwd=repo).json()

    result = doc["results"][0]
    stub = result["stub"]
    assert result["symbol"] == "save_checkpoint"
    source = SERVICE.splitlines()
    lines = numbered(stub["text"])
    for number in range(result["start_line"], result["end_line"] + 1):
        assert lines[number] == source[number - 1]  # the cited method, whole and in place
    assert "… (folded 2 lines)" in stub["text"]  # load's body
    assert 7 not in lines and 8 not in lines  # load's body is not shown
    assert lines[6] == "def load():" and lines[1] == "import json"
    assert stub["method"] == "python"
    assert stub["kept_lines"] + stub["folded_lines"] == stub["total_lines"] == len(source)


def test_skeleton_folds_the_cited_method_too(repo: Path) -> None:
    doc = cli("--fast", "--skeleton", "--chunks", "--format", "json", "-k", "1",
              "-q", "save checkpoint", cwd=repo).json()

    text = doc["results"][0]["stub"]["text"]
    lines = numbered(text)
    assert lines[11] == "def save_checkpoint(state):"
    assert 12 not in lines  # its body is folded
    assert re.search(r"^\s*11> def save_checkpoint", text, re.M)  # marked as the cited one


def test_text_output_puts_the_stubs_after_the_table(repo: Path) -> None:
    run = cli("--fast", "--stub", "-k", "2", "-q", "save checkpoint", cwd=repo)

    assert run.returncode == 0, run.stderr
    table, _, stubs = run.stdout.partition("\n--- 1. ")
    assert table.splitlines()[0].startswith("# location  score  symbol")
    assert table.splitlines()[1].startswith("store.py:")
    assert stubs.startswith("store.py:")
    assert "stub: " in stubs.splitlines()[0]
    assert "def save_checkpoint(state):" in stubs


def test_without_the_flags_json_stubs_are_null_and_text_has_none(repo: Path) -> None:
    doc = cli("--fast", "--format", "json", "-q", "save checkpoint", cwd=repo).json()
    run = cli("--fast", "-q", "save checkpoint", cwd=repo)

    assert all(r["stub"] is None for r in doc["results"])
    assert "--- 1." not in run.stdout


def test_stub_and_skeleton_together_are_a_usage_error(repo: Path) -> None:
    run = cli("--fast", "--stub", "--skeleton", "-q", "save", cwd=repo)

    assert run.returncode == 2
    assert "either --stub" in run.stderr


def test_markdown_puts_each_stub_in_a_code_fence(repo: Path) -> None:
    run = cli("--fast", "--stub", "-k", "1", "--format", "markdown", "-q", "save checkpoint",
              cwd=repo)

    assert "\n```\n" in run.stdout
    assert "def save_checkpoint(state):" in run.stdout.split("```")[1]


def test_a_python_file_that_does_not_parse_falls_back_with_a_note(tmp_path: Path) -> None:
    broken = "def save_checkpoint(state:\n    return state\n" + "x = 1\n" * 40
    repo = make_repo(tmp_path / "repo", {"broken.py": broken})

    doc = cli("--fast", "--stub", "--format", "json", "-q", "save checkpoint",
              cwd=repo).json()

    stub = doc["results"][0]["stub"]
    assert stub["method"] == "context"
    assert "does not parse" in stub["note"]
    assert "def save_checkpoint(state:" in stub["text"]


def test_a_file_deleted_after_ranking_still_gets_its_stub_from_what_was_read(
        repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real_rank = pipeline.rank

    def rank_then_delete(*args: object, **kwargs: object) -> pipeline.Ranked:
        ranked = real_rank(*args, **kwargs)  # type: ignore[arg-type]
        (repo / "store.py").unlink()
        return ranked

    monkeypatch.setattr(pipeline, "rank", rank_then_delete)

    report = search(repo, "save checkpoint", stubs="stub", top_k=1)

    assert not (repo / "store.py").exists()
    assert report.results[0].path == "store.py"
    assert "def save_checkpoint(state):" in report.results[0].stub.text


def test_a_huge_cited_file_gets_a_capped_stub_that_says_so(tmp_path: Path) -> None:
    functions = "".join(f"def handler_{i}(request):\n    return {i}\n\n\n" for i in range(3000))
    huge = "import os\n\n\n" + functions + "def save_checkpoint():\n" + \
        "".join(f"    step_{i} = {i}\n" for i in range(2000))
    repo = make_repo(tmp_path / "repo", {"huge.py": huge})

    doc = cli("--fast", "--stub", "--format", "json", "-q", "save checkpoint",
              cwd=repo).json()

    stub = doc["results"][0]["stub"]
    assert stub["total_lines"] == len(huge.splitlines())
    assert stub["kept_lines"] < 1000
    assert stub["note"] and "cut" in stub["note"]


@pytest.mark.parametrize("fmt", ["text", "markdown"])
def test_escape_sequences_in_a_stubbed_files_code_are_shown_not_obeyed(
        tmp_path: Path, fmt: str) -> None:
    code = ('def save_checkpoint():\n    banner = "\x1b]0;pwned\x07\x1b[2J"\n'
            '    # \u2028- forged line\n    return banner\n')
    repo = make_repo(tmp_path / "repo", {"svc.py": code})

    run = cli("-q", "save checkpoint", "--fast", "--stub", "--format", fmt, cwd=repo)

    assert run.returncode == 0, run.stderr
    assert not re.search("[\x1b\x07\u2028]", run.stdout), repr(run.stdout)
    assert 'banner = "\\x1b]0;pwned\\x07\\x1b[2J"' in run.stdout
    assert "# \\u2028- forged line" in run.stdout


# --- markdown ---------------------------------------------------------------------------


def stubbed_report(path: str, by_slice: bool = False) -> Report:
    citation = Citation(path=path, start_line=1, end_line=2, symbol="init", score=1.0,
                        lexical_score=1.0)
    citation.stub = build_stub(path, "def init():\n    return 1\n", [(1, 2)])
    slices = [SliceGroup(None, [0], 1.0)] if by_slice else None
    return Report(query="init", root="/r", mode="fast", results=[citation], slices=slices)


@pytest.mark.parametrize("path", ["pkg/__init__.py", "a*b*c.py", "x|y.py"])
def test_markdown_names_a_stubbed_file_in_a_code_span_so_it_shows_as_written(path: str):
    # Unquoted, `pkg/__init__.py` renders as "pkg/**init**.py" in bold.
    out = render_markdown(stubbed_report(path))

    heading = next(line for line in out.splitlines() if "stub:" in line)
    assert f"`{path}:1-2`" in heading


def test_markdown_does_not_show_the_files_outside_any_slice_as_a_slice_named_so():
    out = render_markdown(stubbed_report("setup.py", by_slice=True))

    assert "### outside any slice" in out
    assert "`(outside any slice)`" not in out
