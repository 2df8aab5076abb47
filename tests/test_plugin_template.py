"""The plugin template does what docs/writing-a-plugin.md says: install, list, run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
TEMPLATE = ROOT / "contrib" / "plugin-template"
BIN = Path(sys.executable).parent


@pytest.fixture(scope="module")
def template_env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """The environment of a user who ran `pip install ./my-plugin`."""
    prefix = tmp_path_factory.mktemp("prefix")
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation",
         "--prefix", str(prefix), str(TEMPLATE)],
        check=True, capture_output=True,
    )
    site = next(prefix.glob("lib/python*/site-packages"))
    return {**os.environ, "PYTHONPATH": str(site)}


def test_the_template_installs_shows_up_and_runs(
        tmp_path: Path, template_env: dict[str, str]) -> None:
    env = template_env

    listed = subprocess.run([BIN / "slm-rerank", "plugins", "--format", "json"], env=env,
                            capture_output=True, text=True, check=True)
    rows = json.loads(listed.stdout)
    assert [(r["distribution"], r["registers"]) for r in rows] == [
        ("slm-rerank-example", {"register_output_formatters": ["paths"]})]

    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "retry.py").write_text("def retry():\n    pass\n")
    (repo / "colour.py").write_text("RED = 1\n")
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    found = subprocess.run([BIN / "slm-rerank", "-q", "retry", "--fast", "--root", str(repo),
                            "--format", "paths"], env=env, capture_output=True, text=True)
    assert found.returncode == 0, found.stderr
    assert found.stdout == "retry.py\n"


def test_the_template_contract_suite_passes_against_the_template(
        tmp_path: Path, template_env: dict[str, str]) -> None:
    env = template_env
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           str(TEMPLATE / "tests")], env=env, capture_output=True, text=True,
                          cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "6 passed" in done.stdout
