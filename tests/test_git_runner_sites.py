"""Every git command goes through ``slm_rerank.git_runner``: a new call site that starts git
itself (and so runs whatever the repository's configuration names) fails here."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from slm_rerank.git_runner import GitCommand, git_command, parse_driver_names

ROOT = Path(__file__).resolve().parents[1]
#: the one module that may name the git program in a command
RUNNER = ROOT / "slm_rerank" / "git_runner.py"
#: calls that start a program
_STARTERS = {"Popen", "run", "call", "check_call", "check_output", "getoutput",
             "getstatusoutput", "start_tool", "system", "popen", "execv", "execvp", "execve",
             "execvpe", "execl", "execlp", "spawnv", "spawnvp", "spawnl", "spawnlp",
             "create_subprocess_exec", "create_subprocess_shell", "posix_spawn",
             "posix_spawnp"}


def _names_git(node: ast.AST) -> bool:
    """Whether ``node`` is the string "git" (or a shell line starting with git)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, (str, bytes)):
        text = node.value if isinstance(node.value, str) else node.value.decode("latin-1")
        word = text.strip().split(" ", 1)[0] if text.strip() else ""
        return word == "git" or word.endswith("/git")
    return False


def bypasses(source: str) -> list[int]:
    """Lines that start git without the runner: a list or tuple whose first item is "git",
    or a call that starts a program with "git" anywhere among its arguments."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.List, ast.Tuple)) and node.elts and _names_git(node.elts[0]):
            found.append(node.lineno)
        elif isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if name in _STARTERS and any(
                    _names_git(inner) for arg in [*node.args, *(k.value for k in node.keywords)]
                    for inner in ast.walk(arg)):
                found.append(node.lineno)
    return sorted(set(found))


def shipped_sources() -> list[Path]:
    """The Python files the package, its plugins and contrib ship (not their tests)."""
    files = [*(ROOT / "slm_rerank").rglob("*.py"), *(ROOT / "plugins").rglob("*.py"),
             *(ROOT / "contrib").rglob("*.py")]
    return sorted(f for f in files if "tests" not in f.relative_to(ROOT).parts
                  and ".venv" not in f.parts and f != RUNNER)


def test_no_shipped_module_starts_git_but_the_runner() -> None:
    sources = shipped_sources()
    assert any("slm_rerank_git" in f.parts for f in sources)  # the scan sees the plugins
    found = {str(f.relative_to(ROOT)): lines for f in sources
             if (lines := bypasses(f.read_text(encoding="utf-8")))}
    assert found == {}, ("these start git without slm_rerank.git_runner (plugins: "
                         "plugin_kit.git_output or start_git), so a repository's git "
                         f"configuration could start a process: {found}")


@pytest.mark.parametrize("snippet", [
    'subprocess.run(["git", "-C", str(root), "status"])',
    'base = ["git", "-c", "core.quotepath=off"]',
    'start_tool(("git", "ls-files"))',
    'subprocess.Popen(argv + ["git"])',
    'os.system("git status")',
    'subprocess.check_output(["/usr/bin/git", "log"])',
])
def test_the_scan_finds_a_git_call_that_bypasses_the_runner(snippet: str) -> None:
    assert bypasses(snippet) == [1]


def test_the_scan_leaves_other_programs_and_mentions_of_git_alone() -> None:
    assert bypasses('subprocess.run(["rg", "--files"])\nshutil.which("git")\n'
                    'raise SourceError("candidate source \'git\' failed")\n'
                    'git_output(root, ["status"])\n') == []


def test_the_runner_turns_off_each_driver_the_configuration_names(tmp_path: Path) -> None:
    import subprocess

    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    for name in ("lfs", "Mixed.Case.dots", "with=equals", "with space"):
        subprocess.run(["git", "-C", str(tmp_path), "config", f"filter.{name}.clean", "x"],
                       check=True)

    command = git_command(tmp_path, ["status"])

    assert isinstance(command, GitCommand)
    argv = command.argv
    assert "filter.lfs.clean=" in argv and "filter.lfs.required=false" in argv
    assert "filter.Mixed.Case.dots.process=" in argv and "filter.with space.smudge=" in argv
    assert "--config-env=filter.with=equals.clean=SLM_RERANK_GIT_EMPTY" in argv
    assert command.env["SLM_RERANK_GIT_EMPTY"] == ""
    assert argv[argv.index("status") + 1] == "--ignore-submodules=dirty"


def test_driver_names_keep_their_case_and_inner_dots() -> None:
    output = b"filter.lfs.clean\0filter.A.b.smudge\0filter.lfs.process\0filter.bare\0"
    assert parse_driver_names(output) == ["lfs", "A.b"]
