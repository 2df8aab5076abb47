"""Renamed flags: the new name works; the old one, never in a published release, is gone."""

from __future__ import annotations

from pathlib import Path

from search_fixtures import cli

SERVICE = "import json\n\n\ndef save_checkpoint(state):\n    json.dumps(state)\n    return 1\n"


def make_repo(tmp_path: Path) -> Path:
    (tmp_path / "store.py").write_text(SERVICE)
    return tmp_path


def test_skeleton_gives_each_file_its_skeleton_alone(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    doc = cli("--fast", "--skeleton", "--format", "json", "-q", "save checkpoint",
              cwd=repo).json()

    stub = doc["results"][0]["stub"]
    assert "def save_checkpoint(state):" in stub["text"]
    assert "json.dumps(state)" not in stub["text"]  # its body is folded
    assert stub["folded_lines"] > 0


def test_the_old_name_slice_is_a_usage_error(tmp_path: Path) -> None:
    old = cli("--fast", "--slice", "--format", "json", "-q", "save checkpoint",
              cwd=make_repo(tmp_path))

    assert old.returncode == 2
    assert "--slice" in old.stderr and old.stdout == ""


def test_help_lists_skeleton_and_not_slice(tmp_path: Path) -> None:
    shown = cli("search", "--help", cwd=tmp_path).stdout

    assert "--skeleton" in shown
    assert "--slice " not in shown and "--slice\n" not in shown
    assert "--by-slice" in shown


def test_stub_and_skeleton_together_are_a_usage_error_naming_both(tmp_path: Path) -> None:
    run = cli("--fast", "--stub", "--skeleton", "-q", "save", cwd=make_repo(tmp_path))

    assert run.returncode == 2
    assert "either --stub" in run.stderr and "or --skeleton" in run.stderr
