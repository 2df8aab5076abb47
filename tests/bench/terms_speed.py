#!/usr/bin/env python3
"""Query term extraction on long queries: this checkout's terms.py against an earlier one's.

    python tests/bench/terms_speed.py [--before REV] [--sizes 10000,40000]

Loads ``slm_rerank/lexical/terms.py`` as it was at REV (``git show``, default d8b93c7, before the
linear rewrite of issue 15) beside the current one and times ``extract()`` of both on the
same queries, one after the other, in CPU time (a busy machine's waits do not count).
Prints a markdown table with the ratio.
"""

from __future__ import annotations

import argparse
import importlib.util
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]
SHAPES = {
    "one word (`a` x N)": "a",
    "hex dump": "deadbeef0123456789abcdef",
    "dotted names (`a.` x N)": "a.",
    "snake_case run": "foo_bar_",
    "prose": "where is the retry loop configured ",
}


def terms_at(rev: str, folder: Path) -> ModuleType:
    source = subprocess.run(["git", "show", f"{rev}:slm_rerank/lexical/terms.py"], cwd=ROOT,
                            check=True, capture_output=True, text=True).stdout
    path = folder / "terms_before.py"
    path.write_text(source, encoding="utf-8")
    spec = importlib.util.spec_from_file_location("terms_before", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["terms_before"] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def cpu_seconds(module: ModuleType, query: str) -> float:
    started = time.process_time()
    module.extract(query)
    return time.process_time() - started


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--before", default="d8b93c7")
    ap.add_argument("--sizes", default="10000,40000")
    args = ap.parse_args()
    sys.path.insert(0, str(ROOT))
    from slm_rerank.lexical import terms as now

    with tempfile.TemporaryDirectory() as tmp:
        before = terms_at(args.before, Path(tmp))
        print(f"| query shape | characters | {args.before} (s) | now (s) | ratio |")
        print("| --- | ---: | ---: | ---: | ---: |")
        for size in (int(s) for s in args.sizes.split(",")):
            for name, unit in SHAPES.items():
                query = (unit * (size // len(unit) + 1))[:size]
                then, later = cpu_seconds(before, query), cpu_seconds(now, query)
                print(f"| {name} | {size:,} | {then:.2f} | {later:.3f} | "
                      f"{then / max(later, 1e-6):.0f}x |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
