"""The distribution adds `slm-rerank review` through register_commands, and its own
`slm-rerank-review` script; `review` is a group a subcommand (`review bench`) can join."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import click
import pytest
from click.testing import CliRunner
from slm_rerank_review import cli as review_cli

from slm_rerank.testing import Host, Settings
from slm_rerank.testing.helpers import cli

SCRIPT = Path(sys.executable).parent / "slm-rerank-review"


def test_the_entry_point_adds_the_review_group() -> None:
    from importlib.metadata import entry_points

    [own] = [ep for ep in entry_points(group="slm_rerank")
             if ep.dist is not None and ep.dist.name == "slm-rerank-review"]
    group = click.Group("slm-rerank")
    host = Host.with_plugins(Settings(), own.load())
    assert host.pm is not None

    host.pm.hook.register_commands(cli=group)

    assert list(group.commands) == ["review"]
    assert isinstance(group.commands["review"], click.Group)


def test_slm_rerank_lists_review_and_runs_its_help(tmp_path: Path) -> None:
    listed = cli("--help", cwd=tmp_path)
    helped = cli("review", "--help", cwd=tmp_path)
    run_help = cli("review", "run", "--help", cwd=tmp_path)

    assert listed.returncode == 0 and "review" in listed.stdout, listed.stderr
    assert helped.returncode == 0 and "run" in helped.stdout, helped.stderr
    for flag in ("--diff", "--no-support", "--no-contradiction", "--json", "--format"):
        assert flag in run_help.stdout


def test_the_console_script_is_the_review_group(tmp_path: Path) -> None:
    done = subprocess.run([str(SCRIPT), "--help"], cwd=tmp_path, capture_output=True,
                          text=True, timeout=60, stdin=subprocess.DEVNULL)

    assert done.returncode == 0, done.stderr
    assert "Grounded code review" in done.stdout


def test_a_first_word_that_is_no_subcommand_is_the_reviews_own_argument(
        monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[tuple[str, ...]] = []

    @click.command("bench")
    def bench() -> None:
        click.echo("bench ran")

    monkeypatch.setattr(review_cli, "SUBCOMMANDS", [bench])
    monkeypatch.setattr(review_cli.run, "callback", lambda **kw: seen.append(kw["paths"]))
    group = review_cli.make_group()

    ran_bench = CliRunner().invoke(group, ["bench"])
    CliRunner().invoke(group, ["src", "-q", "x"], catch_exceptions=False)

    assert ran_bench.stdout == "bench ran\n"
    assert seen == [("src",)]



def test_review_bench_runs_the_trust_benchmark_by_its_name() -> None:
    result = CliRunner().invoke(review_cli.make_group(), ["bench"])

    assert result.exit_code == 0, result.output
    assert "precision" in result.stdout.lower()


#: an argument of 100 KB: an error quotes a short prefix of it, never the whole
LONG = "a" * 100_000


@pytest.mark.parametrize(("args", "status"), [
    (("--top", LONG), 2),
    (("--format", LONG), 2),
    (("--root", LONG), 2),
    ((f"--no-such-{LONG}",), 2),
    (("bench", "--corpus", LONG), 2),
    ((f"--diff={LONG}",), 1),  # git's error, which quotes the revision
    (("--fast", "--model", LONG), 1),  # the host's ConfigError
])
def test_an_error_is_one_line_in_the_hosts_style_quoting_a_short_prefix_of_a_long_argument(
        project: Path, args: tuple[str, ...], status: int) -> None:
    done = cli("review", *args, cwd=project)

    assert done.returncode == status, done.stderr[:300]
    assert done.stderr.startswith(("slm-rerank: error: ", "slm-rerank review: error: "))
    assert done.stderr.count("\n") == 1 and done.stderr.endswith("\n")
    assert "a" * 81 not in done.stderr and "... (1000" in done.stderr
    assert len(done.stderr) < 1000


def test_the_console_scripts_errors_are_one_line_without_click_s_error_prefix(
        project: Path) -> None:
    done = subprocess.run([str(SCRIPT), f"--diff={LONG}"], cwd=project, capture_output=True,
                          text=True, timeout=60, stdin=subprocess.DEVNULL)

    assert done.returncode == 1
    assert done.stderr.startswith("slm-rerank review: error: --diff: ")
    assert done.stderr.count("\n") == 1 and len(done.stderr) < 1000


def test_cut_arguments_cuts_an_argument_its_option_value_and_any_long_run() -> None:
    path = "/tmp/" + "d" * 150  # an argument of ordinary length is named whole
    message = f"bad '{LONG}' and {'b' * 300} and {'c' * 250} and {path}"

    cut = review_cli.cut_arguments(message, ["--x=" + LONG, "c" * 250, path])

    assert cut == (f"bad '{'a' * 80}... (100000 chars)' and {'b' * 80}... (300 chars) and "
                   f"{'c' * 80}... (250 chars) and {path}")
