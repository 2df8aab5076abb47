#!/usr/bin/env python3
"""What importing the warm process's command side costs, for two checkouts (issue 30).

    python tests/bench/warm_client_imports.py --before /tmp/before [--after .] [--runs 30]

Run from a folder that holds no ``slm_rerank`` (``/tmp``): ``python -c`` puts the current
folder first on ``sys.path``. Each round, in turn for the two checkouts (their order
alternating round by round), a fresh interpreter imports what the command side imports
before it can ask the warm process (the client, ``piped``, ``query_limit``,
``hook.stdio``): without ``site`` (the checkout alone on ``sys.path``: what the modules
themselves load) and with it (as the command runs, an editable install's finders having
loaded some of the standard library already). CPU is the process's (``os.wait4``) less an
interpreter that imports nothing, in the same mode; ``-X importtime`` sums the top-level
``slm_rerank`` imports. Medians of the rounds, and the after/before CPU ratio pair by pair.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
from pathlib import Path

IMPORTS = ("import slm_rerank.warm_process.client, slm_rerank.piped, "
           "slm_rerank.query_limit, slm_rerank.hook.stdio")


def spent(args: list[str], env: dict[str, str]) -> tuple[float, str]:
    """CPU seconds of one process, and its stderr."""
    proc = subprocess.Popen(args, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            text=True)
    assert proc.stderr is not None
    err = proc.stderr.read()
    _, _, usage = os.wait4(proc.pid, 0)
    return usage.ru_utime + usage.ru_stime, err


def import_ms(err: str) -> float:
    total = 0
    for line in err.splitlines():
        parts = line.split("|")
        if line.startswith("import time:") and len(parts) == 3 and parts[2].startswith(
                " slm_rerank") and parts[1].strip().isdigit():
            total += int(parts[1])
    return total / 1000


def one_round(checkout: Path, env: dict[str, str]) -> dict[str, float]:
    python = sys.executable
    alone = f"import sys; sys.path.insert(0, {str(checkout)!r}); {IMPORTS}"
    bare_s, _ = spent([python, "-S", "-c", "import sys"], env)
    _, err_s = spent([python, "-S", "-X", "importtime", "-c", alone], env)
    full_s, _ = spent([python, "-S", "-c", alone], env)
    bare, _ = spent([python, "-c", "pass"], env)
    _, err = spent([python, "-X", "importtime", "-c", IMPORTS], env)
    full, _ = spent([python, "-c", IMPORTS], env)
    return {"cpu_nosite": (full_s - bare_s) * 1000, "it_nosite": import_ms(err_s),
            "cpu_site": (full - bare) * 1000, "it_site": import_ms(err)}


def loaded(checkout: Path, env: dict[str, str]) -> list[str]:
    code = (f"import sys; sys.path.insert(0, {str(checkout)!r}); was = set(sys.modules); "
            f"{IMPORTS}; print(' '.join(sorted(m for m in set(sys.modules) - was "
            "if not m.startswith('slm_rerank'))))")
    done = subprocess.run([sys.executable, "-S", "-c", code], env=env, capture_output=True,
                          text=True, check=True)
    return done.stdout.split()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--before", type=Path, required=True)
    parser.add_argument("--after", type=Path, default=Path(__file__).resolve().parents[2])
    parser.add_argument("--runs", type=int, default=30)
    args = parser.parse_args()
    if (Path.cwd() / "slm_rerank").is_dir():
        parser.error("run it from a folder without slm_rerank in it (cd /tmp)")
    sides = {"before": args.before.resolve(), "after": args.after.resolve()}
    base = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    rows: dict[str, list[dict[str, float]]] = {side: [] for side in sides}
    for i in range(args.runs):
        for side in (("before", "after") if i % 2 == 0 else ("after", "before")):
            rows[side].append(one_round(sides[side], {**base, "PYTHONPATH": str(sides[side])}))
    print(f"{args.runs} rounds, load average {os.getloadavg()[0]:.1f} at the end\n")
    print("| checkout | CPU ms, no site | importtime ms, no site | CPU ms, with site | "
          "importtime ms, with site | standard-library modules loaded (no site) |")
    print("| --- | ---: | ---: | ---: | ---: | --- |")
    for side, path in sides.items():
        med = {k: statistics.median(r[k] for r in rows[side]) for k in rows[side][0]}
        names = loaded(path, {**base, "PYTHONPATH": str(path)})
        print(f"| {side} | {med['cpu_nosite']:.1f} | {med['it_nosite']:.1f} | "
              f"{med['cpu_site']:.1f} | {med['it_site']:.1f} | {len(names)}: "
              f"{' '.join(names)} |")
    ratio = statistics.median(a["cpu_nosite"] / b["cpu_nosite"]
                              for a, b in zip(rows["after"], rows["before"], strict=True))
    print(f"\nCPU without site, after/before pair by pair: {ratio:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
