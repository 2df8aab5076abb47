"""`slm-rerank plugins new KIND NAME` writes a plugin that installs, loads and passes its tests."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from pytest_httpserver import HTTPServer
from search_fixtures import cli, make_repo
from test_plugin_surface import surface_violations

from slm_rerank.cli.new_plugin import KINDS, NAME_CHARS
from slm_rerank.plugins import BUILTIN_DISTRIBUTIONS, LOAD_PLUGINS_ENV

ROOT = Path(__file__).resolve().parents[2]
WIRE = ROOT / "tests" / "fixtures" / "wire"
#: the plugin each kind is generated as: a dash in every name, the hard case
NAMES = {kind: f"my-{kind}" for kind in KINDS}
HOOKS = {"profile": "register_model_profiles", "source": "register_candidate_sources",
         "formatter": "register_output_formatters", "scorer": "register_scorers",
         "expander": "register_query_expanders"}
FILES = {"pyproject.toml", "README.md", "slm_rerank_{m}/__init__.py", "tests/test_{m}.py",
         "tests/conftest.py"}


def generate(kind: str, parent: Path, name: str | None = None):  # type: ignore[no-untyped-def]
    return cli("plugins", "new", kind, name or NAMES[kind], "--dir", str(parent), cwd=parent)


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    """One plugin of each kind, generated and installed as a user would (without -e).

    They go into a prefix of their own on PYTHONPATH, and only the built-ins and they
    load: a plugin a developer installed in this environment plays no part.
    """
    parent = tmp_path_factory.mktemp("generated")
    for kind in KINDS:
        done = generate(kind, parent)
        assert done.returncode == 0, done.stderr
    prefix = tmp_path_factory.mktemp("prefix")
    # --no-build-isolation --no-deps: seconds, and no index is asked for anything
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation",
         "--ignore-installed", "--prefix", str(prefix),
         *(str(parent / f"slm-rerank-{name}") for name in NAMES.values())],
        check=True, capture_output=True)
    site = next(prefix.glob("lib/python*/site-packages"))
    loaded = [*sorted(BUILTIN_DISTRIBUTIONS), *(f"slm-rerank-{n}" for n in NAMES.values())]
    # no warm process: this environment is built before a test's isolation, so one started
    # here would live in the user's own folders after the tests
    return parent, {**os.environ, "PYTHONPATH": str(site), LOAD_PLUGINS_ENV: ",".join(loaded),
                    "SLM_RERANK_WARM_PROCESS": "0"}


def run_in(env: dict[str, str], *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(Path(sys.executable).parent / "slm-rerank"), *args], env=env,
                          cwd=cwd, capture_output=True, text=True, timeout=120)


# --- what is written -------------------------------------------------------------------------


@pytest.mark.parametrize("kind", list(KINDS))
def test_each_kind_writes_a_distribution_with_its_entry_point(kind: str, tmp_path: Path) -> None:
    done = generate(kind, tmp_path)

    assert done.returncode == 0, done.stderr
    target = tmp_path / f"slm-rerank-{NAMES[kind]}"
    module = NAMES[kind].replace("-", "_")
    written = {str(p.relative_to(target)) for p in target.rglob("*") if p.is_file()}
    assert written == {f.format(m=module) for f in FILES}
    pyproject = (target / "pyproject.toml").read_text()
    assert f'\n{NAMES[kind]} = "slm_rerank_{module}"\n' in pyproject
    assert "[project.entry-points.slm_rerank]" in pyproject
    assert f"wrote {target}/" in done.stdout and "pip install" in done.stdout
    assert [p.name for p in tmp_path.iterdir()] == [target.name]  # no staging folder left


@pytest.mark.parametrize("kind", list(KINDS))
def test_the_generated_code_imports_only_the_plugin_surface(kind: str, tmp_path: Path) -> None:
    generate(kind, tmp_path)

    code = sorted((tmp_path / f"slm-rerank-{NAMES[kind]}").rglob("*.py"))

    assert len(code) == 3
    assert [v for path in code for v in surface_violations(path)] == []


@pytest.mark.parametrize("kind", list(KINDS))
def test_the_generated_code_is_lint_clean_with_the_longest_name(kind: str, tmp_path: Path) -> None:
    ruff = Path(sys.executable).parent / "ruff"
    if not ruff.exists():
        pytest.skip("ruff is not installed here (make install brings it)")
    name = f"{kind}-{'x' * NAME_CHARS}"[:NAME_CHARS]
    assert generate(kind, tmp_path, name).returncode == 0
    project = tmp_path / f"slm-rerank-{name}"

    # the rules and width of this repository, none of its other settings
    done = subprocess.run([str(ruff), "check", "--isolated", "--select", "E,F,W,I,B,UP",
                           "--line-length", "100", "--target-version", "py310", "."],
                          cwd=project, capture_output=True, text=True)

    assert done.returncode == 0, done.stdout + done.stderr


def test_an_existing_folder_is_never_overwritten(tmp_path: Path) -> None:
    target = tmp_path / "slm-rerank-mine"
    target.mkdir()
    (target / "notes.txt").write_text("my work\n")

    done = generate("profile", tmp_path, "mine")

    assert done.returncode == 1
    assert f"{target} already exists" in done.stderr and "nothing was written" in done.stderr
    assert [p.name for p in target.iterdir()] == ["notes.txt"]
    assert [p.name for p in tmp_path.iterdir()] == [target.name]


@pytest.mark.parametrize("name", ["My_Model", "9lives", "my--model", "my-", "a" * 25,
                                  "slm-rerank-mine", "../escape"])
def test_a_name_that_cannot_name_a_distribution_is_a_usage_error_naming_it(
        name: str, tmp_path: Path) -> None:
    done = generate("profile", tmp_path, name)

    assert done.returncode == 2, done.stderr
    assert "Invalid value for NAME" in done.stderr and repr(name) in done.stderr
    assert list(tmp_path.iterdir()) == []


def test_an_unknown_kind_is_a_usage_error_listing_the_kinds(tmp_path: Path) -> None:
    done = generate("widget", tmp_path, "mine")

    assert done.returncode == 2
    assert "KIND" in done.stderr and all(kind in done.stderr for kind in KINDS)


def test_the_templates_ship_in_the_wheel(tmp_path: Path) -> None:
    # built from the source alone: no egg-info or build folder of an earlier install
    source = tmp_path / "source"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    shutil.copytree(ROOT / "slm_rerank", source / "slm_rerank",
                    ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps",
                    "--no-build-isolation", "-w", str(tmp_path / "wheel"), str(source)],
                   check=True, capture_output=True)

    (wheel,) = (tmp_path / "wheel").glob("slm_rerank-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    templates = ROOT / "slm_rerank" / "cli" / "plugin_templates"
    expected = {str(p.relative_to(ROOT)) for p in templates.rglob("*.tmpl")}
    assert len(expected) == 3 + 2 * len(KINDS)
    assert expected <= names
    # and the recorded server answers a plugin's tests replay (slm_rerank.testing.recordings)
    wire = {str(p.relative_to(ROOT)) for p in (ROOT / "slm_rerank" / "testing" / "wire").iterdir()}
    assert len(wire) > 20 and wire <= names


# --- installed ---------------------------------------------------------------------------------


def test_every_generated_plugin_is_listed_with_what_it_registers(
        installed: tuple[Path, dict[str, str]]) -> None:
    parent, env = installed

    listed = run_in(env, "plugins", "--format", "json", cwd=parent)

    assert listed.returncode == 0, listed.stderr
    rows = {row["name"]: row for row in json.loads(listed.stdout)}
    for kind, name in NAMES.items():
        assert rows[name]["distribution"] == f"slm-rerank-{name}", rows.get(name)
        assert rows[name]["registers"] == {HOOKS[kind]: [name]}
        assert rows[name]["error"] is None


@pytest.mark.parametrize("kind", list(KINDS))
def test_the_generated_tests_pass_as_written(
        kind: str, installed: tuple[Path, dict[str, str]]) -> None:
    parent, env = installed
    project = parent / f"slm-rerank-{NAMES[kind]}"

    done = subprocess.run([sys.executable, "-m", "pytest", "-rA", "-p", "no:cacheprovider",
                           "tests"], env=env, cwd=project, capture_output=True, text=True,
                          timeout=300)

    assert done.returncode == 0, done.stdout + done.stderr
    results = re.findall(r"^(PASSED|FAILED|ERROR|SKIPPED) (\S+)", done.stdout, re.M)
    # every test ran, the contract's entry-point test too (it skips a plugin not installed)
    assert results and {outcome for outcome, _ in results} == {"PASSED"}, done.stdout
    module = NAMES[kind].replace("-", "_")
    inherited = [t for _, t in results if "::Test" in t]
    assert any(t.endswith("::test_distribution_registers_through_its_entry_point")
               for t in inherited), done.stdout
    assert len(inherited) < len(results), "the plugin's own test did not run"
    assert all(t.startswith(f"tests/test_{module}.py::") for _, t in results)


def recorded(name: str) -> object:
    return json.loads((WIRE / name).read_text(encoding="utf-8"))["exchanges"][0]["response"]


def llama_server(httpserver: HTTPServer, model_id: str) -> str:
    """A llama.cpp server as discovery sees it (recorded answers); it judges nothing."""
    models = recorded("llamacpp-v1-models.json")
    models["data"][0]["id"] = model_id  # type: ignore[index]
    httpserver.expect_request("/v1/models").respond_with_json(models)
    httpserver.expect_request("/props").respond_with_json(recorded("llamacpp-props.json"))
    return httpserver.url_for("/").rstrip("/")


def test_a_generated_profile_is_chosen_with_model(
        installed: tuple[Path, dict[str, str]], httpserver: HTTPServer, tmp_path: Path) -> None:
    _, env = installed
    url = llama_server(httpserver, "gemma-3-270m-q4_k_m.gguf")  # a model gemma-base claims
    repo = make_repo(tmp_path / "repo", {"retry.py": "def retry():\n    pass\n"})

    # the server answers no prompt: the search degrades, and says which profile it used
    done = run_in(env, "-q", "retry", "--model", "my-profile", "-e", url, "--format", "json",
                  cwd=repo)

    assert done.returncode == 0, done.stderr
    model = json.loads(done.stdout)["model"]
    assert (model["profile"], model["profile_reason"]) == (
        "my-profile", "asked for with --model / model")


def test_a_generated_profile_claims_the_model_ids_that_hold_its_name(
        installed: tuple[Path, dict[str, str]], httpserver: HTTPServer) -> None:
    parent, env = installed
    url = llama_server(httpserver, "My-Profile-1.5B-Instruct-Q4_K_M.gguf")

    done = run_in(env, "endpoints", "-e", url, "--format", "json", cwd=parent)

    assert done.returncode == 0, done.stderr
    (row,) = json.loads(done.stdout)
    assert row["profile"] == "my-profile", row


@pytest.mark.parametrize("name", ["gemma", "rerank-endpoint", "formatters"])
def test_the_name_of_a_plugin_slm_rerank_ships_is_refused(name: str, tmp_path: Path) -> None:
    # its distribution and package would be slm-rerank-NAME and slm_rerank_NAME: installing
    # it would replace the shipped plugin
    done = generate("profile", tmp_path, name)

    assert done.returncode == 2, done.stderr
    assert f"slm-rerank-{name}" in done.stderr and "ships" in done.stderr
    assert list(tmp_path.iterdir()) == []


def test_the_folder_written_is_as_open_as_the_umask_makes_a_new_folder(tmp_path: Path) -> None:
    done = generate("scorer", tmp_path)

    assert done.returncode == 0, done.stderr
    (tmp_path / "plain").mkdir()
    written = (tmp_path / f"slm-rerank-{NAMES['scorer']}").stat().st_mode & 0o777
    assert written == (tmp_path / "plain").stat().st_mode & 0o777  # not mkdtemp's 0o700


@pytest.mark.parametrize("folder", ["my plugins", "it's"])
def test_the_commands_it_suggests_are_quoted_for_the_shell(folder: str, tmp_path: Path) -> None:
    import shlex

    (tmp_path / folder).mkdir()
    done = generate("scorer", tmp_path / folder)

    assert done.returncode == 0, done.stderr
    target = tmp_path / folder / f"slm-rerank-{NAMES['scorer']}"
    lines = done.stdout.splitlines()
    install = next(line for line in lines if line.strip().startswith("pip install"))
    test = next(line for line in lines if line.strip().startswith("pytest"))
    assert shlex.split(install) == ["pip", "install", "-e", f"{target}[test]"]
    assert shlex.split(test) == ["pytest", str(target / "tests")]


def test_a_dir_that_is_a_dangling_symlink_is_no_folder_not_an_existing_plugin(
        tmp_path: Path) -> None:
    (tmp_path / "plugins").symlink_to(tmp_path / "gone")

    done = cli("plugins", "new", "scorer", "mine", "--dir", "plugins", cwd=tmp_path)

    assert done.returncode == 1
    assert "already exists" not in done.stderr and "Not a directory" in done.stderr
    assert [p.name for p in tmp_path.iterdir()] == ["plugins"]


def test_a_dir_with_a_control_character_is_shown_escaped_not_raw(tmp_path: Path) -> None:
    folder = tmp_path / "z\x1b[2J"
    folder.mkdir()

    done = generate("scorer", folder)

    assert done.returncode == 0, done.stderr
    assert "\x1b" not in done.stdout
    assert "z\\x1b[2J" in done.stdout
    assert (folder / f"slm-rerank-{NAMES['scorer']}").is_dir()
