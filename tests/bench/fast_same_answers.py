#!/usr/bin/env python3
"""Do two checkouts give the same `--fast` answers? (issue 30: start-up work costs no answer)

    python tests/bench/fast_same_answers.py --before /tmp/before [--after .] [--root TREE]

Each checkout's package is run in a fresh process (``PYTHONPATH=CHECKOUT python -c 'from
slm_rerank.cli import main; ...'``, this venv's plugins), ``--fast --format json -k 10``,
with and without ``--chunks``, for each of QUERIES in ``--root`` (default: a sympy checkout).
A result is its path, lines and symbol; the script prints one line per query and mode and
exits 1 when any answer differs (or an exit status does).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
PYTHON = REPO_ROOT / ".venv" / "bin" / "python"
RUN = ('import sys; from slm_rerank.cli import main; sys.argv[0] = "slm-rerank"; '
       'sys.exit(main())')
#: Questions about sympy of the kinds an agent asks: an error message, a symbol, a behaviour.
QUERIES = (
    "Matrix determinant raises Invalid NaN comparison",
    "where is the determinant of a matrix computed",
    "simplify trigonometric expressions",
    "solve a system of linear equations",
    "LaTeX printer for integrals",
    "Rational number addition overflow",
    "series expansion around infinity",
    "how are assumptions like positive handled",
    "factor a polynomial over a finite field",
    "lambdify numpy printer",
    "TypeError: unsupported operand type(s) for *: 'Symbol' and 'NoneType'",
    "sympify parses strings with implicit multiplication",
    "limit of sin(x)/x",
    "Piecewise evaluation with conditions",
    "code generation C printer pow",
    "integrate rational functions with risch",
    "eigenvalues of a symbolic matrix",
    "pretty printing unicode",
    "Poly gcd",
    "dsolve ordinary differential equations hints",
)


def answer(checkout: Path, root: Path, query: str, chunks: bool) -> tuple[int, object]:
    """The exit status and the results (path, lines, symbol) of one `--fast` query."""
    args = [str(PYTHON), "-c", RUN, "-q", query, "--fast", "--format", "json", "-k", "10"]
    if chunks:
        args.append("--chunks")
    done = subprocess.run(args, cwd=root, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(checkout)})
    if done.returncode != 0:
        return done.returncode, done.stderr.strip()
    rows = json.loads(done.stdout)["results"]
    return 0, [(r["path"], r["start_line"], r["end_line"], r["symbol"]) for r in rows]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--before", type=Path, required=True, help="the older checkout")
    parser.add_argument("--after", type=Path, default=REPO_ROOT, help="the newer checkout")
    parser.add_argument("--root", type=Path, default=Path("/tmp/sympy-h"), help="tree searched")
    opts = parser.parse_args()
    differ = 0
    for query in QUERIES:
        for chunks in (False, True):
            before = answer(opts.before.resolve(), opts.root, query, chunks)
            after = answer(opts.after.resolve(), opts.root, query, chunks)
            same = before == after
            differ += not same
            mode = "chunks" if chunks else "files"
            count = len(after[1]) if isinstance(after[1], list) else after[1]
            print(f"{'same' if same else 'DIFFERENT'}  {mode:6}  {count!s:>3}  {query}")
            if not same:
                print(f"    before: {before}\n    after:  {after}")
    print(f"{len(QUERIES) * 2 - differ} of {len(QUERIES) * 2} answers the same")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
