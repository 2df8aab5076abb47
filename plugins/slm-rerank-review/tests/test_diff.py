"""`--diff [REV]`: only the lines changed since REV (default: the uncommitted work) are
reviewed and reported, and nothing the repository configures runs a process."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from review_fakes import COLOURS, RETRY, FakeLlama, finding
from slm_rerank_review.cli import make_group
from slm_rerank_review.diff import changed_lines, parse_patch

from slm_rerank.errors import ConfigError


def git(root: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(root), "-c", "user.name=t", "-c", "user.email=t@t",
                    *args], check=True, capture_output=True)


@pytest.fixture
def committed(project: Path) -> Path:
    git(project, "add", "-A")
    git(project, "commit", "-qm", "first")
    return project


def test_uncommitted_changes_are_the_lines_added_or_changed_and_untracked_files(
        committed: Path) -> None:
    (committed / "src" / "retry.py").write_text(RETRY.replace("delay = 0\n", "delay = 0.0\n")
                                                + "# the end\n")
    (committed / "src" / "new.py").write_text("x = 1\n")

    changes = changed_lines(committed, None)

    assert changes.lines == {"src/retry.py": {5, 13}}
    assert changes.new_files == {"src/new.py"}
    assert changes.touches("src/retry.py", 1, 5) and not changes.touches("src/retry.py", 6, 12)
    assert changes.touches("src/new.py", 1, 1)
    assert changes.described == "uncommitted work"


def test_changes_since_a_revision_include_its_later_commits(committed: Path) -> None:
    (committed / "src" / "colours.py").write_text("RED = '#f00'\nBLUE = '#00f'\n")
    git(committed, "commit", "-qam", "blue")

    changes = changed_lines(committed, "HEAD~1")

    assert changes.lines == {"src/colours.py": {2}}
    assert changes.new_files == set() and changes.described == "changes since HEAD~1"


@pytest.mark.parametrize("attributes", ["*.py -diff\n", "*.py binary\n", "*.py diff=opaque\n"])
def test_a_repositorys_attributes_cannot_hide_its_changes_from_the_review(
        committed: Path, attributes: str) -> None:
    # git prints "Binary files differ" for a file its attributes call binary: a change that
    # commits such a .gitattributes beside its code was reviewed as changing no line
    git(committed, "config", "diff.opaque.binary", "true")
    (committed / ".gitattributes").write_text(attributes)
    (committed / "src" / "colours.py").write_text("RED = '#f00'\nBLUE = '#00f'\n")
    git(committed, "add", "-A")
    git(committed, "commit", "-qm", "blue, and hide it")

    changes = changed_lines(committed, "HEAD~1")

    assert changes.lines["src/colours.py"] == {2}


def test_a_revision_that_looks_like_an_option_is_refused(committed: Path) -> None:
    with pytest.raises(ConfigError, match="must not be empty or start with '-'"):
        changed_lines(committed, "--output=/tmp/x")


def test_outside_a_git_work_tree_the_error_says_where_to_run(tmp_path: Path) -> None:
    (tmp_path / "plain").mkdir()
    with pytest.raises(ConfigError, match="run the review in a git work tree"):
        changed_lines(tmp_path / "plain", None)


def test_the_repositorys_diff_driver_textconv_and_fsmonitor_never_run(committed: Path) -> None:
    ran = committed.parent / "ran"
    script = committed.parent / "evil.sh"
    script.write_text(f"#!/bin/sh\ntouch {ran}\n")
    script.chmod(0o755)
    git(committed, "config", "diff.external", str(script))
    git(committed, "config", "diff.evil.textconv", str(script))
    git(committed, "config", "core.fsmonitor", str(script))
    (committed / ".gitattributes").write_text("*.py diff=evil\n")
    (committed / "src" / "retry.py").write_text(RETRY + "# changed\n")

    changes = changed_lines(committed, None)

    assert not ran.exists()
    assert 13 in changes.lines["src/retry.py"]


def test_a_quoted_path_in_the_patch_is_read_back() -> None:
    patch = (b'diff --git "a/caf\\303\\251 \\"x\\".py" "b/caf\\303\\251 \\"x\\".py"\n'
             b'+++ "b/caf\\303\\251 \\"x\\".py"\n@@ -1,0 +2,3 @@\n+a\n+b\n+c\n'
             b"+++ /dev/null\n@@ -1 +0,0 @@\n")

    assert parse_patch(patch) == {'café "x".py': {2, 3, 4}}


def test_a_changed_file_whose_name_is_not_utf8_is_in_the_diff_as_the_search_cites_it(
        committed: Path) -> None:
    # the search cites b"caf\xe9.py" as "caf\\xe9.py" (its byte escaped), git names the file
    import os

    (committed / os.fsdecode(b"src/caf\xe9.py")).write_text("x = 1\n")
    git(committed, "add", "-A")
    git(committed, "commit", "-qm", "second")
    (committed / os.fsdecode(b"src/caf\xe9.py")).write_text("x = 2\n")

    changes = changed_lines(committed, None)

    assert changes.touches("src/caf\\xe9.py", 1, 1)


def test_a_review_with_diff_reports_only_findings_on_changed_lines(
        committed: Path, fake_llama: FakeLlama) -> None:
    (committed / "src" / "retry.py").write_text(RETRY.replace(
        "delay = delay * 2", "delay = delay * 2  # doubled"))
    fake_llama.answers["src/retry.py"] = "\n".join([
        finding("`delay` starts at 0, so `retry` never backs off",
                "delay = delay * 2  # doubled"),
        finding("`retry` gives up with a bare `RuntimeError`", 'raise RuntimeError("gave up")'),
    ])

    result = CliRunner().invoke(make_group(), [
        "--root", str(committed), "--fast", "-e", fake_llama.url, "-q", "retry delay",
        "--json", "--diff"], catch_exceptions=False)

    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert [f["location"] for f in out["findings"]] == ["src/retry.py:11-11"]
    assert out["outside_diff"] == 1 and out["diff"] == "uncommitted work"


def test_a_review_with_diff_and_nothing_changed_asks_no_model(
        committed: Path, fake_llama: FakeLlama) -> None:
    result = CliRunner().invoke(make_group(), [
        "--root", str(committed), "--fast", "-e", fake_llama.url, "--json", "--diff"],
        catch_exceptions=False)

    assert result.exit_code == 0
    assert json.loads(result.stdout)["findings"] == []
    assert fake_llama.generations == []


def diff_review(root: Path, url: str, *args: str) -> dict:  # type: ignore[type-arg]
    result = CliRunner().invoke(make_group(), [
        *args, "--root", str(root), "--fast", "-e", url, "--json", "--diff"],
        catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


BACKOFF = finding("`delay` starts at 0, so `retry` never backs off", "delay = 0.0")


@pytest.mark.parametrize("query", [(), ("-q", "retry delay")])
def test_an_untracked_link_out_of_the_root_is_skipped_said_and_the_rest_reviewed(
        committed: Path, fake_llama: FakeLlama, query: tuple[str, ...]) -> None:
    outside = committed.parent / "secret.py"
    outside.write_text("TOKEN = 'not yours'\n")
    (committed / "src" / "leak.py").symlink_to(outside)
    (committed / "src" / "retry.py").write_text(RETRY.replace("delay = 0\n", "delay = 0.0\n"))
    fake_llama.answers["src/retry.py"] = BACKOFF

    out = diff_review(committed, fake_llama.url, *query)

    assert [f["location"] for f in out["findings"]] == ["src/retry.py:5-5"]
    assert any("src/leak.py" in w and "leads out of" in w for w in out["warnings"])
    assert not any("src/leak.py" in prompt for prompt in fake_llama.generations)


@pytest.mark.parametrize("args", [
    (),  # no query: the changed hunks
    ("-q", "zebra unicorn"),  # a query whose words retrieve nothing
    ("src/retry.py",),  # the changed file named
    ("src",),
    ("*.py",),
])
def test_a_diff_review_reviews_the_changed_hunks_whatever_the_query_retrieves(
        committed: Path, fake_llama: FakeLlama, args: tuple[str, ...], monkeypatch: Any) -> None:
    monkeypatch.chdir(committed)
    (committed / "src" / "retry.py").write_text(RETRY.replace("delay = 0\n", "delay = 0.0\n"))
    fake_llama.answers["src/retry.py"] = BACKOFF

    out = diff_review(committed, fake_llama.url, *args)

    assert out["reviewed"] == ["src/retry.py:4-12"]
    assert [f["location"] for f in out["findings"]] == ["src/retry.py:5-5"]


def test_a_changed_file_not_named_is_not_reviewed(
        committed: Path, fake_llama: FakeLlama) -> None:
    (committed / "src" / "retry.py").write_text(RETRY + "# changed\n")
    (committed / "src" / "colours.py").write_text(COLOURS + "BLUE = '#00f'\n")

    out = diff_review(committed, fake_llama.url, str(committed / "src" / "colours.py"))

    assert out["reviewed"] == ["src/colours.py:1-3"]
    assert any("1 changed files are outside the paths given" in n for n in out["notes"])


def test_a_changed_doc_page_is_left_out_and_counted_not_reviewed_as_code(
        committed: Path, fake_llama: FakeLlama) -> None:
    (committed / "docs").mkdir()
    (committed / "docs" / "retry.rst").write_text("Retry\n=====\n\n``retry`` backs off.\n")
    (committed / "CHANGELOG.md").write_text("- retry backs off\n")
    (committed / "src" / "retry.py").write_text(RETRY.replace("delay = 0\n", "delay = 0.0\n"))

    out = diff_review(committed, fake_llama.url, "-q", "retry backs off")

    assert out["reviewed"] == ["src/retry.py:4-12"]
    assert not any("File: docs/" in p or "CHANGELOG" in p for p in fake_llama.generations)
    assert out["not_code"] == ["CHANGELOG.md (changelog)", "docs/retry.rst (documentation)"]
    assert any("2 changed files are not code" in n for n in out["notes"])


def test_more_changed_chunks_than_top_are_cut_with_a_warning_in_the_diffs_order(
        committed: Path, fake_llama: FakeLlama) -> None:
    (committed / "src" / "retry.py").write_text(RETRY + "\n\ndef other():\n    return 1\n")
    (committed / "src" / "colours.py").write_text(COLOURS + "BLUE = '#00f'\n")

    out = diff_review(committed, fake_llama.url, "--top", "1")

    assert out["reviewed"] == ["src/colours.py:1-3"]
    assert any("2 chunks hold changed lines; the first 1 are reviewed" in w
               for w in out["warnings"])


def test_a_named_path_that_does_not_exist_is_an_error_naming_it(
        committed: Path, fake_llama: FakeLlama) -> None:
    (committed / "src" / "retry.py").write_text(RETRY + "# changed\n")

    result = CliRunner().invoke(make_group(), [
        str(committed / "scr"), "--root", str(committed), "--fast", "-e", fake_llama.url,
        "--diff"])

    assert result.exit_code == 1
    assert "scr' does not exist" in result.output
    assert fake_llama.generations == []
