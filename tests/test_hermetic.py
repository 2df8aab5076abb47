"""The tests are hermetic: the user's environment cannot change what they see, and each
plugin's tests need nothing of the host's checkout but the host as installed.

``slm_rerank.testing.isolation.isolate`` (the autouse ``isolated_home`` of tests/conftest.py
and of every plugin's tests/conftest.py) clears the environment names the code reads; these
tests check that the list follows the code, and run a sample of the suite with every one of
those names set to a bad value.
"""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from slm_rerank.config import Settings
from slm_rerank.testing.isolation import (
    HARNESS_NAMES,
    declared_environment_names,
    isolate,
    names_to_clear,
)

ROOT = Path(__file__).resolve().parents[1]
PLUGINS = sorted(p for p in (ROOT / "plugins").iterdir() if (p / "pyproject.toml").is_file())
#: what isolate sets itself rather than clears
SET_BY_ISOLATE = frozenset({"XDG_CONFIG_HOME", "XDG_CACHE_HOME", "XDG_RUNTIME_DIR"})
#: a name of the tool's own, or one the code reads through os.environ / os.getenv
_OWN_NAME = re.compile(r"""["']((?:SLM|RERANKER|LFM)_[A-Z0-9_]+)["']""")
_READ_NAME = re.compile(r"""(?:environ\.get\(|environ\[|getenv\()\s*["']([A-Z][A-Z0-9_]+)["']""")
#: the server the bad environment points at: nothing listens on port 7 (echo), and it is
#: not the dead server some tests pin themselves (port 9)
HOSTILE_URL = "http://127.0.0.1:7"
#: what the bad program a bad environment names prints before it fails
HOSTILE = "hostile environment"
#: the sample run under a hostile environment, a test of each front door: each of these
#: failed when a name leaked (the Python API, the CLI's config layers, the prompt hook, a
#: plugin's CLI test, a scorer on recorded answers)
SAMPLE = [
    "tests/test_api.py::test_search_returns_ranked_citations",
    "tests/test_api.py::test_auto_serve_starts_nothing_when_the_config_pins_servers",
    "tests/cli/test_config_input.py::test_an_empty_environment_setting_still_counts_as_unset",
    "tests/hook/test_claude.py::test_code_prompt_prints_file_line_places_as_additional_context",
    "plugins/slm-rerank-rerank-endpoint/tests/test_rerank_api_discovery.py"
    "::test_slm_rerank_e_url_scorer_rerank_endpoint_ranks_with_a_pure_rerank_api",
    "plugins/slm-rerank-yesno/tests/test_yesno_scorer.py"
    "::test_a_recorded_vllm_answer_gives_one_verdict_per_prompt_summing_no_and_No",
]


def hostile_environment(tmp_path: Path) -> dict[str, str]:
    """Every name the code reads set to something bad in every role: a program that fails
    (as a path to ripgrep, a folder, a host, a list of plugins, a deadline), and the
    server URL's names a dead server (as the README's exported SLM_ENDPOINT would be)."""
    bad = tmp_path / "hostile"
    bad.write_text(f"#!/bin/sh\necho '{HOSTILE}'\nexit 2\n")
    bad.chmod(0o755)
    env = dict.fromkeys(names_the_code_reads() - HARNESS_NAMES, str(bad))
    env.update(dict.fromkeys(Settings.__dataclass_fields__["base_url"].metadata["env"],
                             HOSTILE_URL))
    return env


def code_files() -> list[Path]:
    """The host's and the plugins' code (not their tests, nor the testing helpers)."""
    files = [p for p in (ROOT / "slm_rerank").rglob("*.py") if "testing" not in p.parts]
    for plugin in PLUGINS:
        files += [p for p in plugin.rglob("*.py") if "tests" not in p.relative_to(plugin).parts]
    return files


def names_the_code_reads() -> set[str]:
    """Every environment name the code names: its own prefixes, and whatever it reads."""
    names: set[str] = set(declared_environment_names())
    for path in code_files():
        text = path.read_text(encoding="utf-8")
        names |= set(_OWN_NAME.findall(text)) | set(_READ_NAME.findall(text))
    return names


def test_the_declared_names_come_from_the_settings_metadata() -> None:
    declared = declared_environment_names()
    assert {"SLM_ENDPOINT", "SLM_HOST", "SLM_API_KEY", "SLM_RERANK_CACHE_DIR"} <= declared
    for field_name, env in (("base_url", "SLM_ENDPOINT"), ("api_key", "SLM_API_KEY")):
        assert env in Settings.__dataclass_fields__[field_name].metadata["env"]


def test_every_name_the_code_reads_is_cleared_or_set_for_each_test() -> None:
    names = names_the_code_reads()
    assert {"SLM_RERANK_RG", "SLM_RERANK_CALLER", "SLM_RERANK_LOAD_PLUGINS"} <= names
    cleared = names_to_clear(dict.fromkeys(names, HOSTILE_URL))
    left = names - cleared - SET_BY_ISOLATE - HARNESS_NAMES
    assert not left, (f"{sorted(left)} would reach the tests from the user's environment: "
                      "name it in a setting's env metadata, or give it the SLM_RERANK_ prefix")


def test_isolate_leaves_no_hostile_name_in_the_environment(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    hostile = hostile_environment(tmp_path)
    for name, value in hostile.items():
        monkeypatch.setenv(name, value)
    cache = isolate(monkeypatch, tmp_path)
    assert os.environ["SLM_RERANK_CACHE_DIR"] == str(cache)
    assert {name for name, value in hostile.items() if os.environ.get(name) == value} == set()


def test_a_sample_of_the_suite_passes_under_a_hostile_environment(tmp_path: Path) -> None:
    """Every name the code reads set to a bad value, and a user config that pins a dead
    server: the sample passes as it does in a clean environment."""
    config = tmp_path / "config"
    (config / "slm-rerank").mkdir(parents=True)
    (config / "slm-rerank" / "config.toml").write_text(f'base_url = "{HOSTILE_URL}"\n')
    env = {**os.environ, **hostile_environment(tmp_path),
           "XDG_CONFIG_HOME": str(config), "XDG_CACHE_HOME": str(tmp_path / "cache")}
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-x", *SAMPLE], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert " passed" in done.stdout and "skipped" not in done.stdout, done.stdout[-2000:]


# --- each plugin's tests from its own folder ----------------------------------------------

def host_test_modules() -> set[str]:
    """What the host's tests/ folder offers as a top-level import (root pyproject's
    ``pythonpath``): its modules and folders."""
    tests = ROOT / "tests"
    return ({p.stem for p in tests.glob("*.py")}
            | {p.name for p in tests.iterdir() if p.is_dir() and not p.name.startswith("_")})


def leaks(test_file: Path, own: set[str], host: set[str]) -> list[str]:
    """What ``test_file`` takes from the host's checkout rather than its installed host."""
    found = []
    for node in ast.walk(ast.parse(test_file.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            modules = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            modules = [node.module]
        else:
            modules = []
        for module in modules:
            top = module.split(".")[0]
            if top in host and top not in own:
                found.append(f"line {node.lineno}: imports {module} from the host's tests/")
        # Path(__file__).parents[2] is plugins/, [3] the host's checkout
        if (isinstance(node, ast.Subscript) and isinstance(node.value, ast.Attribute)
                and node.value.attr == "parents" and isinstance(node.slice, ast.Constant)
                and isinstance(node.slice.value, int) and node.slice.value >= 2):
            found.append(f"line {node.lineno}: parents[{node.slice.value}] leaves the plugin")
    return found


def test_the_leak_finder_sees_both_kinds(tmp_path: Path) -> None:
    sample = tmp_path / "test_x.py"
    sample.write_text("from search_fixtures import cli\nimport helpers\n"
                      "WIRE = Path(__file__).parents[3] / 'tests'\n")
    assert leaks(sample, {"helpers"}, host_test_modules()) == [
        "line 1: imports search_fixtures from the host's tests/",
        "line 3: parents[3] leaves the plugin"]


@pytest.mark.parametrize("plugin", PLUGINS, ids=[p.name for p in PLUGINS])
def test_a_plugins_tests_take_nothing_from_the_hosts_tests_folder(plugin: Path) -> None:
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover
        import tomli as tomllib

    tests = plugin / "tests"
    own = {p.stem for p in tests.rglob("*.py")} | {p.name for p in tests.iterdir() if p.is_dir()}
    host = host_test_modules()
    found = {str(f.relative_to(ROOT)): leaks(f, own, host) for f in sorted(tests.rglob("*.py"))}
    assert {name: lines for name, lines in found.items() if lines} == {}, (
        "serve what a plugin's tests need through slm_rerank.testing")
    # its own pytest settings: run from its folder, the host checkout's (pythonpath =
    # ["tests"]) do not apply
    config = tomllib.loads((plugin / "pyproject.toml").read_text(encoding="utf-8"))
    assert "pythonpath" not in config["tool"]["pytest"]["ini_options"]
    # every test isolated from the user's environment
    assert "isolated_home" in (tests / "conftest.py").read_text(encoding="utf-8")


def test_a_plugins_tests_import_from_its_folder_without_the_hosts_tests() -> None:
    """What `make plugin=NAME test` does, as far as collecting (importing) the tests: the
    review's, which used the most of tests/, from its own folder."""
    plugin = ROOT / "plugins" / "slm-rerank-review"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "--collect-only"],
                          cwd=plugin, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert re.search(r"^\d+ tests collected", done.stdout, re.MULTILINE), done.stdout[-2000:]
