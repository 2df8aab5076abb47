#!/usr/bin/env python3
"""Would evidence the lexical stage does not gather tell sibling source files apart?

Three candidate features, computed here from each candidate file's text (the cached rows
of ``train_ranker.py`` hold the candidates and their other features), then
cross-validated by repository over the training rows against the same features without
them, row by row (``train_ranker.cv_versus``). The held-out rows are never scored here.

- ``phrase``: how many of the query's word pairs (two words side by side, at least one
  of them not a stop word) the file holds side by side, as a share of the candidate best
  at it;
- ``run``: the longest run of such pairs side by side in the file (a copied sentence, an
  error message), as a share of the best;
- ``lines``: lines of the query (12 characters or more once stripped) that are lines of
  the file: a traceback's source lines, a copied snippet.

    python tests/bench/ranker_phrase_cv.py --train-cap 40 --without digit_name
"""

from __future__ import annotations

import argparse
import hashlib
import json
import multiprocessing
import re
import sys
import time
from pathlib import Path

import train_ranker as tr

from slm_rerank.calibration.learning import GROUP_SIZE
from slm_rerank.host import Host
from slm_rerank.lexical.features import FEATURES
from slm_rerank.lexical.terms import STOP_WORDS

EXTRA = {
    "phrase": "the query's word pairs side by side in the file (share of the best)",
    "run": "the longest run of the query's word pairs in the file (share of the best)",
    "lines": "lines of the query that are lines of the file",
}
WORD = re.compile(r"[a-z0-9_]+")
READ_CAP = 4 << 20


def pairs_of(text: str) -> set[tuple[str, str]]:
    words = WORD.findall(text.lower())
    return {(a, b) for a, b in zip(words, words[1:], strict=False)
            if (len(a) >= 3 and a not in STOP_WORDS) or (len(b) >= 3 and b not in STOP_WORDS)}


def lines_of(text: str) -> set[str]:
    return {s for s in (line.strip() for line in text.splitlines()) if len(s) >= 12}


def raw(tree: Path, path: str) -> str:
    try:
        with open(tree / path, "rb") as f:
            return f.read(READ_CAP).decode("utf-8", "replace")
    except OSError:
        return ""


def extra_values(query: str, tree: Path, paths: list[str]) -> list[tuple[float, float, float]]:
    wanted = pairs_of(query)
    asked_lines = lines_of(query)
    found: list[tuple[int, int, int]] = []
    for path in paths:
        text = raw(tree, path)
        words = WORD.findall(text.lower())
        side_by_side = list(zip(words, words[1:], strict=False))
        hits = [p in wanted for p in side_by_side]
        distinct = len({p for p, h in zip(side_by_side, hits, strict=True) if h})
        best = run = 0
        for h in hits:
            run = run + 1 if h else 0
            best = max(best, run)
        file_lines = lines_of(text)
        found.append((distinct, best, len(asked_lines & file_lines)))
    top_d = max((f[0] for f in found), default=0) or 1
    top_r = max((f[1] for f in found), default=0) or 1
    return [(d / top_d, r / top_r, float(n)) for d, r, n in found]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--train-cap", type=int, default=40)
    ap.add_argument("--without", default="digit_name")
    ap.add_argument("--l2", type=float, default=0.01)
    ap.add_argument("--try", dest="tries", action="append",
                    help="a comma-separated subset of the new features to try (repeatable; "
                         "default: each alone and all together)")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--cache", type=Path, default=tr.CACHE / "features-phrase")
    args = ap.parse_args(argv)

    train, cases = training_rows(args.train_cap)
    args.cache.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    for n, r in enumerate(train, 1):
        case = cases[r.case]
        text = case["title"] if r.mode == "title" else case["query"]
        key = hashlib.sha256(f"phrase-1|{r.case}|{r.mode}".encode()).hexdigest()[:24]
        stored = args.cache / f"{key}.json"
        if stored.exists():
            extra = [tuple(v) for v in json.loads(stored.read_text())]
        else:
            extra = extra_values(text, tr.tree_of(tr.CACHE / "trees", case),
                                 r.paths[:GROUP_SIZE])
            stored.write_text(json.dumps(extra))
        pad = [(0.0, 0.0, 0.0)] * (len(r.values) - len(extra))
        r.values = [v + e for v, e in zip(r.values, extra + pad, strict=True)]
        if n % 200 == 0:
            print(f"  {n}/{len(train)} rows, {time.monotonic() - started:.0f} s",
                  file=sys.stderr)
    FEATURES.update(EXTRA)  # the fit and the model read columns by FEATURES' order

    left_out = {f for f in args.without.split(",") if f}
    base = [f for f in FEATURES if f not in EXTRA and f not in left_out]
    tries = args.tries or [*EXTRA, ",".join(EXTRA)]
    for t, gain in zip(tries, against_base(train, base, tries, args.l2, args.jobs),
                       strict=True):
        print(f"+ {t}: {gain}", flush=True)
    return 0


def training_rows(train_cap: int, features: Path = tr.CACHE / "features"
                  ) -> tuple[list[tr.Row], dict[str, dict]]:
    """``train_ranker.py``'s training rows cached in ``features`` (the benchmark's dev half
    and at most ``train_cap`` mined cases a training repository), and every case by its
    id."""
    host = Host.from_environment(start=Path("/"))
    swe = tr.load(tr.SHARED / "swe-dev.jsonl")
    mined = tr.capped(tr.load(tr.CACHE / "training" / "cases.jsonl"), train_cap, 20)
    rows = tr.rows_of(swe, tr.CACHE / "trees", features, host, "benchmark", Path(), True)
    rows += tr.rows_of(mined, tr.CACHE / "trees", features, host, "mined", Path(), True)
    train = [r for r in rows if r.split in ("dev", "train")]
    print(f"rows: {len(train)} training", file=sys.stderr)
    return train, {c["id"]: c for c in swe + mined}


_TRAIN: list[tr.Row] = []


def _scored(features: list[str], l2: float) -> list:
    return tr.cv_scored(_TRAIN, features, l2)


def against_base(train: list[tr.Row], base: list[str], tries: list[str], l2: float,
                 jobs: int) -> list[str]:
    """For each of ``tries`` (comma-separated features added to ``base``), the
    cross-validated gain over ``base`` alone, row by row (``train_ranker.gain_text``)."""
    global _TRAIN
    _TRAIN = train
    sets = [base] + [base + [f for f in t.split(",") if f] for t in tries]
    # each feature set's cross-validation is independent: ``jobs`` at a time
    with multiprocessing.get_context("fork").Pool(jobs) as pool:
        scored = pool.starmap(_scored, [(s, l2) for s in sets])
    return [tr.gain_text(ours, scored[0]) for ours in scored[1:]]


if __name__ == "__main__":
    sys.exit(main())
