"""Training cases for the learned ranker, mined from the history of the repositories that
``../shared/bench/TRAINING.md`` allows (and never from a benchmark repository).

usage:
    .venv/bin/python tests/bench/mine_training.py --mirrors /work/.mirror \\
        --out ~/.cache/slm-rerank-bench/training/cases.jsonl

MIRRORS holds one git directory per repository, as the fetch verb lays them out:
MIRRORS/<owner>+<name>/repo. For each repository of ``REPOSITORIES`` the newest
``--commits`` commits of HEAD's first-parent line (the commits that landed on the default
branch: a squashed pull request, a direct push; the commits inside a merged branch are
not walked) are passed, newest first, through the project's own miner,
``slm_rerank.calibration.mining.commit_case``, with its rules as they are (a fix with a
subject that says something, one to three source files changed, at least one of them in
the parent). One more rule is this script's own: a subject that names only the files it
changes ("update viper.go": no word left after the changed files' path words and a few
filler words) is skipped as "names only the file", since its title query would hand the
answer over. The newest ``--train-cap`` cases of a training repository (``--held-out-cap``
of a held-out one) are kept.

Each case is one JSON line in the shape of ``swe-dev.jsonl``: ``id``
("OWNER/NAME@<fix commit[:12]>"), ``repo``, ``base_commit`` (the fix's parent: the tree
the query is asked in), ``title`` (the subject), ``query`` (the whole message, cut at the
miner's ``MAX_QUERY_CHARS``), ``gold_files``, ``gold_lines`` (each gold file's pre-fix
line ranges, from the hunks of ``git diff -U0``; an insertion is the line it follows),
plus ``lang``, ``commit`` (the fix), ``date`` (its commit time, ISO 8601) and ``split``
("train" or "held-out", by repository, from the fixed ``HELD_OUT`` list chosen before
any training). ``ranges.json`` beside the output records, per repository, the HEAD mined
from, the oldest and newest fix commit kept, the commits looked at, the rules' skip
counts, and the repositories dropped (no mirror, or ``--drop OWNER/NAME=REASON``, e.g. a
repository whose trees could not be laid out).

Lay out the trees afterwards with the benchmark's own materializer:

    nice -n 10 python3 ../shared/bench/materialize.py \\
        --cases ~/.cache/slm-rerank-bench/training/cases.jsonl \\
        --mirrors /work/.mirror --out ~/.cache/slm-rerank-bench/trees

Fetched code is for local training and measurement only: never commit it.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from slm_rerank.calibration.mining import Case, commit_case
from slm_rerank.git_runner import GitError, git_output

#: every repository TRAINING.md allows, with its language (JS/TS split by the repository's
#: own source language)
REPOSITORIES: tuple[tuple[str, str], ...] = (
    ("pallets/click", "python"), ("encode/httpx", "python"),
    ("encode/starlette", "python"), ("python-attrs/attrs", "python"),
    ("Textualize/rich", "python"), ("tiangolo/typer", "python"),
    ("sqlalchemy/alembic", "python"), ("jazzband/pip-tools", "python"),
    ("pytest-dev/pluggy", "python"), ("hynek/structlog", "python"),
    ("agronholm/anyio", "python"), ("python-poetry/poetry-core", "python"),
    ("spf13/viper", "go"), ("urfave/cli", "go"), ("go-chi/chi", "go"),
    ("gorilla/mux", "go"), ("labstack/echo", "go"), ("sirupsen/logrus", "go"),
    ("stretchr/testify", "go"),
    ("clap-rs/clap", "rust"), ("serde-rs/serde", "rust"), ("hyperium/hyper", "rust"),
    ("sharkdp/fd", "rust"), ("sharkdp/bat", "rust"), ("rust-lang/log", "rust"),
    ("dtolnay/anyhow", "rust"),
    ("koajs/koa", "javascript"), ("chalk/chalk", "javascript"),
    ("yargs/yargs", "javascript"), ("mochajs/mocha", "javascript"),
    ("colinhacks/zod", "typescript"), ("fastify/fastify", "javascript"),
    ("immerjs/immer", "typescript"),
    ("FasterXML/jackson-databind", "java"), ("apache/commons-lang", "java"),
    ("junit-team/junit4", "java"), ("square/okhttp", "java"), ("square/moshi", "java"),
    ("nlohmann/json", "c-cpp"), ("gabime/spdlog", "c-cpp"), ("catchorg/Catch2", "c-cpp"),
    ("jqlang/jq", "c-cpp"), ("libuv/libuv", "c-cpp"),
)

#: held out of training by repository, two a language; fixed before any training
HELD_OUT = frozenset({
    "encode/httpx", "hynek/structlog", "labstack/echo", "spf13/viper", "sharkdp/bat",
    "rust-lang/log", "yargs/yargs", "koajs/koa", "colinhacks/zod", "immerjs/immer",
    "square/moshi", "apache/commons-lang", "gabime/spdlog", "jqlang/jq",
})

#: the benchmark's repositories: their later history holds the fixes of benchmark issues
BENCHMARK = frozenset({
    "sqlfluff/sqlfluff", "marshmallow-code/marshmallow", "pvlib/pvlib-python",
    "pylint-dev/astroid", "pydicom/pydicom", "psf/requests", "sympy/sympy",
    "astropy/astropy", "pydata/xarray", "pytest-dev/pytest", "sphinx-doc/sphinx",
    "pylint-dev/pylint", "mwaskom/seaborn", "pallets/flask",
})
assert not BENCHMARK & {repo for repo, _ in REPOSITORIES}
assert HELD_OUT <= {repo for repo, _ in REPOSITORIES}

#: words a subject may hold besides the changed files' names and still name nothing else
FILLER = frozenset({
    "fix", "fixed", "fixes", "fixing", "update", "updated", "updates", "change", "changed",
    "changes", "refactor", "refactored", "cleanup", "clean", "tweak", "tweaks", "improve",
    "improved", "minor", "small", "edit", "edits", "modify", "modified", "chore", "feat",
    "feature", "perf", "style", "docs", "doc", "the", "an", "in", "of", "to", "for", "on",
    "and", "file", "files", "source", "code",
})
_WORD = re.compile(r"[^\W_]{2,}")
_HUNK = re.compile(rb"^@@ -(\d+)(?:,(\d+))? ")
NAMES_ONLY_FILE = "names only the file"


@dataclass
class Mined:
    """One repository's cases and what was skipped on the way."""

    repo: str
    lang: str
    split: str
    head: str = ""
    looked_at: int = 0
    skipped: Counter[str] = field(default_factory=Counter)
    cases: list[dict[str, Any]] = field(default_factory=list)


def names_only_files(subject: str, gold: tuple[str, ...]) -> bool:
    """Whether a subject says nothing but the names of the files it changes."""
    path_words = {word for path in gold for word in _WORD.findall(path.lower())}
    left = [word for word in _WORD.findall(subject.lower())
            if word not in path_words and word not in FILLER]
    return not left


def gold_lines(git_dir: Path, parent: str, commit: str, path: str) -> list[list[int]]:
    """The pre-fix line ranges of ``path`` that ``commit`` changes (an insertion: the line
    it follows, or line 1)."""
    raw = git_output(git_dir, ["diff", "-U0", "--no-renames", "--no-color", parent, commit,
                               "--", f":(literal){path}"])
    ranges: list[list[int]] = []
    for line in raw.split(b"\n"):
        match = _HUNK.match(line)
        if not match:
            continue
        start, count = int(match.group(1)), int(match.group(2) or b"1")
        if count == 0:
            ranges.append([max(start, 1), max(start, 1)])
        else:
            ranges.append([start, start + count - 1])
    return ranges


def mine_repository(git_dir: Path, repo: str, lang: str, commits: int, cap: int,
                    first_parent: bool) -> Mined:
    """The newest ``cap`` cases among the newest ``commits`` commits of HEAD."""
    mined = Mined(repo=repo, lang=lang, split="held-out" if repo in HELD_OUT else "train")
    mined.head = git_output(git_dir, ["rev-parse", "--verify", "HEAD^{commit}"]
                            ).decode().strip()
    # --encoding: a repository's i18n.logOutputEncoding would re-encode the NULs too
    raw = git_output(git_dir, ["log", *(["--first-parent"] if first_parent else []),
                               f"-n{commits}", "-z", "--encoding=UTF-8",
                               "--format=%H%x1f%P%x1f%cI%x1f%B", mined.head, "--"])
    for record in raw.split(b"\0"):
        if not record.strip():
            continue
        if len(mined.cases) >= cap:
            break
        commit, parents, date, message = record.decode("utf-8", "replace").split("\x1f", 3)
        commit = commit.strip()
        mined.looked_at += 1
        made = commit_case(git_dir, commit, parents.split(), message, with_body=True)
        if isinstance(made, str):
            mined.skipped[made] += 1
            continue
        subject = message.strip().split("\n", 1)[0].strip()
        if names_only_files(subject, made.gold_files):
            mined.skipped[NAMES_ONLY_FILE] += 1
            continue
        mined.cases.append(case_json(git_dir, repo, lang, mined.split, commit, date,
                                     subject, made))
    return mined


def case_json(git_dir: Path, repo: str, lang: str, split: str, commit: str, date: str,
              subject: str, made: Case) -> dict[str, Any]:
    """One case in the shape of ``swe-dev.jsonl``, with its language, fix, date and split."""
    assert made.tree is not None
    return {
        "id": f"{repo}@{commit[:12]}",
        "repo": repo,
        "base_commit": made.tree,
        "title": subject,
        "query": made.query,
        "gold_files": list(made.gold_files),
        "gold_lines": {path: gold_lines(git_dir, made.tree, commit, path)
                       for path in made.gold_files},
        "lang": lang,
        "commit": commit,
        "date": date.strip(),
        "split": split,
    }


def repo_range(mined: Mined) -> dict[str, Any]:
    """What ``ranges.json`` records of one repository."""
    newest = mined.cases[0] if mined.cases else None
    oldest = mined.cases[-1] if mined.cases else None
    return {
        "lang": mined.lang,
        "split": mined.split,
        "head": mined.head,
        "commits_looked_at": mined.looked_at,
        "cases": len(mined.cases),
        "newest_fix": newest["commit"] if newest else None,
        "newest_date": newest["date"] if newest else None,
        "oldest_fix": oldest["commit"] if oldest else None,
        "oldest_date": oldest["date"] if oldest else None,
        "skipped": dict(sorted(mined.skipped.items())),
    }


def parse_drops(values: list[str]) -> dict[str, str]:
    drops: dict[str, str] = {}
    for value in values:
        repo, sep, reason = value.partition("=")
        if not sep or repo not in {name for name, _ in REPOSITORIES}:
            raise SystemExit(f"--drop {value!r}: expected OWNER/NAME=REASON with a "
                             "repository of REPOSITORIES")
        drops[repo] = reason.strip() or "dropped"
    return drops


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mirrors", required=True, type=Path,
                        help="folder of <owner>+<name>/repo git directories")
    parser.add_argument("--out", required=True, type=Path,
                        help="cases file to write (ranges.json lands beside it)")
    parser.add_argument("--commits", type=int, default=1500,
                        help="newest commits of HEAD to look at, a repository (1500)")
    parser.add_argument("--train-cap", type=int, default=40,
                        help="most cases a training repository gives (40)")
    parser.add_argument("--held-out-cap", type=int, default=50,
                        help="most cases a held-out repository gives (50)")
    parser.add_argument("--all-parents", action="store_true",
                        help="walk every commit reachable from HEAD, not only the "
                             "first-parent line (a merged branch's own commits too)")
    parser.add_argument("--repo", action="append", default=[],
                        help="only this OWNER/NAME (repeatable)")
    parser.add_argument("--drop", action="append", default=[], metavar="OWNER/NAME=REASON",
                        help="leave a repository out and record why (repeatable)")
    args = parser.parse_args(argv)
    drops = parse_drops(args.drop)
    unknown = set(args.repo) - {name for name, _ in REPOSITORIES}
    if unknown:
        raise SystemExit(f"--repo {sorted(unknown)}: not a TRAINING.md repository")

    started = time.monotonic()
    mined_all: list[Mined] = []
    for repo, lang in REPOSITORIES:
        if args.repo and repo not in args.repo:
            continue
        if repo in drops:
            print(f"{repo}: dropped ({drops[repo]})", file=sys.stderr)
            continue
        git_dir = args.mirrors / repo.replace("/", "+") / "repo"
        if not git_dir.is_dir():
            drops[repo] = f"no mirror at {git_dir}"
            print(f"{repo}: dropped ({drops[repo]})", file=sys.stderr)
            continue
        cap = args.held_out_cap if repo in HELD_OUT else args.train_cap
        try:
            mined = mine_repository(git_dir, repo, lang, args.commits, cap,
                                    first_parent=not args.all_parents)
        except GitError as exc:
            drops[repo] = f"git failed: {exc}"
            print(f"{repo}: dropped ({drops[repo]})", file=sys.stderr)
            continue
        mined_all.append(mined)
        print(f"{repo} ({lang}, {mined.split}): {len(mined.cases)} cases from "
              f"{mined.looked_at} commits", file=sys.stderr)

    out = args.out.expanduser()
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")
    with tmp.open("w", encoding="utf-8") as sink:
        for mined in mined_all:
            for case in mined.cases:
                sink.write(json.dumps(case, ensure_ascii=False) + "\n")
    os.replace(tmp, out)
    ranges = {
        "generated": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "recipe": {"commits": args.commits, "first_parent": not args.all_parents,
                   "train_cap": args.train_cap, "held_out_cap": args.held_out_cap,
                   "query": "whole commit message", "title": "commit subject",
                   "miner": "slm_rerank.calibration.mining.commit_case",
                   "extra_rule": NAMES_ONLY_FILE},
        "repositories": {mined.repo: repo_range(mined) for mined in mined_all},
        "dropped": dict(sorted(drops.items())),
    }
    (out.parent / "ranges.json").write_text(json.dumps(ranges, indent=2) + "\n")

    counts = Counter((mined.lang, mined.split) for mined in mined_all
                     for _ in mined.cases)
    for (lang, split), n in sorted(counts.items()):
        print(f"{lang:<11} {split:<9} {n:>5}", file=sys.stderr)
    print(f"{sum(counts.values())} cases in {out} ({time.monotonic() - started:.0f} s)",
          file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
