"""A model query on a full disk: the real server judges, the score cache steps aside."""

from __future__ import annotations

import json
import resource
import subprocess
from pathlib import Path

from search_fixtures import CLI, make_repo

FILES = {
    "net/retry.py": "def retry_backoff(attempt):\n    return 2 ** attempt\n",
    "net/client.py": "from net.retry import retry_backoff\n\ndef get(url):\n    return url\n",
}


def full_disk() -> None:
    """In the child: every write to a regular file fails (EFBIG), as on a full disk."""
    resource.setrlimit(resource.RLIMIT_FSIZE, (0, resource.RLIM_INFINITY))


def test_a_model_query_on_a_full_disk_is_judged_and_warns_once_about_the_cache(
        tmp_path: Path, llama_server) -> None:  # type: ignore[no-untyped-def]
    repo = make_repo(tmp_path / "repo", FILES)

    # stdout and stderr are pipes, which the limit does not touch
    run = subprocess.run(
        [str(CLI), "-q", "retry backoff", "--format", "json", "-e", llama_server.base_url,
         "--rerank-top", "2", "--threshold", "0"], cwd=repo, capture_output=True, text=True,
        stdin=subprocess.DEVNULL, preexec_fn=full_disk, timeout=300)

    assert run.returncode == 0, run.stderr
    doc = json.loads(run.stdout)
    assert doc["degraded"] is None and doc["model"]["scored"] == 2
    cache = [w for w in doc["warnings"] if w.startswith("score cache ")]
    assert len(cache) == 1 and "the disk is full or failing" in cache[0]
    assert "cache clear" not in run.stderr
    assert sum("score cache " in line for line in run.stderr.splitlines()) == 1
