"""Line numbers agree with ripgrep and git: only "\\n" ends a line, whatever else a file holds."""

from __future__ import annotations

from pathlib import Path

import pytest
from search_fixtures import make_repo, search

from slm_rerank.lexical.chunking import chunk_text, line_starts, split_lines

#: characters str.splitlines() breaks at but ripgrep, git and ast do not
NOT_NEWLINES = ["\f", "\x0b", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029"]


@pytest.mark.parametrize("odd", NOT_NEWLINES)
def test_split_lines_breaks_at_newlines_only(odd: str) -> None:
    text = f"a{odd}b\nc\n"

    assert split_lines(text) == [f"a{odd}b", "c"]
    assert line_starts(text) == [0, 4, 6]


def test_crlf_lines_lose_their_carriage_return() -> None:
    assert split_lines("a\r\nb\r\n") == ["a", "b"]


@pytest.mark.parametrize("odd", NOT_NEWLINES)
def test_a_window_slice_never_runs_past_the_last_line(odd: str) -> None:
    text = "".join(f"line {i}{odd}more\n" for i in range(300))

    chunks = chunk_text("notes.txt", text.encode(), text)

    assert max(c.end_line for c in chunks) == 300


def test_a_python_file_with_form_feeds_is_cited_at_its_true_lines(tmp_path: Path) -> None:
    # Emacs page breaks (^L) between sections, as older Python and C sources have them.
    body = "".join(f"\f\ndef helper_{i}():\n    return {i}\n\n" for i in range(40))
    body += "CHECKSUM_SEED = 7\nCHECKSUM_ROUNDS = 3\n"
    repo = make_repo(tmp_path / "repo", {"mod.py": body})
    lines = body.split("\n")[:-1]

    cited = search(repo, "checksum seed rounds", chunks=True).results[0]

    assert cited.end_line == len(lines)  # the file's last line, not past it
    assert lines[cited.start_line - 1:cited.end_line][-2:] == [
        "CHECKSUM_SEED = 7", "CHECKSUM_ROUNDS = 3"]
