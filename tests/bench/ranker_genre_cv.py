#!/usr/bin/env python3
"""Does the learned order need to weigh a pasted issue apart from a commit message?

The training rows of ``train_ranker.py`` are mostly mined cases, whose query is a commit
message; the benchmark's dev half (about a tenth of the rows) is the only place where the
query is an issue. The fourth round's ``messages`` feature gained on mined held-out
repositories and lost on the benchmark's held-out issues, so this tries, by
cross-validation by repository over the training rows only (the held-out rows are never
scored here):

- ``issues xK``: the benchmark's dev rows counted K times in the fit (the model is one, but
  the issue genre weighs more in it);
- ``long``: each of ``--long-features`` copied as ``NAME_long``, set only when the query is
  long (``--long-terms`` terms or more, the shape of a whole issue, which a search sees),
  so a whole issue gets its own weight for them;
- ``without F``: the shipped features less F (comma-separated);
- ``with F``: the shipped features and F (comma-separated: features this version computes
  that the shipped model does not use);
- ``partner``: ``addon_partner`` (the best lexical share among the row's test files whose
  name, less its test marks, is this file's name: ``test_foo.py``, ``foo_test.go``,
  ``FooTest.java``, ``foo.test.js`` for ``foo``) and ``addon_partner_top`` (the row's
  lexically best test file is one of them): what the matching tests say about the source
  file they exercise, which the lexical order demotes as tests. This is the eighth round's
  first try, kept as it was measured (its test marks are also stripped inside a word);
  ``features.py``'s ``test_partner`` is the search's own;
- ``snippets``: the fit also sees one more row for each mined training case whose fix added
  test lines (``mine_snippets.py``, ``--snippets``): its message followed by those lines, an
  issue's prose-plus-reproducer shape. Only the fold's own training repositories' snippet
  rows are fitted on, and no snippet row is measured;
- ``bm25``: ``bm25_share``, ``bm25_rrank`` and ``bm25_top``: each candidate's score under
  the benchmark's ``bm25-code`` baseline (BM25 over the tree's source files, whole words, as
  ``baselines.Bm25Index`` builds it), as a share of the best, one over its rank, and
  whether it is first: how much a whole-word BM25 could add to the order (needs ``bm25s``,
  ``requirements.txt``; cached in ``bm25-addon.json``);
- ``msglm``: ``msglm`` and ``msglm_top``: the query's words' log likelihood ratio under a
  Dirichlet-smoothed model (prior ``MSG_MU`` commits) of the messages of the commits that
  changed the file, against all commits of the window: unlike ``messages``, a file changed
  often without saying the words scores below 0 (each case's history at its base commit;
  cached in ``msglm-addon.json``);
- ``dense``: ``dense_cos``, ``dense_gap`` and ``dense_rrank``: a sentence-embedding model's
  cosine between the query and each candidate's summary (its path's and declared names'
  words), that less the row's best, and one over its rank by it (``dense_addon.py`` writes
  them in ``dense-addon.json``; run it first); ``dense_comment``: the same with each
  summary holding the file's first comment too (``dense_comment_cos`` ...;
  ``dense_addon.py --comment``);
- ``bylang F,G``: each named feature once more for each language but Python (``F@go``:
  ``F`` in Go rows, 0 elsewhere), so the fit weighs those features per language (a row's
  language is its repository's);
- ``title``: ``title_lexical`` and ``title_top`` (the file's lexical share, and whether it
  is first, when the query's first line alone is searched: the title row of the same case;
  a title row's own values), so a whole issue's summary line weighs apart from its body.

Parts join with `` + ``: ``--try "with module_named + issues x4"``; ``snippets`` joins only
``issues xK``, ``with F`` and ``without F``.

Each is reported over every training row and over the benchmark's dev rows alone (by query
mode; ``--by-language``: also each language's mined rows), against the shipped feature set
fitted the plain way, row by row, with the 95 % paired bootstrap interval of the gain.

    python tests/bench/ranker_genre_cv.py --try "issues x4" --try long --try "without messages"
"""

from __future__ import annotations

import argparse
import json
import math
import multiprocessing
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import train_ranker as tr
from ranker_phrase_cv import training_rows

from slm_rerank.host import Host
from slm_rerank.lexical.features import FEATURES
from slm_rerank.lexical.ranker import shipped_model
from slm_rerank.pipeline import query_terms

_ROWS: list[tr.Row] = []
_SNIPPETS: list[tr.Row] = []


def fitted_on(times: int, snippets: bool) -> Callable[[list[tr.Row]], list[tr.Row]]:
    """A fold's fitting rows: the benchmark's dev rows ``times`` times, and with
    ``snippets`` the snippet rows of the fold's own training repositories."""
    def pick(rows: list[tr.Row]) -> list[tr.Row]:
        out = rows + [r for r in rows if r.split == "dev" for _ in range(times - 1)]
        if snippets:
            repos = {r.repo for r in rows}
            out += [r for r in _SNIPPETS if r.repo in repos]
        return out
    return pick


def _scored(features: list[str], l2: float, times: int, snippets: bool) -> list:
    return tr.cv_scored(_ROWS, features, l2, fit_on=fitted_on(times, snippets))


def add_long(rows: list[tr.Row], cases: dict[str, dict], names: list[str],
             long_terms: int) -> list[str]:
    """Append ``NAME_long`` columns to every row; the new feature names."""
    at = {n: i for i, n in enumerate(FEATURES)}
    for r in rows:
        case = cases[r.case]
        text = case["title"] if r.mode == "title" else case["query"]
        is_long = len(query_terms(text).terms) >= long_terms
        r.values = [v + tuple(v[at[n]] if is_long else 0.0 for n in names) for v in r.values]
    added = [f"{n}_long" for n in names]
    FEATURES.update({a: f"{FEATURES[n]}, a long query" for a, n in zip(added, names,
                                                                        strict=True)})
    return added


#: test marks around a test file's name stem: ``test_x``, ``x_test``, ``XTest``, ``x.spec``
_TEST_MARK = re.compile(r"^(?:tests?[_-])|(?:[_-]?(?:tests?|spec))$")
#: names too generic to tie a test to one source file
_GENERIC = frozenset({"__init__", "index", "main", "mod", "lib", "conftest", "utils", "util",
                      "common", "helpers", "helper", "test", "tests", "spec", "setup"})


def _name_key(path: str, is_test: bool) -> str:
    stem = path.rsplit("/", 1)[-1].split(".", 1)[0].lower()
    if is_test:
        stem = _TEST_MARK.sub("", stem)
    return "" if len(stem) < 3 or stem in _GENERIC else stem


def add_partner(rows: list[tr.Row]) -> list[str]:
    """Append ``addon_partner`` and ``addon_partner_top`` to every row; their names."""
    at = {n: i for i, n in enumerate(FEATURES)}
    lex, kind, like = at["lexical"], at["kind_test"], at["test_like"]
    for r in rows:
        tests: dict[str, float] = {}
        top_key, top = "", -1.0
        for p, v in zip(r.paths, r.values, strict=True):
            if v[kind] or v[like]:
                key = _name_key(p, True)
                if v[lex] > top:
                    top_key, top = key, v[lex]
                if key:
                    tests[key] = max(tests.get(key, 0.0), v[lex])
        new = []
        for p, v in zip(r.paths, r.values, strict=True):
            key = "" if (v[kind] or v[like]) else _name_key(p, False)
            share = tests.get(key, 0.0) if key else 0.0
            new.append(v + (share, float(bool(key) and key == top_key)))
        r.values = new
    added = {"addon_partner": "a matching test file is named for it (add-on)",
             "addon_partner_top": "the best matching test file is named for it (add-on)"}
    FEATURES.update(added)
    return list(added)


def _bm25_of(item: tuple[str, list[tuple[str, str, list[str]]]]
             ) -> dict[str, list[list[float]]]:
    """One tree's rows: each row's candidates' BM25 share of the best, rank among the
    tree's source files (0: not indexed) and whether best, by ``case|mode``."""
    import bm25s
    import numpy as np
    from baselines import Bm25Index

    tree, wanted = item
    index = Bm25Index.build(Path(tree), "code")
    at = {p: i for i, p in enumerate(index.paths)}
    out: dict[str, list[list[float]]] = {}
    for key, text, paths in wanted:
        tokens = bm25s.tokenize(text, stopwords="en", return_ids=False,
                                show_progress=False)[0]
        known = [t for t in tokens if t in index.retriever.vocab_dict] if index.paths else []
        if not known:
            out[key] = [[0.0, 0.0, 0.0] for _ in paths]
            continue
        scores = np.asarray(index.retriever.get_scores(known))
        order = np.argsort(-scores, kind="stable")
        rank = np.empty(len(scores), dtype=int)
        rank[order] = np.arange(1, len(scores) + 1)
        top = float(scores.max())
        out[key] = [[float(scores[at[p]]) / top if p in at and top > 0 else 0.0,
                     1.0 / float(rank[at[p]]) if p in at and scores[at[p]] > 0 else 0.0,
                     float(p in at and top > 0 and scores[at[p]] >= top)] for p in paths]
    return out


def add_bm25(rows: list[tr.Row], cases: dict[str, dict], jobs: int) -> list[str]:
    """Append ``bm25_share``, ``bm25_rrank`` and ``bm25_top`` (BM25 over the tree's source
    files, the baseline ``bm25-code``, of each candidate) to every row; their names."""
    return _cached_columns(
        rows, cases, jobs, "bm25-addon.json", _bm25_of,
        lambda case: (str(tr.tree_of(tr.CACHE / "trees", case)),) * 2,
        {"bm25_share": "BM25 over the source files, share of the best (add-on)",
         "bm25_rrank": "1 / BM25 rank among the source files (add-on)",
         "bm25_top": "BM25's best source file (add-on)"})


def _cached_columns(rows: list[tr.Row], cases: dict[str, dict], jobs: int, store_name: str,
                    worker: Callable[[tuple[Any, list[tuple[str, str, list[str]]]]],
                                     dict[str, list[list[float]]]] | str,
                    group: Callable[[dict], tuple[str, Any]] | None, added: dict[str, str]
                    ) -> list[str]:
    """Append the columns ``added`` names to every row: ``worker`` works out each group's
    rows (``group`` gives a case's group and what the worker is handed for it), in
    ``jobs`` processes, cached by case and mode in ``store_name``. A ``worker`` that is a
    command line fills the store outside: every row must be there already."""
    store = tr.CACHE / store_name
    known: dict[str, list[list[float]]] = json.loads(store.read_text()) if store.exists() else {}
    lacking = [r for r in rows if f"{r.case}|{r.mode}" not in known]
    if lacking and isinstance(worker, str):
        raise SystemExit(f"{store} lacks {len(lacking)} of {len(rows)} rows: run {worker} "
                         "first")
    todo: dict[str, tuple[Any, list[tuple[str, str, list[str]]]]] = {}
    for r in lacking:
        case = cases[r.case]
        text = case["title"] if r.mode == "title" else case["query"]
        name, payload = group(case)
        todo.setdefault(name, (payload, []))[1].append((f"{r.case}|{r.mode}", text, r.paths))
    if todo:
        with multiprocessing.get_context("fork").Pool(jobs) as pool:
            for done in pool.imap_unordered(worker, list(todo.values())):
                known.update(done)
        store.write_text(json.dumps(known))
    for r in rows:
        r.values = [v + tuple(extra) for v, extra in
                    zip(r.values, known[f"{r.case}|{r.mode}"], strict=True)]
    FEATURES.update(added)
    return list(added)


#: the Dirichlet prior, in commits, of ``add_msglm``'s per-file message model
MSG_MU = 5.0


def _msglm_of(item: tuple[dict, list[tuple[str, str, list[str]]]]
              ) -> dict[str, list[list[float]]]:
    """One case's rows: each candidate's query likelihood under its commits' messages."""
    case, wanted = item
    history = tr.history_at(case, tr.REPO_ROOT.parent / ".mirror")
    out: dict[str, list[list[float]]] = {}
    said = [(c, w) for c, w in (history.said if history else ()) if c]
    for key, text, paths in wanted:
        words = {t.light for t in query_terms(text).terms
                 if len(t.root) >= 3 and not t.root.isdigit()}
        if not said or not words:
            out[key] = [[0.0, 0.0] for _ in paths]
            continue
        wanted_paths = set(paths)
        commits: dict[str, int] = {}
        told: dict[str, dict[str, int]] = {}
        saying: dict[str, int] = {}
        for changed, says in said:
            hit = says & words
            for w in hit:
                saying[w] = saying.get(w, 0) + 1
            for path in changed & wanted_paths:
                commits[path] = commits.get(path, 0) + 1
                mine = told.setdefault(path, {})
                for w in hit:
                    mine[w] = mine.get(w, 0) + 1
        total = len(said)
        scores = []
        for path in paths:
            n_f = commits.get(path, 0)
            score = 0.0
            for w, n_w in saying.items():
                p_w = n_w / total
                score += math.log((told.get(path, {}).get(w, 0) + MSG_MU * p_w)
                                  / ((n_f + MSG_MU) * p_w))
            scores.append(score)
        top = max(scores, default=0.0)
        out[key] = [[sc, float(top > 0 and sc >= top)] for sc in scores]
    return out


def add_msglm(rows: list[tr.Row], cases: dict[str, dict], jobs: int) -> list[str]:
    """Append ``msglm`` (the query's words' log likelihood ratio under a Dirichlet-smoothed
    model of the messages of the commits that changed the file, against all commits: a
    file changed often without saying the words scores below 0) and ``msglm_top``."""
    return _cached_columns(
        rows, cases, jobs, "msglm-addon.json", _msglm_of, lambda case: (case["id"], case),
        {"msglm": "query likelihood under its commits' messages (add-on)",
         "msglm_top": "the best such likelihood (add-on)"})


def add_dense(rows: list[tr.Row], cases: dict[str, dict], jobs: int,
              comment: bool = False) -> list[str]:
    """Append ``dense_addon.py``'s three columns to every row (``comment``: those of its
    summaries with each file's first comment, ``dense_comment_*``); their names."""
    prefix, with_comment = ("dense_comment_", ", with the file's first comment") if comment \
        else ("dense_", "")
    return _cached_columns(
        rows, cases, jobs, "dense-comment-addon.json" if comment else "dense-addon.json",
        "tests/bench/dense_addon.py --model DIR" + (" --comment" if comment else ""), None,
        {f"{prefix}cos": f"query and summary{with_comment} cosine, sentence embeddings "
                         "(add-on)",
         f"{prefix}gap": "that cosine less the row's best (add-on)",
         f"{prefix}rrank": "1 / rank by that cosine (add-on)"})


def add_bylang(rows: list[tr.Row], names: list[str]) -> list[str]:
    """``NAME@LANG`` (the feature where the row's language is LANG, else 0) for each
    language but Python, so a fit can weigh those features per language; their names. Only
    the columns no earlier part appended are appended (the fit finds a column by its
    name's place in ``FEATURES``)."""
    at = {n: i for i, n in enumerate(FEATURES)}
    langs = sorted({r.lang for r in rows} - {"python"})
    wanted = [(n, lang) for lang in langs for n in names]
    new = [(n, lang) for n, lang in wanted if f"{n}@{lang}" not in FEATURES]
    for r in rows:
        r.values = [v + tuple(v[at[n]] if r.lang == lang else 0.0 for n, lang in new)
                    for v in r.values]
    FEATURES.update({f"{n}@{lang}": f"{n} in {lang} rows (add-on)" for n, lang in new})
    return [f"{n}@{lang}" for n, lang in wanted]


def add_title(rows: list[tr.Row], cases: dict[str, dict], only_long: bool = False
              ) -> list[str]:
    """Append ``title_lexical`` and ``title_top`` to every row (``only_long``: ``title0_*``,
    0 unless the query is more than its first line); their names."""
    lex = list(FEATURES).index("lexical")
    titles = {r.case: r for r in rows if r.mode == "title"}
    for r in rows:
        first = titles.get(r.case, r) if r.mode == "query" else r
        case = cases[r.case]
        if only_long and (r.mode == "title" or case["query"].strip() == case["title"].strip()):
            r.values = [v + (0.0, 0.0) for v in r.values]
            continue
        shares = {p: v[lex] for p, v in zip(first.paths, first.values, strict=True)}
        top = first.paths[0] if first.paths else ""
        r.values = [v + (shares.get(p, 0.0), float(p == top))
                    for p, v in zip(r.paths, r.values, strict=True)]
    prefix = "title0" if only_long else "title"
    added = {f"{prefix}_lexical": "lexical share from the query's first line alone",
             f"{prefix}_top": "first when the query's first line alone is searched"}
    FEATURES.update(added)
    return list(added)


def snippet_rows(train_cap: int, path: Path) -> list[tr.Row]:
    """The cached snippet rows of the capped mined training cases (``train_ranker.py
    --snippets`` extracts them)."""
    host = Host.from_environment(start=Path("/"))
    mined = [c for c in tr.capped(tr.load(tr.CACHE / "training" / "cases.jsonl"), train_cap, 20)
             if c.get("split") == "train"]
    rows = tr.rows_of(mined, tr.CACHE / "trees", tr.CACHE / "features", host, "snippets",
                      Path(), True, tr.load_snippets(path))
    print(f"snippet rows: {len(rows)}", file=sys.stderr)
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--train-cap", type=int, default=40)
    ap.add_argument("--l2", type=float, default=0.01)
    ap.add_argument("--try", dest="tries", action="append", required=True)
    ap.add_argument("--long-features", default="messages,lexical,names_file,declares")
    ap.add_argument("--long-terms", type=int, default=15)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--snippets", type=Path,
                    default=tr.CACHE / "training" / "snippets.jsonl",
                    help="mine_snippets.py's output, for the 'snippets' part")
    ap.add_argument("--by-language", action="store_true",
                    help="also each language's mined training rows")
    args = ap.parse_args(argv)

    global _ROWS, _SNIPPETS
    rows, cases = training_rows(args.train_cap)
    asked = {part.strip() for t in args.tries for part in t.split(" + ")}
    if "snippets" in asked:
        # before the add-on columns below change the feature list that keys the cache
        _SNIPPETS = snippet_rows(args.train_cap, args.snippets)
    base = list(shipped_model().features)
    computed = set(FEATURES)  # the search's own features, before the add-on columns
    # each add-on part's columns (the two that read trees or histories only when asked)
    columns = {"long": add_long(rows, cases, args.long_features.split(","), args.long_terms),
               "partner": add_partner(rows),
               "title": add_title(rows, cases),
               "title0": add_title(rows, cases, only_long=True),
               "msglm": add_msglm(rows, cases, args.jobs) if "msglm" in asked else [],
               "bm25": add_bm25(rows, cases, args.jobs) if "bm25" in asked else [],
               "dense": add_dense(rows, cases, args.jobs) if "dense" in asked else [],
               "dense_comment": add_dense(rows, cases, args.jobs, comment=True)
               if "dense_comment" in asked else []}
    _ROWS = rows
    plans: list[tuple[list[str], int, bool]] = [(base, 1, False)]
    for t in args.tries:
        features, times, snippets = list(base), 1, False
        for part in (p.strip() for p in t.split(" + ")):
            if part == "snippets":
                snippets = True
            elif part.startswith("issues x"):
                times = int(part.removeprefix("issues x"))
            elif part in columns:
                features += columns[part]
            elif part.startswith("bylang "):
                named_here = part.removeprefix("bylang ").split(",")
                unknown = [f for f in named_here if f not in computed]
                if unknown:
                    ap.error(f"--try {t!r}: bylang takes the search's features; not "
                             f"{', '.join(unknown)}")
                features += add_bylang(rows, named_here)
            elif part.startswith("partner "):
                features += [part.removeprefix("partner ")]
            elif part.startswith("without "):
                gone = set(part.removeprefix("without ").split(","))
                features = [f for f in features if f not in gone]
            elif part.startswith("with "):
                added = [f for f in part.removeprefix("with ").split(",") if f]
                unknown = [f for f in added if f not in FEATURES]
                if unknown:
                    ap.error(f"--try {t!r}: {', '.join(unknown)} not computed by this version")
                features += [f for f in added if f not in features]
            else:
                named = ", ".join(f"'{c}'" for c in ["issues xK", *columns, "snippets",
                                                       "bylang F,G"])
                ap.error(f"--try {t!r}: expected {named}, 'with F' or 'without F' "
                         "(joined with ' + ')")
        if snippets and set(features) - computed:
            ap.error(f"--try {t!r}: 'snippets' joins only 'issues xK', 'with F' and "
                     "'without F' (its rows have no add-on columns)")
        plans.append((features, times, snippets))
    with multiprocessing.get_context("fork").Pool(args.jobs) as pool:
        scored = pool.starmap(_scored, [(f, args.l2, k, s) for f, k, s in plans])
    # cv_scored's rows come fold by fold: the same order for every plan
    ordered = tr.scored_rows(rows)
    slices: dict[str, Callable[[tr.Row], bool]] = {
        "all training rows": lambda r: True,
        "benchmark dev, titles": lambda r: r.split == "dev" and r.mode == "title",
        "benchmark dev, whole issues": lambda r: r.split == "dev" and r.mode == "query"}
    if args.by_language:
        for lang in sorted({r.lang for r in rows if r.split == "train"}):
            slices[f"mined {lang}"] = lambda r, lang=lang: r.split == "train" and r.lang == lang
    for t, ours in zip(args.tries, scored[1:], strict=True):
        for name, keep in slices.items():
            pick = [i for i, r in enumerate(ordered) if keep(r)]
            gain = tr.gain_text([ours[i] for i in pick], [scored[0][i] for i in pick])
            print(f"{t} | {name} ({len(pick)}): {gain}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
