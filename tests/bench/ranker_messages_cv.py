#!/usr/bin/env python3
"""Would the words of past commit messages tell sibling source files apart?

For each case, the commits before its base commit (``git log`` of the newest ``--commits``,
no merges, no renames, at most 100 paths a commit, as ``lexical/history.py`` reads them)
give each file the words of the messages of the commits that changed it. A candidate's
``messages`` feature: the query's words (no stop words, three letters or more) in its
files' messages, each weighted by how rare it is among the commits (a BM25-like
saturation per word), as a share of the best candidate; ``messages_raw``: the same,
``log1p`` of the raw score. Cross-validated by repository over the training rows, row by
row against the same features without them (the held-out rows are never scored here).

    python tests/bench/ranker_messages_cv.py --commits 300 --commits 2000
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

import train_ranker as tr
from ranker_phrase_cv import WORD, against_base, training_rows

from slm_rerank.calibration.learning import GROUP_SIZE
from slm_rerank.git_runner import git_output
from slm_rerank.lexical.features import FEATURES
from slm_rerank.lexical.terms import STOP_WORDS, light
from slm_rerank.pipeline import query_terms

MAX_PATHS = 100


def words(text: str) -> set[str]:
    return {w for w in WORD.findall(text.lower()) if len(w) >= 3 and w not in STOP_WORDS
            and not w.isdigit()}


def light_words(text: str) -> set[str]:
    return {light(w) for w in words(text)}


def term_words(query: str) -> set[str]:
    """The query's terms as a search extracts them (``pipeline.query_terms``), light form."""
    return {t.light for t in query_terms(query).terms if len(t.root) >= 3
            and not t.root.isdigit()}


def log_of(clone: Path, rev: str, commits: int, words=words) -> list[tuple[set[str], list[str]]]:
    # through the one git runner: nothing a clone's configuration names runs
    out = git_output(clone, ["log", "--no-merges", "--no-renames", f"-n{commits}",
                             "--name-only", "--format=%x1e%B%x1f", rev, "--"],
                     timeout=120, max_bytes=64 << 20).decode("utf-8", "replace")
    log = []
    for record in out.split("\x1e")[1:]:
        message, _, names = record.partition("\x1f")
        paths = [p for p in names.split("\n") if p.strip()]
        if len(paths) <= MAX_PATHS:
            log.append((words(message), paths))
    return log


def message_values(query: str, log: list[tuple[set[str], list[str]]],
                   paths: list[str], asked_of=words) -> list[tuple[float, float]]:
    asked = asked_of(query)
    if not log or not asked:
        return [(0.0, 0.0)] * len(paths)
    df = Counter(w for msg, _ in log for w in msg & asked)
    n = len(log)
    idf = {w: math.log(1 + n / c) for w, c in df.items()}
    wanted = set(paths)
    tf: dict[str, Counter] = defaultdict(Counter)
    for msg, changed in log:
        hit = msg & asked
        if not hit:
            continue
        for p in changed:
            if p in wanted:
                tf[p].update(hit)
    raw = [sum(idf[w] * c / (c + 1.2) for w, c in tf[p].items()) for p in paths]
    top = max(raw, default=0.0) or 1.0
    return [(r / top, math.log1p(r)) for r in raw]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--train-cap", type=int, default=40)
    ap.add_argument("--without", default="digit_name")
    ap.add_argument("--l2", type=float, default=0.01)
    ap.add_argument("--commits", type=int, default=300)
    ap.add_argument("--try", dest="tries", action="append",
                    help="comma-separated new features to add (repeatable)")
    ap.add_argument("--words", choices=("raw", "terms"), default="raw",
                    help="the query's words: every word, or its search terms (light forms, "
                         "matched against the messages' words' light forms)")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--cache", type=Path, default=tr.CACHE / "features-messages")
    args = ap.parse_args(argv)

    train, cases = training_rows(args.train_cap)
    args.cache.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    logs: dict[str, list] = {}
    for n, r in enumerate(train, 1):
        case = cases[r.case]
        text = case["title"] if r.mode == "title" else case["query"]
        key = hashlib.sha256(f"messages-1|{args.words}|{args.commits}|{r.case}|{r.mode}".encode()
                             ).hexdigest()[:24]
        stored = args.cache / f"{key}.json"
        if stored.exists():
            extra = [tuple(v) for v in json.loads(stored.read_text())]
        else:
            if r.case not in logs:
                logs.clear()
                clone = tr.CACHE / "clones" / case["repo"].replace("/", "+")
                logs[r.case] = (log_of(clone, case["base_commit"], args.commits,
                                       light_words if args.words == "terms" else words)
                                if (clone / ".git").exists() else [])
            extra = message_values(text, logs[r.case], r.paths[:GROUP_SIZE],
                                   term_words if args.words == "terms" else words)
            stored.write_text(json.dumps(extra))
        pad = [(0.0, 0.0)] * (len(r.values) - len(extra))
        r.values = [v + e for v, e in zip(r.values, extra + pad, strict=True)]
        if n % 200 == 0:
            print(f"  {n}/{len(train)} rows, {time.monotonic() - started:.0f} s",
                  file=sys.stderr)
    extra_names = {"messages": "the query's words in the messages of the file's commits",
                   "messages_raw": "the same, unshared"}
    FEATURES.update(extra_names)
    left_out = {f for f in args.without.split(",") if f}
    base = [f for f in FEATURES if f not in extra_names and f not in left_out]
    tries = args.tries or ["messages", "messages_raw", "messages,messages_raw"]
    for t, gain in zip(tries, against_base(train, base, tries, args.l2, args.jobs),
                       strict=True):
        print(f"+ {t} ({args.commits} commits): {gain}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
