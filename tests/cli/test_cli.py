"""The command line as a user meets it: exit codes, one-line errors, the subcommands."""

from __future__ import annotations

import importlib.metadata
import json
import subprocess
import sys
from pathlib import Path

import fake_plugins as fakes
import pytest
from click.testing import CliRunner, Result
from search_fixtures import install_plugin, load_plugins

from slm_rerank.cli.commands import cli
from slm_rerank.config import user_config_path
from slm_rerank.plugins import BUILTIN_DISTRIBUTIONS, host_requirements

BINARY = Path(sys.executable).parent / "slm-rerank"


def run(*args: str, **kwargs) -> Result:  # type: ignore[no-untyped-def]
    return CliRunner().invoke(cli, list(args), **kwargs)


@pytest.mark.parametrize(("args", "culprit"), [
    (["--bogus"], "No such option '--bogus'"),
    (["-q", "retry", "--fast", "--format", "yaml"],
     "unknown format 'yaml' (from flag: --format); available: json, jsonl, markdown, text"),
    (["config", "set", "colour", "red"], "unknown key 'colour'"),
])
def test_usage_errors_are_one_line_naming_the_culprit(
        args: list[str], culprit: str, repo: Path) -> None:
    done = subprocess.run([str(BINARY), *args], cwd=repo, capture_output=True, text=True,
                          stdin=subprocess.DEVNULL)
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1, done.stderr
    assert done.stderr.startswith("slm-rerank: error: ") and culprit in done.stderr
    assert done.stdout == ""


def test_a_plugin_installed_beside_the_host_does_not_reach_these_tests(
        repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The plugin template registers a "paths" format; a user who installed it must still
    # see the host's tests pass (conftest allows only the built-in distributions).
    install_plugin(monkeypatch, "example", fakes.Formats())
    result = run("-q", "retry", "--fast", "--root", str(repo), "--format", "paths")
    assert result.exit_code == 2
    assert "available: json, jsonl, markdown, text" in result.stderr


def test_plugins_lists_what_others_installed_and_all_adds_the_builtins(
        monkeypatch: pytest.MonkeyPatch) -> None:
    install_plugin(monkeypatch, "overlap", fakes.Scorers())
    load_plugins(monkeypatch, "overlap")

    third_party = json.loads(run("plugins", "--format", "json").stdout)
    everything = json.loads(run("plugins", "--all", "--format", "json").stdout)

    assert ("overlap", False, {"register_scorers": ["overlap"]}) in [
        (r["name"], r["builtin"], r["registers"]) for r in third_party]
    assert not any(r["builtin"] for r in third_party)
    by_dist = {row["distribution"]: row for row in everything if row["builtin"]}
    assert set(by_dist) == host_requirements() & BUILTIN_DISTRIBUTIONS
    for dist, row in by_dist.items():
        assert row["version"] == importlib.metadata.version(dist)
        assert row["error"] is None and row["registers"], dist


def test_plugins_lists_a_model_family_installed_beside_the_host() -> None:
    # `pip install slm-rerank slm-rerank-gemma`: gemma is the user's choice, not a built-in
    # of the bare install, even though this project ships it.
    text = run("plugins").stdout
    rows = json.loads(run("plugins", "--format", "json").stdout)

    assert "gemma  slm-rerank-gemma " in text
    assert "no plugins installed" not in text
    gemma = next(r for r in rows if r["distribution"] == "slm-rerank-gemma")
    assert gemma["builtin"] is False
    assert "gemma-base" in gemma["registers"]["register_model_profiles"]


def test_the_built_ins_are_the_plugins_the_host_requires_outside_its_extras() -> None:
    required = {r.split(";")[0].strip() for r in importlib.metadata.requires("slm-rerank") or ()
                if "extra ==" not in r}

    everything = json.loads(run("plugins", "--all", "--format", "json").stdout)

    assert {r["distribution"] for r in everything if r["builtin"]} == required & {
        r["distribution"] for r in everything}
    assert {"slm-rerank-formatters", "slm-rerank-ripgrep"} <= host_requirements()
    assert "slm-rerank-gemma" not in host_requirements()


def test_load_plugins_env_leaves_out_a_plugin_it_does_not_name(
        repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    install_plugin(monkeypatch, "example", fakes.Formats())
    load_plugins(monkeypatch, "example")
    assert run("-q", "retry", "--fast", "--root", str(repo), "--format", "paths").exit_code == 0

    load_plugins(monkeypatch)
    listed = run("plugins")
    assert "example" not in listed.stdout
    assert listed.exit_code == 0


def test_plugins_says_so_when_only_the_built_ins_are_installed(
        monkeypatch: pytest.MonkeyPatch) -> None:
    load_plugins(monkeypatch)
    monkeypatch.setenv("SLM_RERANK_LOAD_PLUGINS", ",".join(sorted(host_requirements())))

    listed = run("plugins")

    assert listed.stdout == ("no plugins installed beyond the built-ins slm-rerank depends on "
                             "(see --all)\n")


def test_config_show_prints_every_value_with_its_origin(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("SLM_RERANK_CACHE_DIR", str(tmp_path / "c"))
    (tmp_path / ".slm-rerank.toml").write_text("top_k = 4\n")
    result = run("config", "show")
    assert result.exit_code == 0, result.output
    lines = {line.split()[0]: line for line in result.stdout.splitlines()}
    assert lines["top_k"].endswith(f"# repo: {tmp_path.resolve() / '.slm-rerank.toml'}")
    assert lines["cache_dir"].endswith("# env: SLM_RERANK_CACHE_DIR")
    assert lines["format"].endswith("# default")
    doc = json.loads(run("config", "show", "--format", "json").stdout)
    assert doc["top_k"] == {"value": 4,
                            "origin": f"repo: {tmp_path.resolve() / '.slm-rerank.toml'}",
                            "help": "how many results to print"}


def test_config_set_writes_the_user_file_or_the_repo_file(
        repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from slm_rerank.config import user_config_path

    monkeypatch.chdir(repo / "src")
    assert run("config", "set", "top_k", "3").exit_code == 0
    assert user_config_path().read_text() == "top_k = 3\n"
    assert run("config", "set", "format", "json", "--repo").exit_code == 0
    assert (repo / ".slm-rerank.toml").read_text() == 'format = "json"\n'
    shown = json.loads(run("config", "show", "--format", "json").stdout)
    assert shown["top_k"]["value"] == 3 and shown["format"]["value"] == "json"


def test_invalid_toml_is_a_one_line_error_naming_the_file(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # the user's own file; a repository's is left out with a warning (test_config_input.py)
    monkeypatch.chdir(tmp_path)
    path = user_config_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("top_k = [\n")
    result = run("config", "show")
    assert result.exit_code == 1
    assert result.stderr.count("\n") == 1
    assert str(path) in result.stderr


def test_a_wrong_type_in_the_user_file_stops_a_query(repo: Path) -> None:
    # a repository's file only warns (tests/cli/test_config_input.py)
    user_config_path().parent.mkdir(parents=True, exist_ok=True)
    user_config_path().write_text('chunks = "yes"\n')
    result = run("-q", "retry", "--fast", "--root", str(repo))
    assert result.exit_code == 1
    assert "key 'chunks' must be true or false" in result.stderr


def test_an_unwritable_cache_folder_is_named_and_the_query_still_answers(
        repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("")
    monkeypatch.setenv("SLM_RERANK_CACHE_DIR", str(blocker / "cache"))
    result = run("-q", "retry", "--fast", "--root", str(repo))
    assert result.exit_code == 0
    assert result.stdout.strip()
    assert f"cache folder {blocker / 'cache'} is not writable" in result.stderr


def test_a_plugin_that_raises_at_registration_stops_with_its_name(
        repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    install_plugin(monkeypatch, "explosive", fakes.RaisesWhileRegistering())
    load_plugins(monkeypatch, "explosive")
    result = run("-q", "retry", "--fast", "--root", str(repo))
    assert result.exit_code == 1
    assert ("plugin 'explosive' raised while registering output formatters: ValueError: boom"
            in result.stderr)
    # the same plugin, disabled by name, no longer stops anything
    monkeypatch.setenv("XDG_CONFIG_HOME", str(repo / "cfg"))
    (repo / "cfg" / "slm-rerank").mkdir(parents=True)
    (repo / "cfg" / "slm-rerank" / "config.toml").write_text('disabled_plugins = ["explosive"]\n')
    assert run("-q", "retry", "--fast", "--root", str(repo)).exit_code == 0


def test_a_query_is_logged_and_stats_summarise_by_caller(
        repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SLM_RERANK_CACHE_DIR", str(tmp_path / "cache"))
    for caller in ("cli", "mcp", "mcp"):
        assert run("-q", "retry backoff", "--fast", "--root", str(repo),
                   "--caller", caller).exit_code == 0
    lines = (tmp_path / "cache" / "usage.jsonl").read_text().splitlines()
    entry = json.loads(lines[0])
    assert entry["query"] == "retry backoff" and entry["caller"] == "cli"
    assert entry["top_paths"][0] == "src/net/retry.py"
    assert entry["latency_ms"] > 0
    stats = json.loads(run("stats", "--format", "json").stdout)
    assert stats["queries"] == 3
    assert [(c["caller"], c["queries"]) for c in stats["by_caller"]] == [("cli", 1), ("mcp", 2)]


def test_the_usage_log_keeps_only_the_first_500_characters(
        repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SLM_RERANK_CACHE_DIR", str(tmp_path / "cache"))
    long_query = "retry " * 200
    assert run("-q", long_query, "--fast", "--root", str(repo)).exit_code == 0
    entry = json.loads((tmp_path / "cache" / "usage.jsonl").read_text())
    assert entry["query"] == long_query[:500]


def test_without_a_model_server_the_lexical_result_says_it_is_degraded(
        repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # a port nothing listens on, so a server on the user's machine cannot answer instead
    monkeypatch.setenv("SLM_ENDPOINT", "http://127.0.0.1:9")
    result = run("-q", "retry", "--root", str(repo), "--format", "json")
    assert result.exit_code == 0
    doc = json.loads(result.stdout)
    assert doc["degraded"]["reason"].startswith(
        "the model server http://127.0.0.1:9 (from env: SLM_ENDPOINT) did not answer")
    assert doc["results"][0]["path"] == "src/net/retry.py"
    assert "degraded:" in result.stderr
    fast = json.loads(run("-q", "retry", "--root", str(repo), "--format", "json",
                          "--fast").stdout)
    assert fast["degraded"] is None


def test_version_is_the_installed_distributions_version() -> None:
    result = run("--version")
    assert result.exit_code == 0
    assert result.stdout == f"slm-rerank, version {importlib.metadata.version('slm-rerank')}\n"


@pytest.mark.parametrize(("key", "value", "message"), [
    ("format", "yaml", "key 'format': unknown format 'yaml' (installed: json, jsonl"),
    ("sources", "ripgrep, nosuch", "key 'sources': unknown source 'nosuch'"),
    ("scorer", "magic", "key 'scorer': unknown scorer 'magic' (installed: graded, listwise, "
                        "rerank-endpoint, yesno)"),
    ("top_k", "0", "key 'top_k' must be at least 1"),
    ("threshold", "5", "key 'threshold' must be at most 1"),
])
def test_config_set_refuses_a_value_that_would_fail_when_read(
        key: str, value: str, message: str) -> None:
    from slm_rerank.config import user_config_path

    result = run("config", "set", key, value)
    assert result.exit_code == 1
    assert message in result.stderr
    assert not user_config_path().exists()


def test_a_format_from_the_repo_file_that_is_not_installed_names_the_file(
        repo: Path) -> None:
    (repo / ".slm-rerank.toml").write_text('format = "yaml"\n')
    result = run("-q", "retry", "--fast", "--root", str(repo))
    assert result.exit_code == 0  # a repository's file is untrusted: a warning, text applies
    assert ".slm-rerank.toml" in result.stderr and "yaml" in result.stderr
    assert result.stdout.splitlines()[1].startswith("src/net/retry.py:")  # after the header


def test_config_set_takes_a_negative_number_as_a_value_not_an_option() -> None:
    result = run("config", "set", "threshold", "-1")
    assert result.exit_code == 1
    assert "key 'threshold' must be at least 0.0, got -1.0" in result.stderr


def test_expand_without_a_model_server_searches_the_typed_words_and_says_why(
        repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SLM_ENDPOINT", "http://127.0.0.1:9")  # nothing listens there
    result = run("-q", "retry", "--fast", "--expand", "-v", "--root", str(repo))
    assert result.exit_code == 0, result.stderr
    assert "query expansion has no model" in result.stderr
    assert result.stdout.splitlines()[1].startswith("src/net/retry.py:")  # after the header


def test_a_fast_search_imports_no_model_stage_machinery(repo: Path) -> None:
    # --fast must stay cheap to start: no HTTP client, event loop or score-cache database,
    # nor OpenSSL's library for a digest (``digests.py``)
    probe = ("import sys; from slm_rerank.cli import main; sys.argv = ['slm-rerank', '-q', "
             "'retry', '--fast', '--root', sys.argv[1]]\n"
             "try:\n    main()\nexcept SystemExit:\n    pass\n"
             "print(sorted(m for m in ('httpx', 'asyncio', 'sqlite3', '_hashlib')"
             " if m in sys.modules), file=sys.stderr)")
    done = subprocess.run([sys.executable, "-c", probe, str(repo)], capture_output=True,
                          text=True, timeout=60)
    assert done.stderr.strip().splitlines()[-1] == "[]", done.stderr


@pytest.mark.parametrize(("key", "value", "message"), [
    ("base_url", "notaurl", "config set base_url: model server URL 'notaurl' is not an http(s)"),
    ("endpoints", '["ftp://x"]', "model server URL 'ftp://x' is not an http(s) URL"),
    ("endpoints", '["http://a:1", "http://a:1/v1"]', "http://a:1 is listed twice"),
    ("endpoints", '{qwen = "notaurl"}', "model server URL 'notaurl' is not an http(s) URL"),
    ("plugins", '{graded = {foo = 1}}', "[plugins.graded]: unknown key 'foo'"),
    ("plugins", '{listwise = {window = "many"}}', "[plugins.listwise]: key 'window'"),
    ("plugins", '{nosuch = {a = 1}}', "nothing named 'nosuch' is registered"),
])
def test_config_set_refuses_urls_and_plugin_options_that_would_fail_when_read(
        key: str, value: str, message: str) -> None:
    result = run("config", "set", key, value)

    assert result.exit_code == 1, result.output
    assert message in result.stderr
    assert f"config set {key}" in result.stderr
    assert not user_config_path().exists()


def test_config_set_still_takes_good_urls_and_plugin_options() -> None:
    assert run("config", "set", "endpoints", '["http://a:1", "http://b:2/v1"]').exit_code == 0
    assert run("config", "set", "base_url", "http://gpu:8000").exit_code == 0
    assert run("config", "set", "plugins", '{graded = {max_grade = 5}}').exit_code == 0
    assert "max_grade = 5" in user_config_path().read_text()
