"""Configuration layers, their origins, and what a bad file or value produces."""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path

import pytest
from search_fixtures import cli

from slm_rerank.config import (
    ConfigError,
    Settings,
    load_settings,
    repo_config_path,
    user_config_path,
    write_setting,
)
from slm_rerank.host import FLAG, Host


def make_repo(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    (repo / "pkg" / "deep").mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    return repo


def write_user_config(text: str) -> Path:
    path = user_config_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_defaults_have_default_origin(tmp_path: Path) -> None:
    settings = load_settings(start=tmp_path, environ={})
    assert settings.top_k == 10
    assert settings.origins["top_k"] == "default"


def test_each_layer_overrides_the_one_below(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    user = write_user_config('format = "json"\ntop_k = 3\nchunks = true\ncache_dir = "/u"\n')
    (repo / ".slm-rerank.toml").write_text("top_k = 2\nchunks = false\n")
    layers = load_settings(start=repo / "pkg" / "deep",
                           environ={"SLM_RERANK_CACHE_DIR": "/from-env"})
    settings = Host(layers).with_overrides(FLAG, chunks=True, format=None).settings
    assert (settings.format, settings.origins["format"]) == ("json", f"user: {user}")
    assert (settings.top_k, settings.origins["top_k"]) == (
        2, f"repo: {repo.resolve() / '.slm-rerank.toml'}")
    assert (settings.cache_dir, settings.origins["cache_dir"]) == (
        "/from-env", "env: SLM_RERANK_CACHE_DIR")
    assert (settings.chunks, settings.origins["chunks"]) == (True, "flag: --chunks")


def test_the_nearest_repo_file_wins_and_the_walk_stops_at_the_repo_root(tmp_path: Path) -> None:
    (tmp_path / ".slm-rerank.toml").write_text("top_k = 99\n")  # above the repository
    repo = make_repo(tmp_path)
    assert repo_config_path(repo / "pkg") is None
    (repo / "pkg" / ".slm-rerank.toml").write_text("top_k = 4\n")
    (repo / ".slm-rerank.toml").write_text("top_k = 6\n")
    assert load_settings(start=repo / "pkg" / "deep", environ={}).top_k == 4
    assert load_settings(start=repo, environ={}).top_k == 6


def test_an_unknown_key_names_the_file_and_the_key(tmp_path: Path) -> None:
    # the user's own file; a repository's is a warning (tests/cli/test_config_input.py)
    path = write_user_config("top_kk = 3\n")
    with pytest.raises(ConfigError) as info:
        load_settings(start=tmp_path, environ={})
    assert str(path) in str(info.value)
    assert "unknown key 'top_kk'" in str(info.value)


def test_a_wrong_type_names_the_file_the_key_and_the_type(tmp_path: Path) -> None:
    path = write_user_config('top_k = "ten"\n')
    with pytest.raises(ConfigError, match="key 'top_k' must be an integer") as info:
        load_settings(start=tmp_path, environ={})
    assert str(path) in str(info.value)


def test_a_boolean_is_not_an_integer(tmp_path: Path) -> None:
    write_user_config("top_k = true\n")
    with pytest.raises(ConfigError, match="top_k"):
        load_settings(start=tmp_path, environ={})


def test_invalid_toml_names_the_file(tmp_path: Path) -> None:
    path = write_user_config("top_k = = 3\n")
    with pytest.raises(ConfigError, match="invalid TOML") as info:
        load_settings(start=tmp_path, environ={})
    assert str(path) in str(info.value)


def test_a_bad_environment_value_names_the_variable(tmp_path: Path) -> None:
    from slm_rerank.config import parse_text

    with pytest.raises(ConfigError, match="environment X: key 'usage_log'"):
        parse_text("usage_log", "maybe", "environment X")


def test_set_keeps_other_keys_and_their_order(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text('format = "json"\ntop_k = 3\nsources = ["git"]\n')
    write_setting(path, "top_k", "7")
    write_setting(path, "disabled_plugins", "a, b")
    assert path.read_text() == (
        'format = "json"\ntop_k = 7\nsources = [\n    "git",\n]\n'
        'disabled_plugins = [\n    "a",\n    "b",\n]\n'
    )


def test_set_rejects_a_value_of_the_wrong_type_and_leaves_the_file_alone(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text("top_k = 3\n")
    with pytest.raises(ConfigError, match="must be an integer"):
        write_setting(path, "top_k", "many")
    assert path.read_text() == "top_k = 3\n"


# --- values checked when read and when set -------------------------------------------------


@pytest.mark.parametrize(("text", "message"), [
    ("top_k = 0\n", "key 'top_k' must be at least 1, got 0"),
    ("max_file_bytes = -5\n", "key 'max_file_bytes' must be at least 1"),
    ('cache_dir = "relative/cache"\n', "key 'cache_dir' must be an absolute path"),
    ("plugins = 3\n", "key 'plugins' must be a table"),
    ("[plugins]\ngemma = 3\n", r"\[plugins.gemma\] must be a table of settings"),
])
def test_a_value_out_of_range_names_the_file_and_the_key(
        tmp_path: Path, text: str, message: str) -> None:
    path = write_user_config(text)
    with pytest.raises(ConfigError, match=message) as info:
        load_settings(start=tmp_path, environ={})
    assert str(path) in str(info.value)




def test_a_relative_cache_dir_from_the_environment_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="environment SLM_RERANK_CACHE_DIR: key 'cache_dir' "
                                          "must be an absolute path"):
        load_settings(start=tmp_path, environ={"SLM_RERANK_CACHE_DIR": "cache"})


def test_a_deeply_nested_array_is_a_config_error_not_a_crash(tmp_path: Path) -> None:
    path = write_user_config("sources = " + "[" * 50_000 + "]" * 50_000 + "\n")
    with pytest.raises(ConfigError, match="nested too deeply") as info:
        load_settings(start=tmp_path, environ={})
    assert str(path) in str(info.value)


def test_a_huge_value_is_cut_in_the_error_message(tmp_path: Path) -> None:
    write_user_config('top_k = "' + "x" * 3_000_000 + '"\n')
    # over the size limit: refused before parsing
    with pytest.raises(ConfigError, match="larger than 1 MB") as info:
        load_settings(start=tmp_path, environ={})
    assert len(str(info.value)) < 300
    write_user_config('top_k = "' + "x" * 900_000 + '"\n')
    with pytest.raises(ConfigError, match=r"must be an integer, got str 'xxx.*\(900002 chars\)"
                       ) as info:
        load_settings(start=tmp_path, environ={})
    assert len(str(info.value)) < 300


def test_plugin_tables_keep_an_origin_per_key_and_a_repository_changes_none(
        tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    user = write_user_config("[plugins.gemma]\ntemperature = 0.5\nlayout = \"raw\"\n")
    (repo / ".slm-rerank.toml").write_text("[plugins.gemma]\nlayout = \"turns\"\n")
    settings = load_settings(start=repo, environ={})
    assert settings.plugins == {"gemma": {"temperature": 0.5, "layout": "raw"}}
    assert settings.origins["plugins.gemma.temperature"] == f"user: {user}"
    assert settings.origins["plugins.gemma.layout"] == f"user: {user}"


def test_numbers_and_optional_values_parse_from_text() -> None:
    from slm_rerank.config import KeyType, check_typed

    assert check_typed(KeyType(float), 3, "x") == 3.0
    assert check_typed(KeyType(float, optional=True), None, "x") is None
    with pytest.raises(ConfigError, match="x must be a number"):
        check_typed(KeyType(float), True, "x")
    with pytest.raises(ConfigError, match="finite"):
        check_typed(KeyType(float), float("inf"), "x")


def test_the_endpoint_and_host_come_from_slm_endpoint_and_slm_host(tmp_path: Path) -> None:
    settings = load_settings(start=tmp_path, environ={"SLM_ENDPOINT": "http://a:1",
                                                       "SLM_HOST": "gpu-box"})

    assert (settings.base_url, settings.origins["base_url"]) == ("http://a:1",
                                                                 "env: SLM_ENDPOINT")
    assert (settings.host, settings.origins["host"]) == ("gpu-box", "env: SLM_HOST")


def test_an_empty_endpoint_variable_counts_as_unset(tmp_path: Path) -> None:
    settings = load_settings(start=tmp_path, environ={"SLM_ENDPOINT": ""})
    assert (settings.base_url, settings.origins["base_url"]) == (None, "default")


def test_a_removed_environment_name_is_not_read_and_one_line_says_which_to_set(
        tmp_path: Path) -> None:
    removed = {"RERANKER_BASE_URL": "http://b:2", "LFM_ENDPOINT": "http://c:3",
               "RERANKER_HOST": "b"}
    shown = cli("config", "show", cwd=tmp_path, env=removed)

    assert shown.returncode == 0, shown.stderr
    assert "http://b:2" not in shown.stdout and "http://c:3" not in shown.stdout
    warnings = shown.stderr.splitlines()
    assert ("slm-rerank: warning: environment RERANKER_BASE_URL is no longer read; "
            "set SLM_ENDPOINT instead") in warnings
    assert ("slm-rerank: warning: environment LFM_ENDPOINT is no longer read; "
            "set SLM_ENDPOINT instead") in warnings
    assert ("slm-rerank: warning: environment RERANKER_HOST is no longer read; "
            "set SLM_HOST instead") in warnings
    assert len(warnings) == 3
    # the documented name still works beside them
    named = cli("config", "show", cwd=tmp_path, env={**removed, "SLM_ENDPOINT": "http://a:1"})
    assert "http://a:1" in named.stdout and "http://b:2" not in named.stdout


# --- what a repository's own file may set (docs/user-guide.md, "What a repository may set") -


def repo_settings(tmp_path: Path, text: str) -> Settings:
    repo = make_repo(tmp_path)
    (repo / ".slm-rerank.toml").write_text(text)
    return load_settings(start=repo, environ={})


def warnings(err: str) -> list[str]:
    return [line for line in err.splitlines() if line.startswith("slm-rerank: warning: ")]


def test_a_repository_cannot_start_a_server_that_never_stops(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    settings = repo_settings(tmp_path, "auto_serve = true\nserve_idle = 0\n")

    assert (settings.auto_serve, settings.serve_idle) == (False, 900.0)
    lines = warnings(capsys.readouterr().err)
    assert len(lines) == 2
    assert "key 'auto_serve' ignored" in lines[0] and "starts a process" in lines[0]
    assert "key 'serve_idle' ignored" in lines[1]


@pytest.mark.parametrize("key", ["cache_dir", "base_url", "host", "api_key", "api", "model",
                                 "scorer", "concurrency", "score_cache"])
def test_a_key_a_repository_may_not_set_is_a_warning_whatever_its_value(
        tmp_path: Path, key: str, capsys: pytest.CaptureFixture[str]) -> None:
    # even a value of the wrong type: the key is ignored before its value is looked at
    settings = repo_settings(tmp_path, f"{key} = [1, 2]\n")

    assert getattr(settings, key) == getattr(Settings(), key)
    assert settings.origins[key] == "default"
    [line] = warnings(capsys.readouterr().err)
    assert f"key '{key}' ignored: a repository's .slm-rerank.toml may not set it" in line


def test_a_repository_cannot_set_plugin_options(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    settings = repo_settings(tmp_path, "[plugins.listwise]\nwindow = 100000\n")

    assert settings.plugins == {}
    [line] = warnings(capsys.readouterr().err)
    assert "[plugins.'listwise'] ignored: a repository's .slm-rerank.toml may not set plugin " \
           "options" in line


def test_a_repository_may_lower_a_deadline_but_not_raise_it(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    raised = repo_settings(tmp_path / "a", "hook_deadline = 1e9\ntimeout = 1e9\n")
    lowered = repo_settings(tmp_path / "b", "hook_deadline = 1\ntimeout = 2.5\n")

    assert (raised.hook_deadline, raised.timeout) == (5.0, 60.0)
    assert raised.origins["timeout"] == "default"
    assert (lowered.hook_deadline, lowered.timeout) == (1.0, 2.5)
    lines = warnings(capsys.readouterr().err)
    assert len(lines) == 2
    assert "key 'hook_deadline' = 1000000000.0 ignored: a repository may lower it, not raise " \
           "it above 5.0 (a deadline)" in lines[0]


def test_the_bound_on_a_repository_is_the_users_value_not_the_default(tmp_path: Path) -> None:
    write_user_config("timeout = 10\nrerank_top = 4\n")

    settings = repo_settings(tmp_path, "timeout = 30\nrerank_top = 8\n")

    assert (settings.timeout, settings.rerank_top) == (10.0, 4)
    assert settings.origins["timeout"].startswith("user: ")


def test_the_hook_keeps_its_deadline_under_a_repository_that_raises_it(tmp_path: Path) -> None:
    from slm_rerank.hook.claude import _configured_deadline

    repo = make_repo(tmp_path)
    (repo / ".slm-rerank.toml").write_text("hook_deadline = 1e9\n")

    assert _configured_deadline(repo) == 5.0


def test_a_repository_cannot_make_the_model_judge_more(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    settings = repo_settings(tmp_path, "rerank_top = 100000\nfull = true\n"
                                       "prompt_chars = 100000\n")

    assert (settings.rerank_top, settings.full, settings.prompt_chars) == (16, False, 1500)
    assert len(warnings(capsys.readouterr().err)) == 3


def test_a_repository_may_turn_the_usage_log_off_but_not_on(tmp_path: Path) -> None:
    assert repo_settings(tmp_path / "a", "usage_log = false\n").usage_log is False
    write_user_config("usage_log = false\n")
    assert repo_settings(tmp_path / "b", "usage_log = true\n").usage_log is False


def test_a_repository_may_shape_ranking_and_scope(tmp_path: Path) -> None:
    settings = repo_settings(tmp_path, 'top_k = 3\nthreshold = 0.2\nsources = ["git"]\n'
                                       "max_file_bytes = 1000\n")

    assert (settings.top_k, settings.threshold, settings.sources, settings.max_file_bytes) == (
        3, 0.2, ["git"], 1000)
    assert settings.repo_refusals == {}


def test_a_repositorys_huge_max_file_bytes_is_a_warning_and_the_query_runs(
        repo: Path) -> None:
    from search_fixtures import cli

    (repo / ".slm-rerank.toml").write_text("max_file_bytes = 100000000000\n")

    run = cli("-q", "retry", "--fast", cwd=repo)

    assert run.returncode == 0, run.stderr
    assert run.stdout.strip()
    assert "MemoryError" not in run.stderr
    [line] = warnings(run.stderr)
    assert "key 'max_file_bytes' = 100000000000 ignored" in line


def test_max_file_bytes_has_a_bound_for_everyone(tmp_path: Path) -> None:
    path = write_user_config("max_file_bytes = 100000000000\n")

    with pytest.raises(ConfigError, match="key 'max_file_bytes' must be at most 50000000, got "
                                          "100000000000: each candidate file is read whole"
                       ) as info:
        load_settings(start=tmp_path, environ={})
    assert str(path) in str(info.value)


def test_a_file_is_read_without_allocating_the_whole_limit(tmp_path: Path) -> None:
    from slm_rerank.lexical.reading import read_candidate as _read

    (tmp_path / "a.py").write_bytes(b"retry = 1\n")

    # read(limit + 1) asked the allocator for the whole limit up front: a MemoryError
    assert _read(tmp_path, "a.py", 1 << 62) == (b"retry = 1\n", None)


def test_a_growing_file_is_read_up_to_the_limit(tmp_path: Path) -> None:
    from slm_rerank.lexical.reading import read_candidate as _read

    # /proc files report size 0 and still have content; one that grew since stat is alike
    assert _read(Path("/proc/self"), "status", 1_000_000)[0]
    assert _read(Path("/proc/self"), "status", 10)[1].startswith("huge")


def test_config_show_says_which_repository_values_were_ignored_and_why(
        repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import json

    from click.testing import CliRunner

    from slm_rerank.cli.commands import cli

    monkeypatch.chdir(repo)
    (repo / ".slm-rerank.toml").write_text("auto_serve = true\ntimeout = 1e9\n")

    text = CliRunner().invoke(cli, ["config", "show"])
    doc = json.loads(CliRunner().invoke(cli, ["config", "show", "--format", "json"]).stdout)

    assert text.exit_code == 0, text.output
    lines = {line.split()[0]: line for line in text.stdout.splitlines()}
    assert "# default; " in lines["auto_serve"] and "starts a process" in lines["auto_serve"]
    assert "may lower it, not raise it" in lines["timeout"]
    assert doc["timeout"]["value"] == 60.0 and "a deadline" in doc["timeout"]["refused"]
    assert "refused" not in doc["top_k"]


def test_config_set_repo_refuses_a_key_a_repository_may_not_set(tmp_path: Path) -> None:
    path = tmp_path / ".slm-rerank.toml"

    with pytest.raises(ConfigError, match="may not set 'auto_serve' \\(starts a process\\)"):
        write_setting(path, "auto_serve", "true", repo=True)
    assert not path.exists()
    assert write_setting(path, "timeout", "5", repo=True) == 5.0


def test_config_set_repo_says_at_once_when_searches_will_ignore_the_value(
        tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)

    raised = cli("config", "set", "timeout", "500", "--repo", cwd=repo)
    lowered = cli("config", "set", "rerank_top", "4", "--repo", cwd=repo)

    assert raised.returncode == 0 and "written to" in raised.stdout
    assert "key 'timeout' = 500.0 ignored: a repository may lower it" in raised.stderr
    assert lowered.returncode == 0 and "rerank_top" not in lowered.stderr  # 4 < 16: kept


@pytest.mark.parametrize("kind", ["outside", "missing-outside", "fifo", "git-config"])
def test_config_set_repo_writes_nothing_through_a_repositorys_link_out_of_its_work_tree(
        tmp_path: Path, kind: str) -> None:
    # the repository's .slm-rerank.toml is untrusted: as a link it made `config set --repo`
    # replace a file of the user's (or a FIFO) outside the repository
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    (repo / ".git" / "config").write_text("[core]\nbare = false\n")
    victim = {"outside": tmp_path / "victim.toml", "missing-outside": tmp_path / "new.toml",
              "fifo": tmp_path / "pipe", "git-config": repo / ".git" / "config"}[kind]
    if kind == "outside":
        victim.write_text("timeout = 5\n")
    elif kind == "fifo":
        os.mkfifo(victim)
    (repo / ".slm-rerank.toml").symlink_to(victim)
    before = victim.read_text() if victim.is_file() else None

    run = cli("config", "set", "top_k", "3", "--repo", cwd=repo)

    assert run.returncode == 1 and run.stdout == ""
    assert "config set --repo writes only inside it" in run.stderr
    assert run.stderr.count("\n") == 1
    if kind == "fifo":
        assert stat.S_ISFIFO(os.lstat(victim).st_mode)
    else:
        assert (victim.read_text() if victim.is_file() else None) == before


def test_config_set_repo_writes_through_a_link_inside_the_work_tree(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    (repo / "shared.toml").write_text("top_k = 4\n")
    (repo / ".slm-rerank.toml").symlink_to("shared.toml")

    run = cli("config", "set", "top_k", "3", "--repo", cwd=repo)

    assert run.returncode == 0, run.stderr
    assert (repo / "shared.toml").read_text() == "top_k = 3\n"


def test_the_user_guide_table_is_the_trust_rule_of_every_key() -> None:
    from dataclasses import fields

    from slm_rerank.config import KEYS

    doc = (Path(__file__).resolve().parent.parent / "docs" / "user-guide.md").read_text()
    body = doc.split("<!-- repo-keys -->", 1)[1].split("<!-- /repo-keys -->", 1)[0]
    rows = [[cell.strip() for cell in line.strip("|").split("|")]
            for line in body.splitlines() if line.startswith("| `")]
    may = {"yes": "yes", "lower": "lower only", "no": "no"}
    expected = [[f"`{f.name}`", may[f.metadata["repo"]],
                 "—" if f.metadata["max"] is None else f"at most {f.metadata['max']:,}",
                 f.metadata["why"]]
                for f in fields(Settings) if f.name in KEYS]
    assert rows == expected


def test_a_switch_a_repository_turns_on_says_it_may_only_turn_it_off(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    repo_settings(tmp_path, "full = true\n")

    [line] = warnings(capsys.readouterr().err)
    assert "key 'full' = True ignored: a repository may turn it off, not on (spends the " \
           "model server); False applies" in line


def test_a_refusal_shows_no_raw_control_character_of_the_repositorys_path(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    repo = make_repo(tmp_path)
    inner = repo / "evil\x1b]0;owned\x07"
    inner.mkdir()
    (inner / ".slm-rerank.toml").write_text("auto_serve = true\n")

    settings = load_settings(start=inner, environ={})

    [line] = warnings(capsys.readouterr().err)
    assert "\x1b" not in line and "\x07" not in line and "evil\\x1b]0;owned\\x07" in line
    assert "\x1b" not in settings.repo_refusals["auto_serve"]
