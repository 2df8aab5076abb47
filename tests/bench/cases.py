"""Benchmark cases (one JSON object a line) and the per-case, per-system results."""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import metrics

MODES = ("title", "query")


@dataclass(frozen=True)
class Case:
    id: str
    repo: str
    base_commit: str
    title: str
    query: str
    gold_files: tuple[str, ...]
    gold_lines: dict[str, list[list[int]]]
    set: str = ""
    lang: str = ""  # the case's language, when the cases file says (mined cases do)
    split: str = ""  # the case's own split ("train" / "held-out" by repository), if any

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> Case:
        split = obj.get("split", "")
        if split and split not in CASE_SPLITS:
            raise ValueError(
                f"case {obj.get('id')!r}: split {split!r} is not one of {', '.join(CASE_SPLITS)}"
            )
        return cls(
            id=obj["id"],
            repo=obj["repo"],
            base_commit=obj["base_commit"],
            title=obj["title"],
            query=obj["query"],
            gold_files=tuple(obj["gold_files"]),
            gold_lines={
                path: [list(r) for r in ranges] for path, ranges in obj["gold_lines"].items()
            },
            set=obj.get("set", ""),
            lang=obj.get("lang", ""),
            split=split,
        )

    def text(self, mode: str) -> str:
        """The query text of a mode: `title` is the issue's first line, `query` the whole issue."""
        if mode == "title":
            return self.title
        if mode == "query":
            return self.query
        raise ValueError(f"unknown mode {mode!r}; expected one of {MODES}")

    def tree(self, trees: Path) -> Path:
        """Where the materializer lays this case's tree: <owner>+<name>@<commit[:12]>."""
        return trees / f"{self.repo.replace('/', '+')}@{self.base_commit[:12]}"


def load_cases(path: Path) -> list[Case]:
    cases = []
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        if not line.strip():
            continue
        try:
            cases.append(Case.from_json(json.loads(line)))
        except (ValueError, KeyError) as exc:
            raise SystemExit(f"{path}:{number}: {exc}") from None
    return cases


def tree_ready(tree: Path) -> bool:
    """A tree is usable once the materializer has written its completion marker."""
    return (tree / ".complete").is_file()


@dataclass
class Ranking:
    """What one system returned for one query."""

    paths: list[str]  # ranked files, best first, no duplicates
    seconds: float  # the latency measured for this system
    # For systems that cite lines: (path, start_line, end_line) in result order.
    citations: list[tuple[str, int, int]] | None = None
    error: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass
class CaseResult:
    """One case, one query mode, one system: the ranking and its scores."""

    case_id: str
    repo: str
    mode: str
    system: str
    paths: list[str]
    citations: list[tuple[str, int, int]] | None
    gold_rank: int | None  # 1-based rank of the first gold file, None if not in the list
    hit1: bool
    hit5: bool
    hit10: bool
    rr10: float
    line_hit5: bool | None  # None for systems that only rank files
    latency_ms: float
    error: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    lang: str = ""


def score(case: Case, mode: str, system: str, ranking: Ranking) -> CaseResult:
    gold = case.gold_files
    paths = ranking.paths[:10]
    line_hit5 = None
    if ranking.citations is not None:
        line_hit5 = metrics.line_hit(ranking.citations, case.gold_lines, k=5)
    return CaseResult(
        case_id=case.id,
        repo=case.repo,
        mode=mode,
        system=system,
        paths=paths,
        citations=ranking.citations,
        gold_rank=metrics.first_gold_rank(paths, gold),
        hit1=metrics.hit_at(paths, gold, 1),
        hit5=metrics.hit_at(paths, gold, 5),
        hit10=metrics.hit_at(paths, gold, 10),
        rr10=metrics.reciprocal_rank(paths, gold, 10),
        line_hit5=line_hit5,
        latency_ms=ranking.seconds * 1000.0,
        error=ranking.error,
        extra=ranking.extra,
        lang=case.lang,
    )


#: Where the cases are (beside the checkout) and where materialize.py lays out their trees.
DEFAULT_CASES = Path(__file__).resolve().parents[3] / "shared" / "bench" / "swe-dev.jsonl"
DEFAULT_TREES = Path.home() / ".cache" / "slm-rerank-bench" / "trees"


def add_case_options(ap: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """The ``--cases`` and ``--trees`` options every benchmark script takes."""
    ap.add_argument("--cases", type=Path, default=DEFAULT_CASES, help="cases JSONL")
    ap.add_argument("--trees", type=Path, default=DEFAULT_TREES, help="materialized trees")
    return ap


#: ``--split`` choices. ``dev`` and ``held-out`` are the hash halves of the benchmark
#: cases; a cases file may name each case's split itself (``train`` / ``held-out``, chosen
#: by repository for mined cases), and then that split is the one used.
SPLITS = ("dev", "train", "held-out", "all")
#: What a case's own ``split`` key may say.
CASE_SPLITS = ("dev", "train", "held-out")


def split_of(case_id: str) -> str:
    """``dev`` (where a weight or a prompt may be chosen) or ``held-out`` (where it is then
    reported): fixed by a hash of the case id, so no choice of ours decides it."""
    import hashlib

    return "dev" if hashlib.sha256(case_id.encode()).digest()[0] % 2 == 0 else "held-out"


def case_split(case: Case) -> str:
    """The case's own ``split`` when its file gives one, else the hash split of its id."""
    return case.split or split_of(case.id)


def in_split(case: Case, split: str) -> bool:
    """Whether ``case`` belongs to ``split`` (``all`` takes every case)."""
    return split == "all" or case_split(case) == split


def spread_sample(cases: Path, trees: Path, n: int, split: str = "all") -> list[Case]:
    """``n`` cases whose trees are materialized (of ``split``), spread evenly over the
    file's order.

    Exits with a message when no tree is materialized: there is nothing to measure.
    """
    ready = [c for c in load_cases(cases) if tree_ready(c.tree(trees)) and in_split(c, split)]
    if not ready:
        raise SystemExit(f"no materialized trees under {trees}; see ../shared/bench/README.md")
    step = max(1, len(ready) // n)
    return ready[::step][:n]


def file_order(order: list[Any], k: int = 10) -> list[str]:
    """The first ``k`` distinct files of a fused order (``pipeline.fuse``), best first."""
    from slm_rerank.pipeline import select

    return [f.item.path for f in select(order, k, chunks=False)]

