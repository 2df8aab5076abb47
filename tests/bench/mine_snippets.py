"""Issue-shaped queries for the mined training cases: each fix's message followed by the
lines its commit added to test files.

A pasted issue is prose plus code: the reproducer a user ran, the traceback it printed.
A commit message is prose only, so a ranker trained on commits learns little about the
code half of an issue. Most fixes also add a test, and that test is usually the
reproducer (the call that misbehaved, the value it should give). This script writes, for
each case of ``mine_training.py``'s output whose fix adds lines to a test file, that case's
message followed by those lines (at most ``MAX_LINES`` non-blank lines, ``MAX_CHARS``
characters in all), as one JSON line ``{"id", "query"}``:

    .venv/bin/python tests/bench/mine_snippets.py --mirrors /work/.mirror \\
        --cases ~/.cache/slm-rerank-bench/training/cases.jsonl \\
        --out ~/.cache/slm-rerank-bench/training/snippets.jsonl

The added lines come from the fix commit itself, which TRAINING.md allows (a training
repository's history); a case is asked in the fix's parent tree, where those lines do not
exist yet, so the query cannot be matched back to its own text. ``train_ranker.py
--snippets`` uses the file as a third query mode of the training rows only: no snippet is
ever a measured query.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from slm_rerank.calibration.mining import changed_files
from slm_rerank.git_runner import GitError, git_output
from slm_rerank.lexical.filetypes import path_kind

#: at most this many non-blank added lines, and characters of them, follow the message
MAX_LINES = 30
MAX_CHARS = 1500


def test_files(git_dir: Path, parent: str, commit: str) -> list[str]:
    """The test files ``commit`` adds to or changes, in path order (the miner's own
    reading of what a commit changes)."""
    return sorted(path for status, path in changed_files(git_dir, parent, commit)
                  if status in ("A", "M") and path_kind(path) == "test")


def added_lines(git_dir: Path, parent: str, commit: str, paths: list[str]) -> list[str]:
    """The non-blank lines ``commit`` adds to ``paths``, in diff order, capped."""
    if not paths:
        return []
    raw = git_output(git_dir, ["diff", "-U0", "--no-renames", "--no-color", "--no-ext-diff",
                               "--no-textconv", parent, commit, "--",
                               *(f":(literal){p}" for p in paths)])
    kept: list[str] = []
    size = 0
    for line in raw.decode("utf-8", "replace").split("\n"):
        if not line.startswith("+") or line.startswith("+++"):
            continue
        text = line[1:].rstrip()
        if not text.strip():
            continue
        if len(kept) >= MAX_LINES or size + len(text) + 1 > MAX_CHARS:
            break
        kept.append(text)
        size += len(text) + 1
    return kept


def snippet_query(case: dict, lines: list[str]) -> str:
    """The case's whole message, a blank line, then the added test lines."""
    return case["query"].rstrip() + "\n\n" + "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mirrors", type=Path, required=True)
    ap.add_argument("--cases", type=Path, required=True)
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args(argv)
    cases = [json.loads(line) for line in args.cases.read_text().splitlines() if line.strip()]
    written = without = 0
    with args.out.open("w") as out:
        for case in cases:
            git_dir = args.mirrors / case["repo"].replace("/", "+") / "repo"
            try:
                lines = added_lines(git_dir, case["base_commit"], case["commit"],
                                    test_files(git_dir, case["base_commit"], case["commit"]))
            except GitError as exc:
                print(f"{case['id']}: {exc}", file=sys.stderr)
                lines = []
            if not lines:
                without += 1
                continue
            out.write(json.dumps({"id": case["id"], "query": snippet_query(case, lines)}) + "\n")
            written += 1
    print(f"{written} cases with added test lines, {without} without", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
