"""The tests mirror the source: a behaviour's test is found by its module's name, never by
the round of work that wrote it, and each test folder names a package of slm_rerank."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
SOURCE = TESTS.parent / "slm_rerank"
#: Folders of tests/ that hold no tests of a source package of their own name.
NOT_MIRRORS = {"bench", "fixtures", "live"}
#: Words that name a round of work (or the issue that asked for it), not a behaviour.
ROUND_WORDS = ("attack", "final", "round", "issue")
ROUND_IN_DOCSTRING = re.compile(r"\bissue \d+|\(issue|\battack round\b|\bround \d+\b",
                                re.IGNORECASE)


def all_test_modules() -> list[Path]:
    """Every test module under tests/, tests/live's included."""
    return sorted(path for path in TESTS.rglob("test_*.py") if "__pycache__" not in path.parts)


def mirror_folders() -> list[Path]:
    """The folders of tests/ and of tests/live that stand for a source package."""
    folders = [TESTS / name for name in ("", "live")]
    return sorted(child for folder in folders for child in folder.iterdir()
                  if child.is_dir() and child.name not in NOT_MIRRORS | {"__pycache__"})


def test_there_are_test_modules_and_mirror_folders_to_check() -> None:
    # a glob that finds nothing would let every check below pass
    assert len(all_test_modules()) > 50
    assert {"lexical", "context", "model", "llama", "servers", "cli"} <= {
        folder.name for folder in mirror_folders()}


@pytest.mark.parametrize("path", all_test_modules(), ids=lambda p: str(p.relative_to(TESTS)))
def test_no_test_module_is_named_after_a_round_of_work(path: Path) -> None:
    named = [word for word in ROUND_WORDS if word in path.stem]
    assert not named, (f"{path.relative_to(TESTS)} is named after a round of work ({named}): "
                       "move its tests to the test module of what they check")


@pytest.mark.parametrize("path", all_test_modules(), ids=lambda p: str(p.relative_to(TESTS)))
def test_no_test_module_docstring_names_an_issue_or_a_round(path: Path) -> None:
    docstring = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
    found = ROUND_IN_DOCSTRING.search(docstring)
    assert found is None, (f"{path.relative_to(TESTS)}'s docstring says {found[0]!r}: "
                           "say what the behaviour is, not which round found it")


@pytest.mark.parametrize("folder", mirror_folders(), ids=lambda p: str(p.relative_to(TESTS)))
def test_each_test_folder_mirrors_a_source_package(folder: Path) -> None:
    package = SOURCE / folder.name
    assert (package / "__init__.py").is_file(), (
        f"tests/{folder.relative_to(TESTS)}/ mirrors no package: slm_rerank/{folder.name}/ "
        f"does not exist; name the folder after the package its tests check")


def test_every_module_in_a_mirror_folder_is_a_test_module_or_a_named_helper() -> None:
    # a test module pytest would not collect (no test_ prefix) silently tests nothing
    strays = sorted(str(path.relative_to(TESTS)) for folder in mirror_folders()
                    for path in folder.glob("*.py")
                    if not path.name.startswith("test_")
                    and path.name not in {"conftest.py", "record_wire.py"})
    assert strays == []


#: The most lines a module of the host may have: past it, a module does more than one job.
MAX_MODULE_LINES = 500


def test_no_module_of_the_host_is_over_the_line_limit() -> None:
    sizes = {str(path.relative_to(SOURCE.parent)): len(path.read_text(encoding="utf-8")
                                                       .splitlines())
             for path in SOURCE.rglob("*.py")}
    assert len(sizes) > 40  # the glob found the package
    over = {name: lines for name, lines in sizes.items() if lines > MAX_MODULE_LINES}
    assert over == {}, f"split these by job: {over}"


def test_the_source_folders_are_the_stages_the_readme_names() -> None:
    readme = (SOURCE.parent / "README.md").read_text(encoding="utf-8")
    packages = sorted(p.parent.name for p in SOURCE.glob("*/__init__.py"))
    assert packages == ["calibration", "cli", "context", "hook", "lexical", "llama", "model",
                        "servers", "testing", "warm_process"]
    for name in packages:
        assert f"| `slm_rerank/{name}/` |" in readme, f"README's layout table lacks {name}/"
