#!/usr/bin/env python3
"""Do two checkouts give the same `--fast` answers? (issue 30: start-up work costs no answer)

    python tests/bench/fast_same_answers.py --before /tmp/before [--after .] [--root TREE]
    python tests/bench/fast_same_answers.py --before /tmp/before --cases CASES \
        --split held-out [--warm-after]

Each checkout's package and ripgrep plugin are run in a fresh process (``PYTHONPATH=CHECKOUT:
CHECKOUT/plugins/slm-rerank-ripgrep python -c 'from slm_rerank.cli import main; ...'``, this
venv's other plugins), ``--fast --format json -k 10``,
with and without ``--chunks``, for each of QUERIES in ``--root`` (default: a sympy checkout).
A result is its path, lines and symbol; the script prints one line per query and mode and
exits 1 when any answer differs (or an exit status does).

With ``--cases``, the questions are those benchmark cases' titles and whole texts (the
latter through ``--query-file``), each asked in its own materialized tree. The ``before``
side always runs in its own process (``SLM_RERANK_WARM_PROCESS=0``); with ``--warm-after``
the ``after`` side is left to the warm process (the user's default: the first command
starts it, later ones are answered by it), so what is compared is the warm path against a
run in its own process.
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


def answer(checkout: Path, root: Path, query: str, chunks: bool,
           warm: bool = False) -> tuple[int, object]:
    """The exit status and the results (path, lines, symbol) of one `--fast` query; a
    query over 2,000 characters goes through ``--query-file -`` (argv stays short)."""
    args = [str(PYTHON), "-c", RUN, "--fast", "--format", "json", "-k", "10"]
    args += ["-q", query] if len(query) <= 2000 else ["--query-file", "-"]
    if chunks:
        args.append("--chunks")
    # The checkout's ripgrep plugin too (as same_answers.py does): on PYTHONPATH alone, the
    # host comes from the checkout but the plugin from this venv's editable install, the
    # same code on both sides.
    path = os.pathsep.join([str(checkout), str(checkout / "plugins" / "slm-rerank-ripgrep")])
    env = {**os.environ, "PYTHONPATH": path,
           "SLM_RERANK_WARM_PROCESS": "1" if warm else "0"}
    done = subprocess.run(args, cwd=root, capture_output=True, text=True, timeout=120,
                          env=env, input=query if len(query) > 2000 else "")
    if done.returncode != 0:
        return done.returncode, done.stderr.strip()
    rows = json.loads(done.stdout)["results"]
    return 0, [(r["path"], r["start_line"], r["end_line"], r["symbol"]) for r in rows]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--before", type=Path, required=True, help="the older checkout")
    parser.add_argument("--after", type=Path, default=REPO_ROOT, help="the newer checkout")
    parser.add_argument("--root", type=Path, default=Path("/tmp/sympy-h"), help="tree searched")
    parser.add_argument("--cases", type=Path, help="benchmark cases (JSONL) instead of QUERIES")
    parser.add_argument("--split", default="held-out", help="which cases (dev, held-out, all)")
    parser.add_argument("--trees", type=Path,
                        default=Path.home() / ".cache" / "slm-rerank-bench" / "trees")
    parser.add_argument("--warm-after", action="store_true",
                        help="leave the after side to the warm process")
    opts = parser.parse_args()
    if opts.cases:
        from cases import MODES, in_split, load_cases, tree_ready

        asked = [(case.tree(opts.trees), getattr(case, mode), f"{case.id} {mode}")
                 for case in load_cases(opts.cases)
                 if in_split(case, opts.split) and tree_ready(case.tree(opts.trees))
                 for mode in MODES]
    else:
        asked = [(opts.root, query, query) for query in QUERIES]
    differ = 0
    for root, query, label in asked:
        for chunks in (False, True):
            before = answer(opts.before.resolve(), root, query, chunks)
            after = answer(opts.after.resolve(), root, query, chunks, opts.warm_after)
            same = before == after
            differ += not same
            mode = "chunks" if chunks else "files"
            count = len(after[1]) if isinstance(after[1], list) else after[1]
            print(f"{'same' if same else 'DIFFERENT'}  {mode:6}  {count!s:>3}  {label}")
            if not same:
                print(f"    before: {before}\n    after:  {after}")
    print(f"{len(asked) * 2 - differ} of {len(asked) * 2} answers the same")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
