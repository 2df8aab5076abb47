"""The Python API in a long-lived process: from its second ``slm_rerank.search``, the
process builds the ripgrep source's word index between calls (a daemon thread,
``slm_rerank.idle_work``), and later searches of the whole tree answer from it as they would
without it; a one-shot script starts no thread, and a script that ends while the thread
builds ends at once.

Each scenario runs in a process of its own (the tests' isolation keeps the thread off in
pytest's: ``SLM_RERANK_IDLE_THREAD=0``); rg's matching pass is counted by wrapping the
ripgrep source's ``_start_matching`` in that process.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from search_fixtures import write_tree

import slm_rerank

SCRIPT = """\
import json, os, sys, threading, time
from pathlib import Path
import slm_rerank, slm_rerank_ripgrep
from slm_rerank_ripgrep import word_index

root, mode = Path(sys.argv[1]), sys.argv[2]
passes = []
real = slm_rerank_ripgrep._start_matching
def counted(*args):
    passes.append(1)
    return real(*args)
slm_rerank_ripgrep._start_matching = counted

def idle_thread():
    return any(t.name == "slm-rerank-idle-work" for t in threading.enumerate())

def places():
    del passes[:]
    report = slm_rerank.search("retry backoff", root, fast=True)
    return {"places": [[c.path, c.start_line, c.end_line, round(c.score, 9)]
                       for c in report.results], "passes": len(passes)}

out = {"first": places(), "thread_after_first": idle_thread()}
if mode == "once":
    time.sleep(0.5)
    out["indexed"] = word_index.indexed(root)
    print(json.dumps(out))
    sys.exit(0)
out["second"] = places()
if mode == "leave":  # the build under way: the script ends here
    out["thread_at_exit"] = idle_thread()
    print(json.dumps(out))
    sys.exit(0)
for _ in range(2000):
    if word_index.indexed(root) and not idle_thread():
        break
    time.sleep(0.01)
out["indexed"] = word_index.indexed(root)
out["third"] = places()
retry = root / "src/net/retry.py"
before = retry.stat()
retry.write_text(retry.read_text().replace("backoff", "BACKOF_").replace("retry", "rerun"))
os.utime(retry, ns=(before.st_atime_ns, before.st_mtime_ns))
out["edited"] = places()
print(json.dumps(out))
"""


def run(root: Path, mode: str, **env: str) -> dict[str, Any]:
    environ = {k: v for k, v in os.environ.items() if k != "SLM_RERANK_IDLE_THREAD"}
    done = subprocess.run([sys.executable, "-c", SCRIPT, str(root), mode],
                          env={**environ, **env}, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def here(root: Path) -> list[list[Any]]:
    """The answer of a search in this process, which never builds an index."""
    report = slm_rerank.search("retry backoff", root, fast=True)
    return [[c.path, c.start_line, c.end_line, round(c.score, 9)] for c in report.results]


def test_from_the_second_search_the_index_is_built_and_answers_as_without_it(
        repo: Path) -> None:
    out = run(repo, "long")

    assert out["first"]["passes"] == 1 and not out["thread_after_first"]
    assert out["second"]["passes"] == 1  # the index is built after it
    assert out["indexed"]
    assert out["third"]["passes"] == 0  # answered from the index
    assert out["third"]["places"] == out["second"]["places"] == out["first"]["places"]
    assert out["edited"]["passes"] == 0
    assert out["edited"]["places"] != out["first"]["places"]
    assert out["edited"]["places"] == here(repo)  # the edit seen, as without the index


def test_a_one_shot_script_starts_no_thread_and_builds_nothing(repo: Path) -> None:
    out = run(repo, "once")

    assert not out["thread_after_first"] and not out["indexed"]


def test_idle_thread_0_keeps_the_api_from_building_the_index(repo: Path) -> None:
    out = run(repo, "long", SLM_RERANK_IDLE_THREAD="0")

    assert not out["indexed"]
    assert out["third"]["passes"] == 1 and out["edited"]["passes"] == 1
    assert out["edited"]["places"] == here(repo)


def test_a_script_ending_while_the_index_is_built_ends_at_once(tmp_path: Path) -> None:
    files: dict[str, str | bytes] = {
        f"pkg{n % 20}/mod{n}.py": " ".join(f"word{(n * 7 + k) % 5000}" for k in range(200))
        + (" retry backoff\n" if n % 50 == 0 else "\n") for n in range(4000)}
    root = write_tree(tmp_path / "big", files)

    out = run(root, "leave")  # the subprocess's timeout: a process that waited would fail

    assert out["second"]["passes"] == 1
    assert out["thread_at_exit"]  # it was building when the script ended
