"""The plugin template does what docs/writing-a-plugin.md says: copy, rename, install, run."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from search_fixtures import make_repo

from slm_rerank.plugins import BUILTIN_DISTRIBUTIONS, LOAD_PLUGINS_ENV

ROOT = Path(__file__).resolve().parent.parent
TEMPLATE = ROOT / "contrib" / "plugin-template"
GUIDE = ROOT / "docs" / "writing-a-plugin.md"
BIN = Path(sys.executable).parent
# Leftovers of an in-place install or test run: never part of what a user copies.
ARTIFACTS = shutil.ignore_patterns("build", "*.egg-info", "__pycache__")


def copy_template(dest: Path) -> Path:
    """The template as git holds it, copied to ``dest`` (the checkout stays untouched)."""
    shutil.copytree(TEMPLATE, dest, ignore=ARTIFACTS)
    return dest


def install(project: Path, prefix: Path, distribution: str) -> dict[str, str]:
    """The environment of a user who ran `pip install ./project` and loads only it.

    Only the built-ins and ``distribution`` load, so a plugin installed in this virtualenv
    (the template itself, say) does not clash with the copy under test.
    """
    # --ignore-installed: without it pip first uninstalls a same-named distribution from
    # this environment, i.e. the template a user installed as the guide says.
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation",
         "--ignore-installed", "--prefix", str(prefix), str(project)],
        check=True, capture_output=True,
    )
    site = next(prefix.glob("lib/python*/site-packages"))
    # no warm process: this environment is built before the test's isolation, so one
    # started here would live in the user's own folders after the test
    return {**os.environ, "PYTHONPATH": str(site), "SLM_RERANK_WARM_PROCESS": "0",
            LOAD_PLUGINS_ENV: ",".join([*sorted(BUILTIN_DISTRIBUTIONS), distribution])}


def run_tests(project: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """pytest over the project's own tests, reporting every outcome (-rA)."""
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-rA", "-p", "no:cacheprovider", "tests"],
        env=env, capture_output=True, text=True, cwd=project,
    )


def outcomes(done: subprocess.CompletedProcess[str]) -> dict[str, str]:
    """Test id -> PASSED/FAILED/ERROR/SKIPPED, from the -rA summary."""
    found = re.findall(r"^(PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS) (\S+)", done.stdout,
                       flags=re.M)
    return {test: outcome for outcome, test in found}


def assert_all_passed(done: subprocess.CompletedProcess[str], test_file: str) -> None:
    results = outcomes(done)
    assert done.returncode == 0, done.stdout + done.stderr
    # nothing skipped: the contract's entry-point test ran against the installed copy
    assert results and set(results.values()) == {"PASSED"}, done.stdout
    assert any(t.startswith(f"{test_file}::TestPathsFormat::") for t in results), done.stdout
    assert f"{test_file}::test_each_path_once_in_rank_order" in results, done.stdout


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    """A copy of the template, installed as the guide's step 3 says."""
    project = copy_template(tmp_path_factory.mktemp("copy") / "slm-rerank-example")
    env = install(project, tmp_path_factory.mktemp("prefix"), "slm-rerank-example")
    return project, env


def installed_here(distribution: str) -> str | None:
    """Where ``distribution`` is installed in this environment (not the test's prefix)."""
    done = subprocess.run(
        [sys.executable, "-c", "import importlib.metadata as m, sys; "
         "print(m.distribution(sys.argv[1])._path)", distribution],
        capture_output=True, text=True, env={**os.environ, "PYTHONPATH": ""},
    )
    return done.stdout.strip() if done.returncode == 0 else None


def test_testing_the_template_leaves_the_users_install_of_it_alone(tmp_path: Path) -> None:
    before = installed_here("slm-rerank-example")
    if before is None:
        pytest.skip("the template is not installed in this environment")

    install(copy_template(tmp_path / "copy"), tmp_path / "prefix", "slm-rerank-example")

    assert installed_here("slm-rerank-example") == before


def test_the_template_installs_shows_up_and_runs(
        tmp_path: Path, template: tuple[Path, dict[str, str]]) -> None:
    _, env = template

    listed = subprocess.run([BIN / "slm-rerank", "plugins", "--format", "json"], env=env,
                            capture_output=True, text=True, check=True)
    rows = json.loads(listed.stdout)
    # beside the model families this project ships, installed separately too
    assert [(r["distribution"], r["registers"]) for r in rows
            if r["distribution"] not in BUILTIN_DISTRIBUTIONS] == [
        ("slm-rerank-example", {"register_output_formatters": ["paths"]})]

    repo = make_repo(tmp_path / "repo", {"retry.py": "def retry():\n    pass\n",
                                         "colour.py": "RED = 1\n"})
    found = subprocess.run([BIN / "slm-rerank", "-q", "retry", "--fast", "--root", str(repo),
                            "--format", "paths"], env=env, capture_output=True, text=True)
    assert found.returncode == 0, found.stderr
    assert found.stdout == "retry.py\n"


def test_the_template_tests_pass_against_the_installed_template(
        template: tuple[Path, dict[str, str]]) -> None:
    project, env = template

    done = run_tests(project, env)

    assert_all_passed(done, "tests/test_example.py")


def guide_rename_commands() -> str:
    """The shell block of the guide's step 1, exactly as a user would paste it."""
    step = GUIDE.read_text().split("## From a checkout: copy the template", 1)[1].split(
        "\n## ", 1)[0]
    blocks = re.findall(r"^```sh\n(.*?)^```", step, flags=re.M | re.S)
    assert len(blocks) == 1, ("'From a checkout' in docs/writing-a-plugin.md holds one "
                              "```sh block")
    return blocks[0]


def test_the_guides_rename_commands_leave_no_trace_of_the_template_name(
        tmp_path: Path) -> None:
    checkout = tmp_path / "checkout"
    # As it may be on a user's disk: with leftovers of an earlier in-place install.
    shutil.copytree(TEMPLATE, checkout / "contrib" / "plugin-template")
    (checkout / "contrib" / "plugin-template" / "slm_rerank_example.egg-info").mkdir(
        exist_ok=True)

    done = subprocess.run(["bash", "-euc", guide_rename_commands()], cwd=checkout,
                          capture_output=True, text=True)

    assert done.returncode == 0, done.stderr
    assert done.stdout == "renamed everywhere\n", done.stdout
    renamed = tmp_path / "slm-rerank-myformat"
    leftovers = [str(p.relative_to(renamed)) for p in renamed.rglob("*")
                 if "example" in p.name.lower()
                 or (p.is_file() and "example" in p.read_text(errors="replace").lower())]
    assert leftovers == []
    assert (renamed / "slm_rerank_myformat" / "__init__.py").is_file()


def test_a_renamed_copy_installs_and_passes_its_own_tests(tmp_path: Path) -> None:
    checkout = tmp_path / "checkout"
    copy_template(checkout / "contrib" / "plugin-template")
    subprocess.run(["bash", "-euc", guide_rename_commands()], cwd=checkout, check=True,
                   capture_output=True)
    renamed = tmp_path / "slm-rerank-myformat"

    env = install(renamed, tmp_path / "prefix", "slm-rerank-myformat")
    done = run_tests(renamed, env)

    assert_all_passed(done, "tests/test_myformat.py")
