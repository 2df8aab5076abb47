"""What a user types or sets that is wrong: one clear line, and the right exit status.

Bad command-line input is a usage error (exit 2), a blank environment setting an error
naming the variable, and a bad value in a repository's own ``.slm-rerank.toml`` (untrusted
input) one warning line while the search runs; the user's own config keeps failing.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from search_fixtures import CLI, cli, user_config

from slm_rerank.errors import ConfigError
from slm_rerank.model.judge_budget import Budget, parse_budget

#: the issue's own failing values, one of each kind a repository's file can hold
BAD_REPO_VALUES = {
    "unknown-key": ("top_kk = 3\n", "top_kk"),
    "nan": ("dirty_bonus = nan\n", "dirty_bonus"),
    "nan-for-an-integer": ("top_k = nan\n", "top_k"),
    "unknown-format": ('format = "nope"\n', "format"),
    "unknown-source": ('sources = ["nope"]\n', "sources"),
    "wrong-type": ('chunks = "yes"\n', "chunks"),
    "wrong-type-of-a-lower-only-key": ('top_k = "ten"\n', "top_k"),
    "out-of-bounds": ("top_k = 0\n", "top_k"),
}


def warnings(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("slm-rerank: warning: ")]


def one_error_line(stderr: str) -> str:
    [line] = stderr.splitlines()
    assert line.startswith("slm-rerank: error: ") and "Traceback" not in stderr
    return line


# --- --budget 0 ----------------------------------------------------------------------------


@pytest.mark.parametrize("budget", ["0", "0s", "0t", "0.0s", "00", "0 tokens"])
def test_a_budget_of_zero_in_any_unit_is_a_usage_error_that_says_off_is_no_cap(
        repo: Path, budget: str) -> None:
    # "--budget 0" was no cap and "--budget 0s" an error: one number, two meanings
    run = cli("-q", "retry", "--fast", "--budget", budget, cwd=repo)

    assert (run.returncode, run.stdout) == (2, "")
    line = one_error_line(run.stderr)
    assert "--budget" in line and "give off for no cap" in line


def test_an_empty_budget_is_a_usage_error_not_no_cap(repo: Path) -> None:
    # `--budget "$BUDGET"` with the variable unset lifted a configured cap without a word
    run = cli("-q", "retry", "--fast", "--budget", "", cwd=repo)

    assert (run.returncode, run.stdout) == (2, "")
    line = one_error_line(run.stderr)
    assert "--budget" in line and "empty" in line


def test_off_is_the_one_word_for_no_budget() -> None:
    assert parse_budget("off") == parse_budget("none") == Budget()
    assert parse_budget("0.5s") == Budget(seconds=0.5)
    with pytest.raises(ConfigError, match="budget of nothing"):
        parse_budget("0")


# --- a blank environment setting -----------------------------------------------------------


@pytest.mark.parametrize(("name", "value"), [("SLM_ENDPOINT", " "), ("SLM_HOST", "\t"),
                                             ("SLM_RERANK_CACHE_DIR", "  ")])
def test_a_blank_environment_setting_is_an_error_naming_the_variable(
        repo: Path, name: str, value: str) -> None:
    # SLM_ENDPOINT=" " read as unset fell back to a port scan, silently
    run = cli("-q", "retry", "--fast", cwd=repo, env={name: value})

    assert (run.returncode, run.stdout) == (1, "")
    line = one_error_line(run.stderr)
    assert f"environment {name} is blank" in line


def test_an_empty_environment_setting_still_counts_as_unset(repo: Path) -> None:
    run = cli("-q", "retry", "--fast", cwd=repo, env={"SLM_ENDPOINT": ""})

    assert run.returncode == 0, run.stderr
    assert "retry.py" in run.stdout


# --- a repository's own .slm-rerank.toml ---------------------------------------------------


@pytest.mark.parametrize(("text", "key"), list(BAD_REPO_VALUES.values()),
                         ids=list(BAD_REPO_VALUES))
def test_a_bad_value_in_a_repositorys_file_is_one_warning_and_the_search_runs(
        repo: Path, text: str, key: str) -> None:
    (repo / ".slm-rerank.toml").write_text(text)

    run = cli("-q", "retry backoff", "--fast", cwd=repo)

    assert run.returncode == 0, run.stderr
    assert run.stdout.splitlines()[1].startswith("src/net/retry.py:")  # after the header
    [line] = warnings(run.stderr)
    assert str(repo / ".slm-rerank.toml") in line and f"'{key}'" in line
    assert "ignored" in line


def test_a_repositorys_file_that_is_not_toml_is_one_warning_and_the_search_runs(
        repo: Path) -> None:
    (repo / ".slm-rerank.toml").write_text("top_k = [\n")

    run = cli("-q", "retry backoff", "--fast", cwd=repo)

    assert run.returncode == 0, run.stderr
    assert "src/net/retry.py" in run.stdout
    [line] = warnings(run.stderr)
    assert str(repo / ".slm-rerank.toml") in line and "invalid TOML" in line


def test_only_the_bad_key_of_a_repositorys_file_is_left_out(repo: Path) -> None:
    (repo / ".slm-rerank.toml").write_text('top_k = 1\nformat = "nope"\nbogus = true\n'
                                           'chunks = true\n')

    run = cli("-q", "retry backoff", "--fast", cwd=repo)

    assert run.returncode == 0, run.stderr
    assert len(run.stdout.splitlines()) == 2  # the good keys apply: the header and top_k 1
    assert len(warnings(run.stderr)) == 2


def test_a_repositorys_unknown_format_leaves_the_users_format_in_place(repo: Path) -> None:
    user_config().write_text('format = "json"\n')
    (repo / ".slm-rerank.toml").write_text('format = "nope"\n')

    run = cli("-q", "retry backoff", "--fast", cwd=repo)

    assert run.json()["results"][0]["path"] == "src/net/retry.py"
    [line] = warnings(run.stderr)
    assert "unknown format 'nope'" in line and "'json' applies" in line


def test_config_show_shows_a_repositorys_bad_value_as_refused(repo: Path) -> None:
    (repo / ".slm-rerank.toml").write_text("top_k = nan\n")

    run = cli("config", "show", "--format", "json", cwd=repo)

    assert run.returncode == 0, run.stderr
    top_k = run.json()["top_k"]
    assert top_k["value"] == 10 and "must be an integer" in top_k["refused"]


@pytest.mark.parametrize(("text", "key"), [BAD_REPO_VALUES["unknown-key"],
                                           BAD_REPO_VALUES["nan"],
                                           BAD_REPO_VALUES["unknown-format"],
                                           BAD_REPO_VALUES["wrong-type"]])
def test_the_same_bad_value_in_the_users_own_config_still_fails_loudly(
        repo: Path, text: str, key: str) -> None:
    path = user_config()
    path.write_text(text)

    run = cli("-q", "retry backoff", "--fast", cwd=repo)

    assert run.returncode in (1, 2) and run.stdout == ""
    line = one_error_line(run.stderr)
    assert key in line


def test_the_prompt_hook_gives_context_despite_a_bad_value_in_the_repositorys_file(
        repo: Path) -> None:
    (repo / ".slm-rerank.toml").write_text('top_k = nan\nformat = "nope"\n')
    prompt = json.dumps({"session_id": "s", "prompt": "where is retry backoff defined",
                         "cwd": str(repo), "hook_event_name": "UserPromptSubmit"})

    done = subprocess.run([str(CLI), "hook", "claude-prompt"], input=prompt, cwd=repo,
                          capture_output=True, text=True, timeout=30)

    assert done.returncode == 0
    context = json.loads(done.stdout)["hookSpecificOutput"]["additionalContext"]
    assert "src/net/retry.py" in context


# --- bad command-line input is a usage error -----------------------------------------------


@pytest.mark.parametrize(("args", "says"), [
    (("src/nope.py",), "path 'src/nope.py' does not exist"),
    (("--root", "/nonexistent/folder"), "'/nonexistent/folder' does not exist"),
    (("--model", "nope"), "unknown model profile 'nope'"),
    (("--scorer", "nope"), "unknown scorer 'nope'"),
    (("-e", "notaurl"), "'notaurl' is not an http(s) URL"),
])
def test_bad_command_line_input_is_a_one_line_usage_error_with_exit_2(
        repo: Path, args: tuple[str, ...], says: str) -> None:
    run = cli("-q", "retry", "--fast", *args, cwd=repo)

    assert (run.returncode, run.stdout) == (2, "")
    line = one_error_line(run.stderr)
    assert says in line and "--help" in line


@pytest.mark.parametrize("option", ["--top-k", "--format", "--root", "-e"])
def test_a_usage_error_quotes_a_short_prefix_of_a_huge_argument(repo: Path,
                                                                 option: str) -> None:
    huge = "7" * 100_000
    run = cli("-q", "retry", "--fast", option, huge, cwd=repo)

    assert (run.returncode, run.stdout) == (2, "")
    line = one_error_line(run.stderr)
    assert len(line) < 600
    assert f"{huge[:80]}... (100000 chars)" in line


def test_names_piped_on_stdin_that_all_miss_are_a_usage_error(repo: Path) -> None:
    run = cli("-q", "retry", "--fast", cwd=repo, stdin="nope.py\n")

    assert (run.returncode, run.stdout) == (2, "")
    assert "stdin held no existing file names" in one_error_line(run.stderr)


@pytest.mark.parametrize(("group", "commands"), [("cache", "clear, stats"),
                                                 ("hook", "claude-prompt"),
                                                 ("config", "set, show")])
def test_a_group_without_its_command_names_its_commands_in_one_line(
        repo: Path, group: str, commands: str) -> None:
    run = cli(group, cwd=repo)

    assert (run.returncode, run.stdout) == (2, "")
    line = one_error_line(run.stderr)
    assert "\\x0a" not in run.stderr
    assert f"'slm-rerank {group}' needs a command: {commands}" in line
