"""`slm-rerank -q ... --fast` end to end, in a real process: output, scope, stdin, query files."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from search_fixtures import CLI, RETRY, cli, make_repo, result_paths, search


def test_fast_json_lists_ranked_files_with_lines_symbol_score_and_matched_terms(
        repo: Path) -> None:
    doc = cli("-q", "retry backoff", "--fast", "--format", "json", cwd=repo).json()

    assert doc["mode"] == "fast"
    assert doc["root"] == str(repo.resolve())
    first = doc["results"][0]
    assert first["rank"] == 1
    assert first["path"] == "src/net/retry.py"
    assert first["symbol"] in ("backoff", "RetryPolicy")
    assert 1 <= first["start_line"] <= first["end_line"] <= len(RETRY.splitlines())
    assert first["lexical_score"] > 0 and first["model_score"] is None
    assert set(first["matched_terms"]) == {"retry", "backoff"}
    paths = [row["path"] for row in doc["results"]]
    assert "src/colour.py" not in paths
    assert len(paths) == len(set(paths)), "one result per file by default"
    # the order is the learned ranker's: its scores fall, each result keeps its lexical score
    scores = [row["score"] for row in doc["results"]]
    assert scores == sorted(scores, reverse=True)
    assert all(row["lexical_score"] > 0 for row in doc["results"])


def test_without_paths_the_repository_holding_the_current_directory_is_searched(
        repo: Path) -> None:
    run = cli("-q", "backoff", "--fast", "--format", "json", cwd=repo / "src" / "net")

    assert run.json()["root"] == str(repo.resolve())
    assert run.paths()[0] == "src/net/retry.py"
    assert "tests/test_retry.py" in run.paths()


def test_root_chooses_another_repository_and_paths_stay_relative_to_it(repo: Path) -> None:
    run = cli("-q", "backoff", "--fast", "--format", "json", "--root", str(repo),
              cwd=repo.parent)

    assert run.json()["root"] == str(repo.resolve())
    assert run.paths()[0] == "src/net/retry.py"


def test_ten_results_unless_k_says_otherwise(tmp_path: Path) -> None:
    root = make_repo(tmp_path / "many", {f"pkg/m{i:02}.py": "widget = 1\n" for i in range(15)})

    default = cli("-q", "widget", "--fast", "--format", "json", cwd=root)
    three = cli("-q", "widget", "--fast", "--format", "json", "-k", "3", cwd=root)

    assert len(default.paths()) == 10
    assert three.paths() == ["pkg/m00.py", "pkg/m01.py", "pkg/m02.py"]


def test_chunks_lists_several_chunks_of_one_file(repo: Path) -> None:
    chunks = cli("-q", "retry", "--fast", "--format", "json", "--chunks",
                 cwd=repo).json()["results"]

    retry_chunks = [c for c in chunks if c["path"] == "src/net/retry.py"]
    assert len(retry_chunks) >= 2
    assert len({(c["start_line"], c["end_line"]) for c in retry_chunks}) == len(retry_chunks)


def test_the_slice_cache_lives_in_the_user_cache_folder_not_in_the_tree(
        repo: Path, isolated_home: Path) -> None:
    cache = isolated_home
    before = sorted(str(p) for p in repo.rglob("*"))

    run = cli("-q", "retry", "--fast", cwd=repo)

    assert run.returncode == 0, run.stderr
    assert sorted(str(p) for p in repo.rglob("*")) == before
    assert any(p.suffix == ".json" for p in (cache / "chunks").rglob("*"))


def test_text_output_is_a_header_line_then_one_location_per_line(repo: Path) -> None:
    run = cli("-q", "backoff", "--fast", "-k", "2", cwd=repo)

    lines = run.stdout.splitlines()
    assert run.returncode == 0 and len(lines) == 3
    assert lines[0] == ("# location  score  symbol  (score: learned ranker's estimate that "
                        "the file is the answer, 0-1, summing to 1 over the candidate files)")
    assert lines[1].startswith("src/net/retry.py:4-6 ")


# --- candidate scope: arguments, stdin ------------------------------------------------------


def test_an_explicit_file_argument_restricts_the_search(repo: Path) -> None:
    run = cli("-q", "retry", "--fast", "--format", "json", "src/net/client.py", cwd=repo)

    assert run.paths() == ["src/net/client.py"]


def test_directory_and_glob_arguments_restrict_the_search(
        repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The CLI hands arguments to run_search as given; relative ones are read from the cwd.
    monkeypatch.chdir(repo / "src")

    in_dir = search(repo, "retry", paths=["../tests"])
    globbed = search(repo, "retry", paths=["net/*.py"])
    mixed = search(repo, "retry", paths=["net/client.py", "../README.md"])

    assert result_paths(in_dir) == ["tests/test_retry.py"]
    assert sorted(result_paths(globbed)) == ["src/net/client.py", "src/net/retry.py"]
    assert sorted(result_paths(mixed)) == ["README.md", "src/net/client.py"]


def test_a_file_list_on_stdin_restricts_the_search(repo: Path) -> None:
    run = cli("-q", "retry", "--fast", "--format", "json", cwd=repo,
              stdin="src/net/client.py\nREADME.md\n")

    assert sorted(run.paths()) == ["README.md", "src/net/client.py"]


def test_path_colon_line_lines_on_stdin_are_reduced_to_the_path(repo: Path) -> None:
    grep_output = "src/net/client.py:5:    return RetryPolicy(3).retry(lambda: url)\n"

    run = cli("-q", "retry", "--fast", "--format", "json", cwd=repo, stdin=grep_output)

    assert run.paths() == ["src/net/client.py"]


def test_a_piped_name_that_does_not_exist_is_skipped_with_a_note(repo: Path) -> None:
    run = cli("-q", "retry", "--fast", "--format", "json", "-v", cwd=repo,
              stdin="gone.py\nsrc/net/client.py\n")

    assert run.paths() == ["src/net/client.py"]
    assert "gone.py" in run.stderr


def test_body_matches_are_found_when_stdin_is_an_empty_pipe(repo: Path) -> None:
    # Scripts and hooks run the CLI with a pipe on stdin; that must not change the search.
    # No file is named after "backoff": every result below comes from a body match.
    run = cli("-q", "backoff", "--fast", "--format", "json", cwd=repo, stdin="")

    assert run.paths()[0] == "src/net/retry.py"
    assert "tests/test_retry.py" in run.paths()


# --- the query from a file -----------------------------------------------------------------


def test_query_file_reads_a_long_query_from_a_file(repo: Path, tmp_path: Path) -> None:
    report = tmp_path / "issue.md"
    report.write_text("Client hangs\n\nTraceback (most recent call last):\n"
                      '  File "src/net/client.py", line 5, in fetch\n'
                      "TimeoutError: the backoff never ends\n")

    run = cli("--query-file", str(report), "--fast", "--format", "json", cwd=repo)

    assert run.paths()[0] == "src/net/client.py"
    assert run.json()["results"][0]["symbol"] == "fetch"


def test_query_file_dash_reads_the_query_from_stdin(repo: Path) -> None:
    run = cli("--query-file", "-", "--fast", "--format", "json", cwd=repo,
              stdin="where is the backoff computed?\n")

    assert run.paths()[0] == "src/net/retry.py"
    assert "tests/test_retry.py" in run.paths(), "body matches must be searched too"
    assert run.json()["query"].startswith("where is the backoff computed?")


def test_an_idle_open_stdin_pipe_does_not_hang_the_search(repo: Path) -> None:
    proc = subprocess.Popen([str(CLI), "-q", "backoff", "--fast", "--format", "json"],
                            cwd=repo, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        proc.wait(timeout=20)  # stdin stays open: never written to, never closed
        out, err = proc.stdout.read(), proc.stderr.read()  # type: ignore[union-attr]
    finally:
        proc.kill()
        proc.stdin.close()  # type: ignore[union-attr]
    assert proc.returncode == 0, err
    assert "open pipe that sent nothing" in err
    assert json.loads(out)["results"]


def test_fast_never_contacts_the_server(repo: Path) -> None:
    run = cli("-q", "retry backoff", "--fast", "--format", "json", "-e", "http://127.0.0.1:9",
              cwd=repo)
    doc = json.loads(run.stdout)
    assert run.returncode == 0 and doc["model"] is None and doc["degraded"] is None
