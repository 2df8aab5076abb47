"""`--diff [REV]`: only the lines changed since REV (default: the uncommitted work) are
reviewed and reported, and nothing the repository configures runs a process."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner
from review_fakes import RETRY, FakeLlama, finding
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
