"""The score cache: isolated per model and prompt, safe for two processes at once."""

from __future__ import annotations

import multiprocessing
from pathlib import Path

import pytest

from slm_rerank.model.score_cache import ScoreCache, ScoreKey


def key(model: str = "qwen3", version: str = "v1", query: str = "retry loop",
        content: str = "c1") -> ScoreKey:
    return ScoreKey(model, "qwen", version, "yesno", query, content)


def test_a_score_is_found_again_by_the_same_question(tmp_path: Path) -> None:
    cache = ScoreCache(tmp_path)
    cache.put_many([(key(), 0.8, 1.4)])
    found = cache.get_many([key(query="  Retry   LOOP ")])
    assert [(c.probability, c.raw) for c in found.values()] == [(0.8, 1.4)]


def test_another_model_prompt_or_content_misses(tmp_path: Path) -> None:
    cache = ScoreCache(tmp_path)
    cache.put_many([(key(), 0.8, None)])
    for other in (key(model="gemma"), key(version="v2"), key(content="c2"),
                  key(query="retry policy")):
        assert cache.get_many([other]) == {}


def test_clear_by_query_keeps_the_others(tmp_path: Path) -> None:
    cache = ScoreCache(tmp_path)
    cache.put_many([(key(), 0.8, None), (key(content="c2"), 0.1, None),
                    (key(query="other"), 0.5, None)])
    assert cache.clear(query="retry loop") == 2
    assert cache.stats().entries == 1
    assert cache.clear() == 1


def _writer(folder: str, offset: int) -> None:
    cache = ScoreCache(Path(folder))
    for i in range(200):
        cache.put_many([(key(content=f"{offset}-{i}"), 0.5, None)])


def test_two_processes_write_at_once_without_losing_scores(tmp_path: Path) -> None:
    workers = [multiprocessing.Process(target=_writer, args=(str(tmp_path), n))
               for n in range(2)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(60)
    assert [w.exitcode for w in workers] == [0, 0]
    assert ScoreCache(tmp_path).stats().entries == 400


def test_a_corrupt_cache_file_is_a_clear_error(tmp_path: Path) -> None:
    import pytest

    from slm_rerank.errors import ConfigError

    (tmp_path / "scores.sqlite3").write_bytes(b"not a database" * 100)
    with pytest.raises(ConfigError, match="cache clear"):
        ScoreCache(tmp_path)


def test_cache_stats_and_clear_from_the_command_line(isolated_home: Path) -> None:
    import json

    from click.testing import CliRunner

    from slm_rerank.cli.commands import cli

    ScoreCache(isolated_home).put_many([(key(), 0.8, None), (key(query="other"), 0.2, None)])
    runner = CliRunner()
    stats = json.loads(runner.invoke(cli, ["cache", "stats", "--format", "json"]).output)
    assert (stats["entries"], stats["queries"], stats["by_model"]) == (2, 2, {"qwen3": 2})
    cleared = runner.invoke(cli, ["cache", "clear", "--query", "Retry  loop"])
    assert cleared.exit_code == 0 and cleared.output == "1 cached scores deleted\n"
    assert ScoreCache(isolated_home).stats().entries == 1


def test_endpoints_says_why_a_server_does_not_answer() -> None:
    from click.testing import CliRunner

    from slm_rerank.cli.commands import cli

    result = CliRunner().invoke(cli, ["endpoints", "-e", "http://127.0.0.1:9"])
    assert result.exit_code == 0
    assert result.output.splitlines() == [
        "http://127.0.0.1:9  -  refused",
        "no model server answers; start the bundled one (slm-rerank serve --help) or your "
        "own and pass -e URL, or use --fast"]


# --- a disk that refuses writes (full, failing) -------------------------------------------


def _on_a_full_disk(folder: str, limit: int, out: multiprocessing.Queue) -> None:
    """In a child: writes past ``limit`` bytes of any file fail (EFBIG), as on a full disk."""
    import resource

    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, resource.RLIM_INFINITY))
    try:
        cache = ScoreCache(Path(folder))
        hits = cache.get_many([key(content=f"c{i}") for i in range(50)])
        cache.put_many([(key(query="new", content=f"{i}" * 100), 0.5, None)
                        for i in range(2000)])
        cache.close()
        out.put((len(hits), cache.warning))
    except Exception as exc:  # noqa: BLE001 - the parent asserts on what came out
        out.put((None, f"{type(exc).__name__}: {exc}"))


def under_a_full_disk(folder: Path, limit: int) -> tuple[int | None, str | None]:
    out: multiprocessing.Queue = multiprocessing.get_context("fork").Queue()
    child = multiprocessing.get_context("fork").Process(
        target=_on_a_full_disk, args=(str(folder), limit, out))
    child.start()
    child.join(60)
    return out.get(timeout=5)


def test_a_cache_the_full_disk_cannot_create_is_a_warning_not_an_error(tmp_path: Path) -> None:
    hits, warning = under_a_full_disk(tmp_path, 0)

    assert hits == 0
    assert warning is not None and "cache clear" not in warning
    assert warning.startswith(f"score cache {tmp_path / 'scores.sqlite3'} cannot be written "
                              "(disk I/O error): the disk is full or failing, the cache is "
                              "not broken: this run goes on without it")


def test_a_full_disk_keeps_the_cached_scores_readable_and_drops_the_new_ones(
        tmp_path: Path) -> None:
    cache = ScoreCache(tmp_path)
    cache.put_many([(key(content=f"c{i}"), 0.5, None) for i in range(50)])
    cache.close()
    size = sum(p.stat().st_size for p in tmp_path.iterdir())

    hits, warning = under_a_full_disk(tmp_path, size + 8192)

    assert hits == 50
    assert warning is not None and "disk is full or failing" in warning
    assert ScoreCache(tmp_path).stats().entries == 50  # not corrupt: nothing to clear


def test_cache_stats_on_a_disk_that_refused_the_cache_names_the_disk(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import sqlite3

    from slm_rerank.errors import ConfigError

    def full(*args: object, **kwargs: object) -> None:
        raise sqlite3.OperationalError("database or disk is full")

    monkeypatch.setattr(sqlite3, "connect", full)
    cache = ScoreCache(tmp_path)

    assert cache.get_many([key()]) == {}
    with pytest.raises(ConfigError, match="database or disk is full.*disk is full or failing"):
        cache.stats()
