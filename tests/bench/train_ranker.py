#!/usr/bin/env python3
"""Train the learned ranker slm-rerank ships (``slm_rerank/lexical/ranker.json``), and
measure it against the fixed lexical order.

Training data (``../shared/bench/TRAINING.md``): the dev half of the benchmark cases
(``cases.split_of``) and the cases ``mine_training.py`` mined from the training
repositories' own histories whose repository is in the "train" split. Never a benchmark
repository's history. Measured once on what it never saw: the benchmark's held-out half
and the mined cases of the held-out repositories, by language.

    python tests/bench/train_ranker.py --cv            # choose on the training data only
    python tests/bench/train_ranker.py --write         # fit, measure held-out, ship

Each case is run through the lexical stage in process, once per query mode (title, whole
text), and its candidates' features are cached under ``--features`` (keyed by the feature
list and the case), so a second run only fits.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import random
import shutil
import subprocess
import sys
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from cases import split_of

from slm_rerank.calibration.learning import GROUP_SIZE, Group, extract, fit
from slm_rerank.calibration.measure import first_gold_rank, paired_interval
from slm_rerank.host import Host
from slm_rerank.lexical.features import FEATURES
from slm_rerank.lexical.history import FileHistory, read_history
from slm_rerank.lexical.ranker import RankerModel, load_model
from slm_rerank.pipeline import query_terms

REPO_ROOT = Path(__file__).resolve().parents[2]
SHARED = REPO_ROOT.parent / "shared" / "bench"
CACHE = Path.home() / ".cache" / "slm-rerank-bench"
MODES = ("title", "query")
#: the model's name: bump it when what it learns from or how changes
NAME = "lexical-ranker-3"


@dataclass
class Row:
    """One case in one query mode: its candidates (fixed order), features and gold."""

    case: str
    repo: str
    lang: str
    split: str
    mode: str
    date: str
    paths: list[str]
    values: list[tuple[float, ...]]
    gold: list[str]
    #: the query asks for tests or docs (``QueryTerms.asks_tests``/``asks_docs``): a search
    #: keeps the fixed order (lexical/ordering.py)
    asks_kind: bool = False

    def group(self) -> Group:
        gold = set(self.gold)
        size = GROUP_SIZE
        return Group(self.values[:size], [p in gold for p in self.paths[:size]])


def tree_of(trees: Path, case: dict) -> Path:
    return trees / f"{case['repo'].replace('/', '+')}@{case['base_commit'][:12]}"


def load_snippets(path: Path | None) -> dict[str, str] | None:
    """``mine_snippets.py``'s issue-shaped queries by case id (None: no such rows)."""
    if path is None:
        return None
    return {d["id"]: d["query"] for d in load(path)}


def load(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def capped(cases: list[dict], train: int, held: int) -> list[dict]:
    """At most ``train`` (``held``) cases per repository, spread evenly over its cases."""
    by_repo: dict[str, list[dict]] = defaultdict(list)
    for case in cases:
        by_repo[case["repo"]].append(case)
    out = []
    for repo in sorted(by_repo):
        items = by_repo[repo]
        cap = held if items[0].get("split") == "held-out" else train
        step = max(1.0, len(items) / cap) if cap else math.inf
        out += [items[int(i * step)] for i in range(min(cap, len(items)))]
    return out


def feature_key() -> str:
    return hashlib.sha256(json.dumps([list(FEATURES), "history-2", "first-line-4"]).encode()
                          ).hexdigest()[:12]


def clone_of(repo: str, mirrors: Path) -> Path | None:
    """A work tree-less clone of ``repo``'s mirror, for reading its history at a commit as
    a user's checkout at that commit would (``lexical/history.py``)."""
    name = repo.replace("/", "+")
    clone = CACHE / "clones" / name
    if not (clone / ".git").exists():
        mirror = mirrors / name / "repo"
        if not mirror.exists():
            return None
        clone.parent.mkdir(parents=True, exist_ok=True)
        # cloned aside and renamed into place: two --shard processes may reach the same
        # repository at once, and a half-made clone must never look finished
        part = clone.with_name(f"{name}.part{os.getpid()}")
        shutil.rmtree(part, ignore_errors=True)
        subprocess.run(["git", "clone", "-q", "--shared", "--no-checkout", str(mirror),
                        str(part)], check=True)
        try:
            part.rename(clone)
        except OSError:  # the other process was first: its clone is as good
            shutil.rmtree(part, ignore_errors=True)
    return clone


def history_at(case: dict, mirrors: Path) -> FileHistory | None:
    """The history a user with the case's base commit checked out has: the 300 commits up
    to it, never one after."""
    clone = clone_of(case["repo"], mirrors)
    if clone is None:
        return None
    notes: list[str] = []
    return read_history(clone, cache_dir=CACHE / "history-cache", notes=notes,
                        rev=case["base_commit"], deadline_s=60.0)


def rows_of(cases: list[dict], trees: Path, cache: Path, host: Host, kind: str,
            mirrors: Path, cached_only: bool = False,
            snippets: dict[str, str] | None = None) -> list[Row]:
    """Every case's rows (both modes), from the cache when it holds them. With
    ``snippets`` (``mine_snippets.py``'s queries by case id): only the ``snippet`` row of
    each case that has one, a row that is fitted on and never measured."""
    cache.mkdir(parents=True, exist_ok=True)
    modes = MODES if snippets is None else ("snippet",)
    if snippets is not None:
        cases = [c for c in cases if c["id"] in snippets]
    rows: list[Row] = []
    started = time.monotonic()
    for n, case in enumerate(cases, 1):
        tree = tree_of(trees, case)
        if not (tree / ".complete").exists():
            continue
        gold = [g for g in case["gold_files"] if (tree / g).is_file()]
        if not gold:
            continue
        lang = case.get("lang", "python")
        history: FileHistory | None | bool = False  # read on the first mode that needs it
        split = case.get("split") or split_of(case["id"])
        for mode in modes:
            text = (snippets[case["id"]] if snippets is not None else
                    case["title"] if mode == "title" else case["query"])
            name = hashlib.sha256(f"{feature_key()}|{case['id']}|{mode}".encode()).hexdigest()
            stored = cache / f"{name[:24]}.json"
            if stored.exists():
                data = json.loads(stored.read_text())
            elif cached_only:
                continue
            else:
                if history is False:
                    history = history_at(case, mirrors)
                found = extract(text, tree, host, CACHE / "chunk-cache", history or None)
                data = {"paths": found.paths, "values": [list(v) for v in found.values]}
                stored.write_text(json.dumps(data))
            asked = query_terms(text)
            rows.append(Row(case["id"], case["repo"], lang, split, mode, case.get("date", ""),
                            data["paths"], [tuple(v) for v in data["values"]], gold,
                            asked.asks_tests or asked.asks_docs))
        if n % 25 == 0:
            print(f"  {kind}: {n}/{len(cases)} cases, {time.monotonic() - started:.0f} s",
                  file=sys.stderr)
    return rows


# --- measuring ----------------------------------------------------------------------------


def order(row: Row, model: RankerModel | None) -> list[str]:
    if model is None or row.asks_kind:
        return row.paths
    scores = [model.score(v) for v in row.values]
    return [row.paths[i] for i in sorted(range(len(row.paths)), key=lambda i: (-scores[i], i))]


def metrics(ranked: list[str], gold: list[str]) -> dict[str, float]:
    first = first_gold_rank(ranked[:10], gold)
    return {"hit1": float(first == 1), "hit5": float(first is not None and first <= 5),
            "hit10": float(first is not None), "mrr10": 1.0 / first if first else 0.0}


def compare(rows: list[Row], model: RankerModel) -> dict[str, object]:
    """Fixed against learned over ``rows``: means, and a paired interval of the gains."""
    fixed = [metrics(order(r, None), r.gold) for r in rows]
    learned = [metrics(order(r, model), r.gold) for r in rows]
    out: dict[str, object] = {"cases": len(rows)}
    for key in ("hit1", "hit5", "hit10", "mrr10"):
        a = [m[key] for m in fixed]
        b = [m[key] for m in learned]
        diff = [y - x for x, y in zip(a, b, strict=True)]
        low, high = paired_interval(diff) if diff else (math.nan, math.nan)
        out[key] = (mean(a), mean(b), low, high)
    return out


def mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else math.nan


def table(title: str, buckets: dict[str, list[Row]], model: RankerModel) -> list[str]:
    lines = [f"**{title}**", "",
             "| slice | cases | Hit@1 fixed → learned | Hit@5 | Hit@10 | "
             "MRR@10 (95 % CI of gain) |",
             "| --- | ---: | --- | --- | --- | --- |"]
    for name, rows in buckets.items():
        if not rows:
            continue
        c = compare(rows, model)

        def pair(key: str, points: bool = True, c: dict[str, object] = c) -> str:
            a, b, low, high = c[key]  # type: ignore[misc]
            f = 100 if points else 1
            fmt = ".1f" if points else ".3f"
            text = f"{a * f:{fmt}} → {b * f:{fmt}}"
            return text + (f" ({low * f:+{fmt}}, {high * f:+{fmt}})" if key == "mrr10" else "")

        lines.append(f"| {name} | {c['cases']} | {pair('hit1')} | {pair('hit5')} | "
                     f"{pair('hit10')} | {pair('mrr10', False)} |")
    return lines + [""]


# --- choosing -----------------------------------------------------------------------------


def by_slice(held: list[Row], swe: list[dict]) -> dict[str, list[Row]]:
    """The held-out rows by language (the benchmark's apart) and mode, and all mined ones."""
    swe_repos = {c["repo"] for c in swe}
    out: dict[str, list[Row]] = defaultdict(list)
    for r in held:
        label = "benchmark" if r.repo in swe_repos else r.lang
        out[f"{label} {r.mode}"].append(r)
        if label != "benchmark":
            out[f"all mined {r.mode}"].append(r)
    return dict(sorted(out.items()))


def folds_by_repo(rows: list[Row], k: int) -> list[list[Row]]:
    repos = sorted({r.repo for r in rows})
    random.Random(7).shuffle(repos)
    fold_of = {repo: i % k for i, repo in enumerate(repos)}
    folds: list[list[Row]] = [[] for _ in range(k)]
    for r in rows:
        folds[fold_of[r.repo]].append(r)
    return folds


def scored_rows(rows: list[Row], k: int = 3) -> list[Row]:
    """The rows ``cv_scored`` measures, in the order of its results (fold by fold, no
    ``snippet`` row)."""
    return [r for fold in folds_by_repo(rows, k) for r in fold if r.mode != "snippet"]


def cv_scored(rows: list[Row], features: list[str], l2: float, k: int = 3,
              fit_on: Callable[[list[Row]], list[Row]] | None = None
              ) -> list[tuple[dict[str, float], dict[str, float]]]:
    """Each row's metrics, fixed and learned by a model that never saw its repository (the
    rows fold by fold, in the same order for any feature set: paired). ``fit_on`` picks
    which of the other folds' rows the model is fitted on (all of them by default)."""
    folds = folds_by_repo(rows, k)
    scored: list[tuple[dict[str, float], dict[str, float]]] = []
    for i, held in enumerate(folds):
        if not held:
            continue
        train = [r for j, f in enumerate(folds) if j != i for r in f]
        if fit_on is not None:
            train = fit_on(train)
        model = fit([r.group() for r in train], name="cv", features=features, l2=l2)
        scored += [(metrics(order(r, None), r.gold), metrics(order(r, model), r.gold))
                   for r in held if r.mode != "snippet"]
    return scored


def cross_validate(rows: list[Row], features: list[str], l2: float, k: int = 3
                   ) -> dict[str, float]:
    """Mean Hit@1 and MRR@10 of fixed and learned over folds held out by repository."""
    scored = cv_scored(rows, features, l2, k)
    return {f"{which}_{key}": mean([s[w][key] for s in scored])
            for w, which in ((0, "fixed"), (1, "learned")) for key in ("hit1", "mrr10")}


def fewer_cases(cap: int) -> Callable[[list[Row]], list[Row]]:
    """Training rows of at most ``cap`` mined cases per repository, spread over the cases
    the rows hold as ``capped`` spreads them (the benchmark's dev rows are all kept)."""
    def pick(rows: list[Row]) -> list[Row]:
        cases: dict[str, list[str]] = defaultdict(list)
        for r in rows:
            if r.split == "train" and r.case not in cases[r.repo]:
                cases[r.repo].append(r.case)
        kept = {c["id"] for c in capped([{"id": c, "repo": repo} for repo, ids in
                                         cases.items() for c in ids], cap, cap)}
        return [r for r in rows if r.split != "train" or r.case in kept]
    return pick


def cv_versus(rows: list[Row], features: list[str], baseline: list[str], l2: float,
              baseline_fit_on: Callable[[list[Row]], list[Row]] | None = None) -> str:
    """Cross-validated learned Hit@1 and MRR@10 of ``features`` against ``baseline``'s (or
    the same features fitted on ``baseline_fit_on``'s rows), row by row, with the 95 %
    paired bootstrap interval of the gain."""
    ours = cv_scored(rows, features, l2)
    theirs = cv_scored(rows, baseline, l2, fit_on=baseline_fit_on)
    return gain_text(ours, theirs)


def gain_text(ours: list[tuple[dict[str, float], dict[str, float]]],
              theirs: list[tuple[dict[str, float], dict[str, float]]]) -> str:
    """Learned Hit@1 and MRR@10 of ``theirs`` -> ``ours`` (``cv_scored`` of the same rows),
    with the 95 % paired bootstrap interval of the gain."""
    out = []
    for key in ("hit1", "mrr10"):
        diff = [a[1][key] - b[1][key] for a, b in zip(ours, theirs, strict=True)]
        low, high = paired_interval(diff)
        out.append(f"{key} {mean([b[1][key] for b in theirs]):.3f} -> "
                   f"{mean([a[1][key] for a in ours]):.3f} ({low:+.3f}, {high:+.3f})")
    return "; ".join(out)


def trained_on(train: list[Row], ranges: dict) -> dict[str, dict]:
    """Per mined training repository: the commit range its cases were mined from
    (``mine_training.py``'s ranges.json) and the fix commits whose cases it learned from."""
    mined = ranges.get("repositories", {})
    used: dict[str, set[str]] = defaultdict(set)
    for r in train:
        if r.split == "train":
            used[r.repo].add(r.case.rpartition("@")[2])
    return {repo: {"mined": {key: mined.get(repo, {}).get(key) for key in
                             ("head", "oldest_fix", "oldest_date", "newest_fix",
                              "newest_date", "commits_looked_at")},
                   "fixes_used": sorted(fixes)}
            for repo, fixes in sorted(used.items())}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--swe-cases", type=Path, default=SHARED / "swe-dev.jsonl")
    ap.add_argument("--mined-cases", type=Path, default=CACHE / "training" / "cases.jsonl")
    ap.add_argument("--ranges", type=Path, default=CACHE / "training" / "ranges.json")
    ap.add_argument("--trees", type=Path, default=CACHE / "trees")
    ap.add_argument("--mirrors", type=Path, default=REPO_ROOT.parent / ".mirror")
    ap.add_argument("--features", type=Path, default=CACHE / "features")
    ap.add_argument("--use", default=",".join(FEATURES),
                    help="features the model uses (comma-separated)")
    ap.add_argument("--without", default="",
                    help="features to leave out of --use (comma-separated): to compare sets")
    ap.add_argument("--versus", help="with --cv: also cross-validate the set without these "
                    "features (comma-separated) and compare row by row, at the chosen L2")
    ap.add_argument("--versus-cap", type=int, help="with --cv: also cross-validate the same "
                    "features fitted on at most this many mined cases per training "
                    "repository (does more history help?), scored on the same rows")
    ap.add_argument("--snippets", type=Path,
                    help="mine_snippets.py's output: the training repositories' cases with "
                         "their fix's added test lines become one more row each, fitted on "
                         "and never measured")
    ap.add_argument("--l2", type=float, default=0.01)
    ap.add_argument("--train-cap", type=int, default=12,
                    help="mined cases per training repository (spread over its history)")
    ap.add_argument("--held-out-cap", type=int, default=20,
                    help="mined cases per held-out repository (spread over its history)")
    ap.add_argument("--shard", help="I/N: only every N-th case from the I-th (to extract "
                    "features in parallel processes)")
    ap.add_argument("--cached-only", action="store_true",
                    help="use only the cases whose features are cached (a quick look)")
    ap.add_argument("--cv", action="store_true", help="cross-validate on the training rows")
    ap.add_argument("--held-out", action="store_true", help="measure on the held-out rows")
    ap.add_argument("--write", action="store_true", help="write the shipped model file")
    ap.add_argument("--measure", type=Path, help="only measure this model file on the held-out "
                    "rows (no fit)")
    ap.add_argument("--out", type=Path, default=REPO_ROOT / "slm_rerank" / "lexical" /
                    "ranker.json")
    ap.add_argument("--report", type=Path, help="write the markdown tables here")
    args = ap.parse_args(argv)

    left_out = {f.strip() for f in args.without.split(",") if f.strip()}
    features = [f.strip() for f in args.use.split(",") if f.strip() and f.strip() not in left_out]
    host = Host.from_environment(start=Path("/"))
    swe = load(args.swe_cases)
    mined = load(args.mined_cases) if args.mined_cases.exists() else []
    mined = capped(mined, args.train_cap, args.held_out_cap)
    if args.shard:
        index, count = (int(x) for x in args.shard.split("/"))
        swe = swe[index::count]
        mined = mined[index::count]
    rows = rows_of(swe, args.trees, args.features, host, "benchmark", args.mirrors,
                   args.cached_only)
    rows += rows_of(mined, args.trees, args.features, host, "mined", args.mirrors,
                    args.cached_only)
    snippets = load_snippets(args.snippets)
    if snippets is not None:
        rows += rows_of([c for c in mined if c.get("split") == "train"], args.trees,
                        args.features, host, "snippets", args.mirrors, args.cached_only,
                        snippets)
    train = [r for r in rows if r.split in ("dev", "train")]
    held = [r for r in rows if r.split == "held-out"]
    print(f"rows: {len(train)} training, {len(held)} held out", file=sys.stderr)
    lines: list[str] = []
    if args.cv:
        tried = {}
        for l2 in (0.01, 0.1):
            cv = cross_validate(train, features, l2)
            tried[l2] = cv["learned_mrr10"]
            print(f"cv l2={l2}: " + ", ".join(f"{k} {v:.3f}" for k, v in cv.items()),
                  flush=True)
            lines.append(f"- 3-fold cross-validation by repository over the training rows, "
                         f"L2 {l2}: " + ", ".join(f"{k} {v:.3f}" for k, v in cv.items()))
        args.l2 = max(tried, key=lambda k: tried[k])
        lines.append(f"- chosen: L2 {args.l2}")
        if args.versus:
            dropped = {f.strip() for f in args.versus.split(",")}
            versus = cv_versus(train, features, [f for f in features if f not in dropped],
                               args.l2)
            print(f"cv versus without {args.versus}: {versus}", flush=True)
            lines.append(f"- against the same without {args.versus}: {versus}")
        if args.versus_cap:
            versus = cv_versus(train, features, features, args.l2,
                               baseline_fit_on=fewer_cases(args.versus_cap))
            print(f"cv versus {args.versus_cap} cases a repository: {versus}", flush=True)
            lines.append(f"- against the same fitted on {args.versus_cap} cases a "
                         f"repository: {versus}")
        lines.append("")
    if args.measure:
        model = load_model(args.measure)
        lines += table(f"Held out, fixed lexical order → {model.name}", by_slice(held, swe),
                       model)
        print("\n".join(lines))
        if args.report:
            args.report.write_text("\n".join(lines) + "\n")
        return 0
    model = fit([r.group() for r in train], name=NAME, features=features, l2=args.l2)
    ranges = json.loads(args.ranges.read_text()) if args.ranges.exists() else {}
    model = RankerModel(model.name, model.features, model.mean, model.scale, model.weights,
                        model.bias, {
                            "recipe": "tests/bench/train_ranker.py: listwise softmax over each "
                                      f"case's candidate files, L2 {args.l2}, "
                                      "both query modes (title, whole text)" + (
                                          ", and mine_snippets.py's rows" if snippets
                                          else ""),
                            "trained_on": {
                                "benchmark dev half": "swe-dev.jsonl cases with split_of == "
                                                      "'dev' (their issue text, not history)",
                                "mined": trained_on(train, ranges),
                            },
                            "rows": len(train),
                            "version": 2,
                        })
    print("weights: " + ", ".join(f"{n} {w:+.2f}" for n, w in
                                  zip(model.features, model.weights, strict=True)))
    if args.held_out:
        lines += table("Held out, fixed lexical order → learned ranker", by_slice(held, swe),
                       model)
        print("\n".join(lines))
    if args.report:
        args.report.write_text("\n".join(lines) + "\n")
    if args.write:
        args.out.write_text(json.dumps(model.to_json(), indent=1) + "\n")
        print(f"wrote {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
