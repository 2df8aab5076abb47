"""Cases from a repository's own history: each commit that fixed something says in its
message what was wrong, and in its diff where.

The rules a commit must pass (``RULES``, printed by ``calibrate --help`` and in the user
guide), in the order they are checked:

1. it has exactly one parent (a merge repeats its branch's commits; a root commit has no
   tree before it to search in);
2. its subject says something: not a revert, a merge written by hand, a version bump or
   release, a dependency update, a formatting, lint or type-checker run or a typo fix, and
   at least ``MIN_WORDS`` words (after a ``fix:``-style prefix);
3. its diff touches one to ``MAX_GOLD`` source files, by the lexical stage's own file
   kinds (``lexical/filetypes.path_kind``): tests, docs, changelogs, lock files, vendored
   and other files do not count, and do not count against it;
4. at least one of those source files exists in its parent (a commit that only adds files
   names no place the searcher could have found).

The query is the subject (``with_body``: the whole message); the gold files are the
source files of rule 4.
"""

from __future__ import annotations

import os
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from slm_rerank.git_runner import GitError, git_output
from slm_rerank.lexical.filetypes import LOCK_FILES, path_kind

#: most source files a case's commit may change: more, and the subject names no one place
MAX_GOLD = 3
#: fewest words a subject needs (after a "fix:"-style prefix) to say something
MIN_WORDS = 3
#: longest message kept as a query (a long body is cut, not refused)
MAX_QUERY_CHARS = 4000

_PREFIX = re.compile(r"^\s*(?:\[[^\]]*\]\s*)?(?:[\w-]+(?:\([^)]*\))?!?:\s*)?")
_REVERT = re.compile(r"^\s*(?:revert|reapply|reland)\b", re.IGNORECASE)
_MERGE = re.compile(r"^\s*merge\b", re.IGNORECASE)
_RELEASE = re.compile(
    r"\b(?:bump(?:ed|s|ing)?\b.*\bversion|version bump|bump to v?\d|release v?\d|"
    r"(?:prepare|preparing|cut|tag)\s+(?:for\s+)?(?:the\s+)?(?:release|v?\d+\.\d+)|"
    r"back to development|post-release|^\s*v?\d+(?:\.\d+)+\S*\s*$|"
    r"(?:^|\s)(?:version|release)\s+v?\d+(?:\.\d+)+)", re.IGNORECASE)
_FORMATTING = re.compile(
    r"\b(?:reformat\w*|formatting|black|isort|prettier|clang-format|gofmt|ruff|"
    r"flake8|pylint|mypy|pyright|pre-commit|lint(?:ing|er)?|whitespace|trailing spaces|"
    r"code style|pep ?8)\b", re.IGNORECASE)
_DEPENDENCIES = re.compile(
    r"\b(?:update|bump|upgrade|pin|unpin)\w*\b.*\b(?:dependenc\w*|deps|requirements)\b"
    # "bump X from A to B", also after a conventional prefix ("feat: bump X from 3 to 5")
    r"|^\s*(?:[\w-]+(?:\([^)]*\))?!?:\s*)?(?:bump|update|upgrade) \S+ from \S+ to \S+"
    # a conventional commit scoped to dependencies ("chore(deps): Update Rust Stable to v1.89")
    r"|^\s*[\w-]+\((?:deps|deps-dev|dependencies)\)!?:"
    # a dependency bot's whole subject ("Update plugin com.diffplug.spotless to v8.8.0 (#9520)",
    # "Update kotlinpoet to v1.17.0", "Update graalvm to v1 (major)"): nothing after the version
    r"|^\s*update (?:plugin |dependency |module )?\S+(?: \S+)? to v?\d[\w.+-]*"
    r"(?:\s*\(major\))?\s*(?:\(#\d+\))?\s*$", re.IGNORECASE)
_TYPO = re.compile(r"\btypos?\b|\bspelling\b", re.IGNORECASE)

#: each rule's name (the reason a skipped commit is counted under) and what it means
RULES: tuple[tuple[str, str], ...] = (
    ("merge", "a merge commit (more than one parent)"),
    ("root", "the first commit (no parent tree to search)"),
    ("revert", "a revert (Revert/Reapply/Reland ...)"),
    ("merge subject", "a subject that starts with 'Merge'"),
    ("release", "a version bump or release"),
    ("dependencies", "a dependency update (update/bump/pin ... dependencies, requirements; "
                     "bump X from A to B; a (deps) scope; a bot's 'Update X to vN')"),
    ("formatting", "formatting, lint, type-checker or whitespace fixes (black, ruff, "
                   "mypy, pre-commit, ...)"),
    ("typo", "a typo or spelling fix"),
    ("short subject", f"a subject of fewer than {MIN_WORDS} words"),
    ("no source file", "its diff changes no source file (only tests, docs, config, ...)"),
    ("too many files", f"its diff changes more than {MAX_GOLD} source files"),
    ("only new files", "every source file it changes is new (absent from its parent)"),
)


@dataclass(frozen=True)
class Case:
    """One query with the files that answer it, and the tree it is asked in."""

    id: str
    query: str
    #: repository-relative POSIX paths (undecodable bytes as surrogate escapes)
    gold_files: tuple[str, ...]
    #: the commit whose tree is searched (a fix's parent); None: the tree as it is now
    tree: str | None = None
    #: optional gold line ranges, path -> [(start, end), ...] (``bench --cases``)
    gold_lines: dict[str, list[tuple[int, int]]] = field(default_factory=dict)


@dataclass
class Mined:
    """The cases of a history, and how many commits each rule skipped."""

    cases: list[Case]
    looked_at: int = 0
    skipped: Counter[str] = field(default_factory=Counter)


def subject_rule(subject: str) -> str | None:
    """The rule a commit's subject breaks (a ``RULES`` name), or None when it says
    something worth searching for."""
    if _REVERT.search(subject):
        return "revert"
    if _MERGE.search(subject):
        return "merge subject"
    if _RELEASE.search(subject):
        return "release"
    if _DEPENDENCIES.search(subject):
        return "dependencies"
    if _FORMATTING.search(subject):
        return "formatting"
    if _TYPO.search(subject):
        return "typo"
    words = re.findall(r"[^\W_]{2,}", _PREFIX.sub("", subject, count=1))
    if len(words) < MIN_WORDS:
        return "short subject"
    return None


def is_gold_kind(path: str) -> bool:
    """Whether a changed file can be a case's answer: program source, not a lock file."""
    return path_kind(path) == "source" and path.rsplit("/", 1)[-1].lower() not in LOCK_FILES


def changed_files(repo: Path, parent: str, commit: str) -> list[tuple[str, str]]:
    """(status letter, path) of each file ``commit`` changes against ``parent``."""
    raw = git_output(repo, ["diff-tree", "-r", "-z", "--no-renames", "--name-status",
                            "--no-commit-id", parent, commit])
    fields = raw.split(b"\0")
    return [(os.fsdecode(fields[i])[:1], os.fsdecode(fields[i + 1]))
            for i in range(0, len(fields) - 1, 2)]


def commit_case(repo: Path, commit: str, parents: list[str], message: str,
                with_body: bool) -> Case | str:
    """The case a commit makes, or the name of the rule it breaks."""
    if len(parents) > 1:
        return "merge"
    if not parents:
        return "root"
    subject = message.strip().split("\n", 1)[0].strip()
    broken = subject_rule(subject)
    if broken:
        return broken
    source = [(status, path) for status, path in changed_files(repo, parents[0], commit)
              if is_gold_kind(path)]
    if not source:
        return "no source file"
    if len(source) > MAX_GOLD:
        return "too many files"
    # M: changed in place; D: removed by the fix (the parent still has it). --no-renames
    # makes a rename a D of the old path, which the parent holds, and an A of the new one.
    gold = tuple(sorted(path for status, path in source if status in "MDT"))
    if not gold:
        return "only new files"
    query = (message.strip() if with_body else subject)[:MAX_QUERY_CHARS]
    return Case(id=commit[:12], query=query, gold_files=gold, tree=parents[0])


def mine(repo: Path, commits: int, with_body: bool = False, rev: str = "HEAD",
         advance: Callable[[int, int, int], None] | None = None) -> Mined:
    """Cases from the newest ``commits`` commits reachable from ``rev``, newest first;
    ``advance`` is called after each commit with (commits looked at, commits in all, cases)."""
    # --encoding: a repository's i18n.logOutputEncoding (UTF-16) would re-encode the whole
    # record, NUL bytes and all, and no record would split
    raw = git_output(repo, ["log", f"-n{commits}", "-z", "--encoding=UTF-8",
                            "--format=%H%x1f%P%x1f%B", rev, "--"])
    mined = Mined(cases=[])
    records = [record for record in raw.split(b"\0") if record.strip()]
    for record in records:
        commit, parents, body = record.decode("utf-8", "replace").split("\x1f", 2)
        mined.looked_at += 1
        made = commit_case(repo, commit.strip(), parents.split(), body, with_body)
        if isinstance(made, str):
            mined.skipped[made] += 1
        else:
            mined.cases.append(made)
        if advance is not None:
            advance(mined.looked_at, len(records), len(mined.cases))
    return mined


def history_root(path: Path) -> Path:
    """The top of the git work tree holding ``path``, once it is known to have a full history.

    A folder outside git, a repository without a commit, and a shallow clone (its oldest
    commits have no parent to search in) are each a clear error saying what to do.
    """
    try:
        top = git_output(path, ["rev-parse", "--show-toplevel"], timeout=10.0)
    except GitError as exc:
        if "not a git repository" not in str(exc):  # git's words (LC_ALL=C) outside one
            raise  # a repository git cannot read (a bad config line, a timeout): git's error
        raise GitError(f"{path} is not inside a git repository; calibrate mines cases from "
                       "a repository's history (run it in a git clone)") from None
    root = Path(os.fsdecode(top.rstrip(b"\n")))
    try:
        git_output(root, ["rev-parse", "--verify", "--quiet", "HEAD^{commit}"], timeout=10.0)
    except GitError:
        raise GitError(f"{root} has no commits yet: there is no history to mine cases "
                       "from") from None
    shallow = git_output(root, ["rev-parse", "--is-shallow-repository"], timeout=10.0)
    if shallow.strip() == b"true":
        raise GitError(f"{root} is a shallow clone: its oldest commits lack the parent "
                       "tree each case is searched in; run 'git fetch --unshallow' (or "
                       "clone without --depth) first")
    return root
