"""The usage log's summary (`slm-rerank stats`): damaged lines are skipped and counted."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from search_fixtures import cli

from slm_rerank import usage

GOOD = '{"caller": "cli", "latency_ms": 10}\n'


def write_log(folder: Path, *lines: str) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / usage.LOG_NAME).write_text("".join(lines))


def test_a_deeply_nested_line_is_skipped_and_counted(tmp_path: Path) -> None:
    # json.loads recurses once per bracket: this raised RecursionError out of `stats`
    write_log(tmp_path, GOOD, "[" * 200_000 + "]" * 200_000 + "\n",
              '{"latency_ms": ' + "[" * 200_000 + "\n", GOOD)

    stats = usage.summarize(tmp_path)

    assert stats.skipped_lines == 2
    assert stats.queries == 2


def test_a_line_longer_than_the_cap_is_skipped_and_the_next_one_read(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(usage, "MAX_LINE_CHARS", 100)
    long_entry = json.dumps({"caller": "cli", "latency_ms": 10, "query": "x" * 1000}) + "\n"
    write_log(tmp_path, long_entry, GOOD, "y" * 1000)  # the last one without a newline

    stats = usage.summarize(tmp_path)

    assert stats.skipped_lines == 2
    assert stats.queries == 1


def test_stats_with_a_deeply_nested_line_prints_the_summary(
        repo: Path, isolated_home: Path) -> None:
    write_log(isolated_home, GOOD, "[" * 200_000 + "\n")

    run = cli("stats", cwd=repo)

    assert run.returncode == 0, run.stderr
    assert "Traceback" not in run.stderr
    assert "1 queries logged" in run.stdout
    assert "(1 unreadable lines skipped)" in run.stdout


def test_the_log_holds_no_raw_control_character_and_reads_back_exactly(tmp_path: Path) -> None:
    query = "why\x1b[2J\x9b31m\u2028\x7f\x07 tab\t"
    usage.append_hook(tmp_path, query, "cli", 1.0, {"decision": "skip"},
                      top_paths=["src/a\x1b.py"])

    raw = (tmp_path / usage.LOG_NAME).read_text(encoding="utf-8")
    for char in ("\x1b", "\x9b", "\u2028", "\x7f", "\x07", "\t"):
        assert char not in raw, repr(char)
    (entry,) = [json.loads(line) for line in raw.splitlines()]
    assert (entry["query"], entry["top_paths"]) == (query, ["src/a\x1b.py"])


def test_hook_lines_without_a_code_field_count_as_judged_code_when_they_searched(
        tmp_path: Path) -> None:
    lines = [
        {"hook": {"decision": "query", "queried": True, "reason": "source path"}},
        {"hook": {"decision": "timeout", "queried": True, "reason": "code-form symbol"}},
        {"hook": {"decision": "skip", "queried": False, "reason": "pleasantry"}},
        {"hook": {"decision": "error", "queried": True, "reason": "x; search failed: y"}},
        {"hook": {"decision": "skip", "queried": False, "code": False,
                  "reason": "no code in the prompt"}},
        {"hook": {"decision": "query", "queried": True, "code": True,
                  "reason": "words of this codebase"}},
    ]
    (tmp_path / "usage.jsonl").write_text("".join(
        json.dumps({"query": "q", "caller": "claude-code-hook", "latency_ms": 5.0, **line})
        + "\n" for line in lines))

    hook = usage.summarize(tmp_path).hook

    assert (hook.prompts, hook.judged_code) == (6, 3)
    assert hook.by_rule == {"source path": 1, "code-form symbol": 1,
                            "words of this codebase": 1}


def test_rules_past_the_cap_are_counted_as_other(tmp_path: Path) -> None:
    (tmp_path / "usage.jsonl").write_text("".join(
        json.dumps({"query": "q", "latency_ms": 1.0,
                    "hook": {"decision": "query", "queried": True, "code": True,
                             "reason": f"rule {i}"}}) + "\n" for i in range(usage.MAX_RULES + 5)))

    hook = usage.summarize(tmp_path).hook

    assert len(hook.by_rule) == usage.MAX_RULES + 1 and hook.by_rule["other"] == 5
    assert hook.judged_code == usage.MAX_RULES + 5


def test_a_long_caller_is_cut_in_the_log_and_in_stats(tmp_path: Path) -> None:
    # `--caller` of 100 KB was written whole into every line and printed whole by stats
    (tmp_path / "repo").mkdir()
    (tmp_path / "repo" / "retry.py").write_text("def retry():\n    pass\n")
    env = {"SLM_RERANK_CACHE_DIR": str(tmp_path / "cache"), "HOME": str(tmp_path)}
    run = cli("-q", "retry", "--fast", "--caller", "c" * 100_000, cwd=tmp_path / "repo",
              env=env)
    stats = cli("stats", cwd=tmp_path, env=env)

    assert run.returncode == stats.returncode == 0, run.stderr
    (entry,) = [json.loads(line) for line in
                (tmp_path / "cache" / usage.LOG_NAME).read_text().splitlines()]
    assert entry["caller"] == "c" * usage.CALLER_CHARS
    assert len(stats.stdout) < 2000
