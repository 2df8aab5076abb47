"""Start-up of the command line: a search imports only what it runs, and the entry-point
list is kept between starts, keyed by what is installed.

Every test runs the installed ``slm-rerank`` (or its ``main``) in a real process, with a
fake plugin distribution written as a ``*.dist-info`` folder into a folder on PYTHONPATH.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from search_fixtures import REPO_FILES, cli, make_repo, user_config

from slm_rerank import plugin_listing
from slm_rerank.plugin_listing import FORMAT
from slm_rerank.plugins import LOAD_PLUGINS_ENV, host_requirements

PLUGIN = '''\
import slm_rerank


@slm_rerank.hookimpl
def register_commands(cli):
    import click

    @cli.command("fake-hello")
    def hello():
        click.echo("hello from fakeplug")
'''


def install_fake(site: Path) -> Path:
    """Install the distribution ``fakeplug`` into ``site`` (its module and its metadata)."""
    (site / "fakeplug.py").write_text(PLUGIN, encoding="utf-8")
    info = site / "fakeplug-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: fakeplug\nVersion: 1.0\n",
                                   encoding="utf-8")
    (info / "entry_points.txt").write_text("[slm_rerank]\nfakeplug = fakeplug\n",
                                           encoding="utf-8")
    return info


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A folder on the CLI's PYTHONPATH, empty; the fake plugin allowed to load."""
    folder = tmp_path / "site"
    folder.mkdir()
    monkeypatch.setenv("PYTHONPATH", str(folder))
    monkeypatch.setenv(LOAD_PLUGINS_ENV, f"{os.environ[LOAD_PLUGINS_ENV]},fakeplug")
    return folder


def listed_names(tmp_path: Path) -> list[str]:
    """The fake plugin's name if `slm-rerank plugins` lists it (the shipped model families
    installed beside the host are left out)."""
    done = cli("plugins", "--format", "json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    return [row["name"] for row in json.loads(done.stdout) if row["name"] == "fakeplug"]


def cache_files(cache: Path) -> list[Path]:
    return sorted((cache / "plugins").glob("entry-points-*.json"))


def test_a_plugin_installed_or_removed_is_seen_on_the_next_start(
        site: Path, tmp_path: Path, isolated_home: Path) -> None:
    assert listed_names(tmp_path) == []
    [kept] = cache_files(isolated_home)  # the first start kept the list

    info = install_fake(site)
    assert listed_names(tmp_path) == ["fakeplug"]
    assert cli("fake-hello", cwd=tmp_path).stdout == "hello from fakeplug\n"
    assert listed_names(tmp_path) == ["fakeplug"]  # from the cache now

    shutil.rmtree(info)
    assert listed_names(tmp_path) == []
    assert cache_files(isolated_home) == [kept]


def test_the_kept_list_is_what_a_start_loads(site: Path, tmp_path: Path,
                                             isolated_home: Path) -> None:
    # an entry added to the kept list under the current key is loaded: the start read the
    # cache, not every distribution's metadata
    (site / "fakeplug.py").write_text(PLUGIN, encoding="utf-8")
    assert listed_names(tmp_path) == []
    [kept] = cache_files(isolated_home)
    data = json.loads(kept.read_text())
    data["entry_points"].append({"name": "fakeplug", "value": "fakeplug",
                                 "distribution": "fakeplug", "version": "1.0",
                                 "builtin": False})
    kept.write_text(json.dumps(data))

    assert listed_names(tmp_path) == ["fakeplug"]


def test_a_process_lists_once_while_nothing_is_installed_or_removed(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, isolated_home: Path) -> None:
    # a long-lived process (the warm server and its worker) asks again for each host: it
    # reads neither the metadata nor the cache file then, whichever cache folder it names
    monkeypatch.setattr(plugin_listing, "_cached", True)
    monkeypatch.setattr(plugin_listing, "_last", None)
    first = plugin_listing.listed(host_requirements, isolated_home)
    assert cache_files(isolated_home)
    read: list[str] = []
    real_read, real_metadata = plugin_listing._read, plugin_listing._from_metadata
    monkeypatch.setattr(plugin_listing, "_read", lambda *a: read.append("cache") or real_read(*a))
    monkeypatch.setattr(plugin_listing, "_from_metadata",
                        lambda *a: read.append("metadata") or real_metadata(*a))
    assert plugin_listing.listed(host_requirements, tmp_path / "elsewhere") == first
    assert read == []
    site = tmp_path / "site"  # a distribution installed: its entry point is seen
    site.mkdir()
    install_fake(site)
    monkeypatch.syspath_prepend(str(site))
    again = plugin_listing.listed(host_requirements, isolated_home)
    assert read == ["cache", "metadata"]
    assert [ep.name for ep in again if ep.name == "fakeplug"] == ["fakeplug"]


def test_the_warm_process_reads_no_metadata_once_the_list_is_kept(
        tmp_path: Path, isolated_home: Path) -> None:
    # the metadata's modules (importlib.metadata, the email parser) took 1.9 MiB of every
    # worker forked from it
    listed_names(tmp_path)  # the command line keeps the list; the server, started in
    # another folder (so with another first folder on sys.path), reads the same
    code = ("import sys; from slm_rerank.warm_process import server; server._preload(); "
            "print(sorted(m for m in ('importlib.metadata', 'email.parser') "
            "if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd="/", timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]", done.stderr


def test_a_folder_on_sys_path_with_no_metadata_leaves_the_key_as_it_is(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    key = plugin_listing.installed_key()
    monkeypatch.syspath_prepend(str(tmp_path))
    assert plugin_listing.installed_key() == key
    install_fake(tmp_path)
    assert plugin_listing.installed_key() != key


def test_an_unzipped_egg_put_on_sys_path_is_listed(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, isolated_home: Path) -> None:
    # an egg is a distribution by its EGG-INFO folder: no *.dist-info names it
    monkeypatch.setattr(plugin_listing, "_cached", True)
    monkeypatch.setattr(plugin_listing, "_last", None)
    key = plugin_listing.installed_key()
    plugin_listing.listed(host_requirements, isolated_home)
    egg = tmp_path / "fakeegg-1.0-py3.11.egg"
    (egg / "EGG-INFO").mkdir(parents=True)
    (egg / "EGG-INFO" / "PKG-INFO").write_text("Metadata-Version: 1.1\nName: fakeegg\n"
                                              "Version: 1.0\n", encoding="utf-8")
    (egg / "EGG-INFO" / "entry_points.txt").write_text("[slm_rerank]\neggplug = eggmod\n",
                                                       encoding="utf-8")
    monkeypatch.syspath_prepend(str(egg))
    assert plugin_listing.installed_key() != key
    listed = plugin_listing.listed(host_requirements, isolated_home)
    assert [ep.name for ep in listed if ep.name == "eggplug"] == ["eggplug"]


@pytest.mark.parametrize("content", [
    b"\x00\xffnot json", b"[1, 2]", b'{"format": "something else", "key": "k"}',
    b"{}", b"entry_points with rows of the wrong shape",
])
def test_a_corrupt_or_foreign_cache_file_is_ignored_and_rewritten(
        site: Path, tmp_path: Path, isolated_home: Path, content: bytes) -> None:
    install_fake(site)
    assert listed_names(tmp_path) == ["fakeplug"]
    [kept] = cache_files(isolated_home)
    if content.startswith(b"entry_points"):
        data = json.loads(kept.read_text())
        data["entry_points"] = [["fakeplug"], {"name": 3}]
        content = json.dumps(data).encode()
    kept.write_bytes(content)

    assert listed_names(tmp_path) == ["fakeplug"]
    data = json.loads(kept.read_text())
    assert data["format"] == FORMAT
    assert [row["name"] for row in data["entry_points"]].count("fakeplug") == 1


@pytest.mark.parametrize("kind", ["fifo", "symlink"])
def test_a_fifo_or_symlink_at_the_cache_file_is_neither_waited_on_nor_followed(
        site: Path, tmp_path: Path, isolated_home: Path, kind: str) -> None:
    install_fake(site)
    assert listed_names(tmp_path) == ["fakeplug"]
    [kept] = cache_files(isolated_home)
    kept.unlink()
    outside = tmp_path / "someone-elses-file"
    outside.write_text("theirs")
    if kind == "fifo":
        os.mkfifo(kept)
    else:
        kept.symlink_to(outside)

    assert listed_names(tmp_path) == ["fakeplug"]  # cli() gives up after 30 s
    assert outside.read_text() == "theirs"
    assert kept.is_file() and not kept.is_symlink()
    assert json.loads(kept.read_text())["format"] == FORMAT


def test_a_list_kept_for_another_installation_is_not_used(
        site: Path, tmp_path: Path, isolated_home: Path) -> None:
    (site / "fakeplug.py").write_text(PLUGIN, encoding="utf-8")
    assert listed_names(tmp_path) == []
    [kept] = cache_files(isolated_home)
    data = json.loads(kept.read_text())
    data["key"] = "0" * 64  # written when something else was installed
    data["entry_points"].append({"name": "fakeplug", "value": "fakeplug",
                                 "distribution": "fakeplug", "version": "1.0",
                                 "builtin": False})
    kept.write_text(json.dumps(data))

    assert listed_names(tmp_path) == []
    assert "fakeplug" not in kept.read_text()


def test_disabled_plugins_still_keeps_a_listed_plugin_out(
        site: Path, tmp_path: Path) -> None:
    install_fake(site)
    assert listed_names(tmp_path) == ["fakeplug"]
    user_config().write_text('disabled_plugins = ["fakeplug"]\n', encoding="utf-8")

    assert listed_names(tmp_path) == []
    refused = cli("fake-hello", cwd=tmp_path)
    assert "fake-hello" not in refused.stdout and "hello from fakeplug" not in refused.stdout


def test_an_unwritable_cache_folder_costs_only_the_cache(
        site: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    monkeypatch.setenv("SLM_RERANK_CACHE_DIR", str(blocker / "cache"))
    install_fake(site)

    assert listed_names(tmp_path) == ["fakeplug"]


LOADED = """\
import json, sys
from slm_rerank.cli import main
sys.argv = ["slm-rerank", *sys.argv[2:]]
try:
    main()
except SystemExit:
    pass
with open({out!r}, "w") as f:
    json.dump(sorted(sys.modules), f)
"""


def modules_after_search(repo: Path, out: Path) -> set[str]:
    code = LOADED.format(out=str(out))
    done = subprocess.run([sys.executable, "-c", code, "-", "-q", "retry backoff", "--fast",
                           "--format", "json"], cwd=repo, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["results"], done.stdout
    return set(json.loads(out.read_text()))


def test_a_fast_search_imports_only_what_it_runs(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", REPO_FILES)
    modules_after_search(repo, tmp_path / "cold.json")  # keeps the entry-point list
    loaded = modules_after_search(repo, tmp_path / "warm.json")

    assert "slm_rerank.lexical.rank" in loaded  # it did search
    never = {"httpx", "slm_rerank.model.client", "slm_rerank.model.session", "tomli_w",
             "slm_rerank.cli.calibrate", "slm_rerank.cli.bench", "slm_rerank.cli.serve",
             "slm_rerank.cli.serve_api", "slm_rerank.cli.mcp", "slm_rerank.cli.hook",
             "slm_rerank.cli.config", "slm_rerank.cli.new_plugin", "slm_rerank.hook.claude",
             "slm_rerank.servers.rerank_api", "slm_rerank.servers.mcp", "mcp",
             "importlib.metadata"}  # the kept entry-point list: no metadata read
    assert sorted(loaded & never) == []
