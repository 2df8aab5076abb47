#!/usr/bin/env python3
"""Does a long Python file parsed a part at a time give what one parse of it gives? (issue 30)

    python tests/bench/python_parts_same.py ROOT [ROOT ...]

For every distinct Python file (by content) of ``chunking.SEGMENTS_FROM`` characters or
more under the roots: ``chunking._python_defs_in_parts`` against ``_python_defs`` of one
``ast.parse`` of the whole text (the definitions, their lines and the module-level names).
Prints each file that differs, how many fell back to one parse, and the time each way;
exits 1 when any differs.
"""

from __future__ import annotations

import ast
import hashlib
import os
import sys
import time

from slm_rerank.lexical import chunking


def shape(found: tuple[list, dict]) -> tuple[str, list]:  # type: ignore[type-arg]
    defs, assigned = found
    named = repr([(d.name, d.start, d.end, repr(d.children)) for d in defs])
    return named, sorted(assigned.items())


def main() -> int:
    seen: set[bytes] = set()
    files = differ = fell_back = 0
    whole_s = parts_s = 0.0
    for root in sys.argv[1:]:
        for folder, dirs, names in os.walk(root):
            dirs[:] = [d for d in dirs if d != ".git"]
            for name in names:
                path = os.path.join(folder, name)
                if not name.endswith(".py"):
                    continue
                try:
                    if os.path.getsize(path) < chunking.SEGMENTS_FROM:
                        continue
                    with open(path, "rb") as f:
                        data = f.read()
                except OSError:
                    continue
                digest = hashlib.blake2b(data, digest_size=16).digest()
                text = data.decode("utf-8", "replace")
                if digest in seen or len(text) < chunking.SEGMENTS_FROM:
                    continue
                seen.add(digest)
                start = time.perf_counter()
                try:
                    whole = chunking._python_defs(ast.parse(text).body)
                except chunking._PARSE_ERRORS:
                    whole = None
                middle = time.perf_counter()
                parts = chunking._python_defs_in_parts(text)
                whole_s += middle - start
                parts_s += time.perf_counter() - middle
                files += 1
                if parts is None:
                    fell_back += 1
                elif whole is None or shape(whole) != shape(parts):
                    differ += 1
                    print("differs:", path)
    print(f"{files} files of {chunking.SEGMENTS_FROM} characters or more: {differ} differ, "
          f"{fell_back} fell back to one parse; one parse {whole_s:.1f} s, in parts "
          f"{parts_s:.1f} s")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
