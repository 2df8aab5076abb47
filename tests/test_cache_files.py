"""Files in the cache folder are opened only as regular files: a FIFO there never hangs a
search, a symlink there is never written (or read) through, an oversize entry is a miss."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from search_fixtures import CLI, cli, make_repo

from slm_rerank import safefile, usage
from slm_rerank.errors import ConfigError
from slm_rerank.lexical import chunking
from slm_rerank.lexical.chunk_cache import ChunkCache
from slm_rerank.model import score_cache
from slm_rerank.model.score_cache import FILE_NAME, ScoreCache, ScoreKey

#: Far above what a --fast search over a tiny repository takes, even on a busy machine.
GENEROUS = 60


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return make_repo(tmp_path / "repo", {"src/beacon.py": "def beacon():\n    return 1\n"})


def key(query: str = "beacon") -> ScoreKey:
    return ScoreKey("model", "profile", "v1", "yesno", query, "hash")


# --- the usage log ------------------------------------------------------------------------

def test_a_fifo_at_the_usage_log_does_not_hang_a_fast_search(repo: Path, tmp_path: Path
                                                                ) -> None:
    cache = tmp_path / "cache"
    cache.mkdir()
    os.mkfifo(cache / usage.LOG_NAME)

    # cli() raises TimeoutExpired if the search never ends (it blocked in open() for ever)
    run = cli("-q", "beacon", "--fast", cwd=repo, timeout=GENEROUS,
              env={"SLM_RERANK_CACHE_DIR": str(cache)})

    assert run.returncode == 0, run.stderr
    assert "src/beacon.py" in run.stdout
    assert "FIFO" in run.stderr and str(cache / usage.LOG_NAME) in run.stderr


def test_a_fifo_at_the_usage_log_does_not_hang_the_prompt_hook(repo: Path, tmp_path: Path
                                                                ) -> None:
    cache = tmp_path / "cache"
    cache.mkdir()
    os.mkfifo(cache / usage.LOG_NAME)
    prompt = json.dumps({"session_id": "s", "cwd": str(repo), "prompt":
                         "where is beacon defined", "hook_event_name": "UserPromptSubmit"})

    # the hook has 5 s; it blocked opening the log for ever (TimeoutExpired here)
    done = subprocess.run([str(CLI), "hook", "claude-prompt"], input=prompt.encode(), cwd=repo,
                          capture_output=True, timeout=GENEROUS,
                          env={**os.environ, "SLM_RERANK_CACHE_DIR": str(cache)})

    assert done.returncode == 0, done.stderr
    assert b"src/beacon.py" in done.stdout


def test_stats_refuses_a_fifo_usage_log_by_name_without_hanging(repo: Path, tmp_path: Path
                                                               ) -> None:
    cache = tmp_path / "cache"
    cache.mkdir()
    os.mkfifo(cache / usage.LOG_NAME)

    run = cli("stats", cwd=repo, timeout=GENEROUS, env={"SLM_RERANK_CACHE_DIR": str(cache)})

    assert run.returncode == 1
    assert "Traceback" not in run.stderr
    assert "FIFO" in run.stderr and f"rm {cache / usage.LOG_NAME}" in run.stderr


def test_a_symlink_at_the_usage_log_is_not_appended_through(tmp_path: Path) -> None:
    target = tmp_path / "someone-elses.txt"
    target.write_text("precious\n")
    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / usage.LOG_NAME).symlink_to(target)

    with pytest.raises(safefile.NotRegularFile, match="symbolic link"):
        usage.append_hook(cache, "secret query", "hook", 1.0, {"decision": "query"})

    assert target.read_text() == "precious\n"


def test_stats_does_not_read_a_usage_log_through_a_symlink(tmp_path: Path) -> None:
    target = tmp_path / "elsewhere.jsonl"
    target.write_text('{"caller": "cli", "latency_ms": 10}\n')
    (tmp_path / usage.LOG_NAME).symlink_to(target)

    with pytest.raises(ConfigError, match="symbolic link"):
        usage.summarize(tmp_path)


# --- the chunk cache ----------------------------------------------------------------------

def test_a_fifo_in_the_slice_cache_is_a_miss_without_hanging(tmp_path: Path) -> None:
    data = b"def beacon():\n    return 1\n"
    cache_key = chunking.content_key("beacon.py", data)
    entry = tmp_path / "chunks" / cache_key[:2] / f"{cache_key}.json"
    entry.parent.mkdir(parents=True)
    os.mkfifo(entry)
    script = (
        "import sys; from pathlib import Path\n"
        "from slm_rerank.lexical.chunk_cache import ChunkCache\n"
        "data = b'def beacon():\\n    return 1\\n'\n"
        "chunks = ChunkCache(Path(sys.argv[1])).slice('beacon.py', data, data.decode())\n"
        "print(chunks[0].symbol)\n")

    # a child process: the read blocked for ever, and a hung test must still end
    done = subprocess.run([sys.executable, "-c", script, str(tmp_path / "chunks")],
                          capture_output=True, text=True, timeout=GENEROUS)

    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "beacon"


def test_a_symlinked_slice_cache_entry_is_a_miss(tmp_path: Path) -> None:
    data = b"def beacon():\n    return 1\n"
    cache = ChunkCache(tmp_path / "chunks")
    cache_key = chunking.content_key("beacon.py", data)
    elsewhere = tmp_path / "planted.json"
    elsewhere.write_text(json.dumps([[1, 2, "planted", ["planted"]]]))
    entry = cache._path(cache_key)
    entry.parent.mkdir(parents=True)
    entry.symlink_to(elsewhere)

    assert cache.get(cache_key, 2) is None
    chunks = cache.slice("beacon.py", data, data.decode())

    assert chunks[0].symbol == "beacon"
    assert not entry.is_symlink()  # the rename replaced the link, never wrote through it
    assert json.loads(elsewhere.read_text())[0][2] == "planted"


def test_a_slice_cache_entry_above_the_cap_for_its_file_is_a_miss(tmp_path: Path) -> None:
    data = b"def beacon():\n    return 1\n"
    cache = ChunkCache(tmp_path / "chunks")
    cache_key = chunking.content_key("beacon.py", data)
    entry = cache._path(cache_key)
    entry.parent.mkdir(parents=True)
    # a valid entry, padded to 1 MB, past anything an entry for a 27-byte file can be
    # (entry_cap: 8 bytes a byte + 64 KiB): it was read whole however large (a 3 GB file
    # took the process to 5.9 GB)
    entry.write_text('[[1, 2, "planted", ["planted"]]]' + " " * (1 << 20))

    chunks = cache.slice("beacon.py", data, data.decode())

    assert chunks[0].symbol == "beacon"
    assert cache.get(cache_key, 2) is not None  # rewritten with the real, small entry


def test_a_huge_sparse_slice_cache_entry_is_not_read(tmp_path: Path) -> None:
    cache = ChunkCache(tmp_path / "chunks")
    entry = cache._path("ab" * 32)
    entry.parent.mkdir(parents=True)
    with open(entry, "wb") as out:
        out.truncate(3 << 30)  # 3 GB that take no disk; reading them would take the memory

    assert cache.get("ab" * 32, 10, max_bytes=1 << 20) is None


# --- the score cache ----------------------------------------------------------------------

def test_a_symlink_at_the_score_cache_turns_it_off_and_leaves_the_target_alone(
        tmp_path: Path) -> None:
    other = tmp_path / "other-app.db"
    with sqlite3.connect(other) as db:
        db.execute("CREATE TABLE theirs (x)")
    db.close()
    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / FILE_NAME).symlink_to(other)

    store = ScoreCache(cache)
    store.put_many([(key(), 0.9, None)])
    found = store.get_many([key()])
    store.close()

    assert found == {}
    assert store.warning is not None and "symbolic link" in store.warning
    assert "goes on without the score cache" in store.warning
    with sqlite3.connect(other) as db:
        tables = [r[0] for r in db.execute("SELECT name FROM sqlite_master")]
    db.close()
    assert tables == ["theirs"]


@pytest.mark.parametrize("suffix", ["-wal", "-shm"])
def test_a_symlink_at_the_score_cache_journal_turns_it_off(tmp_path: Path, suffix: str
                                                           ) -> None:
    target = tmp_path / "precious"
    target.write_bytes(b"precious")
    (tmp_path / (FILE_NAME + suffix)).symlink_to(target)

    store = ScoreCache(tmp_path)
    store.put_many([(key(), 0.9, None)])
    store.close()

    assert store.warning is not None and FILE_NAME + suffix in store.warning
    assert target.read_bytes() == b"precious"


def test_a_fifo_at_the_score_cache_is_named_as_a_fifo_not_a_full_disk(tmp_path: Path
                                                                      ) -> None:
    os.mkfifo(tmp_path / FILE_NAME)

    store = ScoreCache(tmp_path)

    assert store.warning is not None
    assert "FIFO" in store.warning and "disk" not in store.warning
    with pytest.raises(ConfigError, match="FIFO") as raised:
        store.stats()
    assert "goes on" not in str(raised.value)  # `cache stats` runs nothing on


# --- a read-only cache folder -------------------------------------------------------------

def imitate_a_read_only_folder(monkeypatch: pytest.MonkeyPatch) -> None:
    """What a read-only folder does to SQLite and to the write probe, for root (whom
    chmod does not stop)."""
    def refused(*args: object, **kwargs: object) -> sqlite3.Connection:
        raise sqlite3.OperationalError("unable to open database file")

    monkeypatch.setattr(score_cache.sqlite3, "connect", refused)
    monkeypatch.setattr(score_cache, "_folder_unwritable", lambda folder: True)


@pytest.fixture
def read_only_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A folder that refuses new files. Root writes anywhere, and no read-only mount can be
    made here: as root, what a read-only folder does to SQLite and to a probe is imitated."""
    folder = tmp_path / "cache"
    folder.mkdir()
    folder.chmod(0o555)
    if os.geteuid() == 0:
        imitate_a_read_only_folder(monkeypatch)
    yield folder
    folder.chmod(0o755)


def test_a_read_only_cache_folder_with_no_cache_says_there_is_nothing_to_clear(
        read_only_cache: Path) -> None:
    with pytest.raises(ConfigError) as raised:
        ScoreCache(read_only_cache)

    message = str(raised.value)
    assert "read-only" in message and "nothing to clear" in message
    assert "cache clear" not in message  # `cache clear` sent the user to itself
    assert f"chmod u+w {read_only_cache}" in message


def test_a_cache_in_a_read_only_folder_names_the_folder_not_a_broken_file(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ScoreCache(tmp_path / "cache").close()  # a real cache, then its folder turns read-only
    folder = tmp_path / "cache"
    for extra in folder.glob(FILE_NAME + "-*"):
        extra.unlink()
    folder.chmod(0o555)
    if os.geteuid() == 0:
        imitate_a_read_only_folder(monkeypatch)
    try:
        with pytest.raises(ConfigError) as raised:
            ScoreCache(folder)
    finally:
        folder.chmod(0o755)

    message = str(raised.value)
    assert f"its folder {folder} is read-only" in message
    assert "cache clear" not in message
