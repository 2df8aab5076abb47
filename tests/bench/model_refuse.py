#!/usr/bin/env python3
"""Fuse saved verdicts again, with other weights and with or without the file-kind prior,
without a model server.

    python tests/bench/model_quality.py -e URL --split dev --json dev.json   # asks the model
    python tests/bench/model_refuse.py dev.json                             # free
    python tests/bench/model_refuse.py dev.json --weights 0.25,0.5 --markdown

``model_quality.py --json`` keeps, per case and mode, the first chunks in lexical order
(path, score), the judged chunks' verdicts and the characters each judged text held. This
script rebuilds the lexical order, the model-alone order and the fused order
(``model/fusion.fuse_scores``, the search's own code) for each weight, with the prior of
``lexical.scores.kind_prior`` on and off, and prints file-level Hit@1/5/10 and MRR@10 per
query mode. Orders are cut to the saved chunks (300 a query), which hold far more than ten
files.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from cases import DEFAULT_CASES, load_cases
from metrics import hit_at, mean, reciprocal_rank

from slm_rerank.lexical.scores import kind_prior
from slm_rerank.lexical.terms import extract
from slm_rerank.model.fusion import fuse_scores

DEFAULT_WEIGHTS = (0.0, 0.1, 0.25, 0.5, 0.75, 1.0, 1.5)
#: the qwen profiles' length exponent, as the search applies it
EXPONENT = 0.12


def distinct(paths: list[str], k: int = 10) -> list[str]:
    out: list[str] = []
    for path in paths:
        if path not in out:
            out.append(path)
            if len(out) == k:
                break
    return out


def orders(row: dict, query: str, weights: tuple[float, ...]) -> dict[str, list[str]]:
    """Every order of one saved row, as its first ten distinct files."""
    chunks = row["chunks"]
    paths = [p for p, _ in chunks]
    lexical = [s for _, s in chunks]
    verdicts = {int(i): p for i, p in row["verdicts"].items() if int(i) < len(chunks)}
    lengths = {int(i): n for i, n in row["lengths"].items() if int(i) < len(chunks)}
    terms = extract(query)
    priors = {i: kind_prior(paths[i], terms) for i in verdicts}
    out = {"lexical": distinct(paths)}
    alone = sorted(verdicts, key=lambda i: (-verdicts[i], i))
    out["model alone"] = distinct([paths[i] for i in alone] + paths)
    for w in weights:
        for name, prior in (("", None), (" + kind prior", priors)):
            fused = fuse_scores(lexical, verdicts, w, lengths, EXPONENT, prior)
            out[f"fused w={w:g}{name}"] = distinct([paths[f.index] for f in fused])
    return out


def table(rows: list[dict], texts: dict[tuple[str, str], str], weights: tuple[float, ...],
          markdown: bool) -> str:
    lines = []
    if markdown:
        lines += ["| mode | order | cases | Hit@1 | Hit@5 | Hit@10 | MRR@10 |",
                  "| --- | --- | ---: | ---: | ---: | ---: | ---: |"]
    for mode in ("title", "query"):
        mine = [r for r in rows if r["mode"] == mode]
        if not mine:
            continue
        per = [orders(r, texts[(r["id"], mode)], weights) for r in mine]
        for name in per[0]:
            pairs = list(zip(per, mine, strict=True))
            hits = [100 * mean(float(hit_at(o[name], r["gold"], k)) for o, r in pairs)
                    for k in (1, 5, 10)]
            mrr = mean(reciprocal_rank(o[name], r["gold"], 10) for o, r in pairs)
            cells = [mode, name, str(len(mine)), *(f"{h:.1f}" for h in hits), f"{mrr:.3f}"]
            lines.append("| " + " | ".join(cells) + " |" if markdown else "  ".join(cells))
        recall = 100 * mean(float(r["head_recall"]) for r in mine)
        seconds = sorted(r.get("seconds", 0.0) for r in mine)
        cells = [mode, "head file recall (Hit@5 column); median model seconds (MRR column)",
                 str(len(mine)), "", f"{recall:.1f}", "", f"{seconds[len(seconds) // 2]:.0f}"]
        lines.append("| " + " | ".join(cells) + " |" if markdown else "  ".join(cells))
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("runs", nargs="+", type=Path, help="model_quality.py --json files")
    ap.add_argument("--cases", type=Path, default=DEFAULT_CASES)
    ap.add_argument("--weights", default=",".join(map(str, DEFAULT_WEIGHTS)))
    ap.add_argument("--markdown", action="store_true")
    args = ap.parse_args()
    cases = {c.id: c for c in load_cases(args.cases)}
    rows = [row for run in args.runs for row in json.loads(run.read_text())]
    missing = [r["id"] for r in rows if "chunks" not in r]
    if missing:
        raise SystemExit(f"{len(missing)} rows have no saved chunks (an older "
                         "model_quality.py wrote them); run it again")
    texts = {(r["id"], r["mode"]): cases[r["id"]].text(r["mode"]) for r in rows}
    weights = tuple(float(w) for w in args.weights.split(","))
    print(table(rows, texts, weights, args.markdown))
    return 0


if __name__ == "__main__":
    sys.exit(main())
