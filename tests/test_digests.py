"""The package's digests are ``hashlib``'s, made without loading OpenSSL (``digests.py``)."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

from slm_rerank import digests, plugin_kit


@pytest.mark.parametrize("data", [b"", b"abc", bytes(range(256)) * 999, "é\udcff".encode(
    "utf-8", "surrogateescape")])
def test_each_digest_is_the_one_hashlib_makes(data: bytes) -> None:
    # a cache key or content check written before is found again
    assert digests.sha256(data).hexdigest() == hashlib.sha256(data).hexdigest()
    assert (digests.blake2b(data, digest_size=16).digest()
            == hashlib.blake2b(data, digest_size=16).digest())
    grown = digests.sha256()
    grown.update(data)
    grown.update(b"more")
    assert grown.hexdigest() == hashlib.sha256(data + b"more").hexdigest()
    assert plugin_kit.sha256 is digests.sha256 and plugin_kit.blake2b is digests.blake2b


def test_the_warm_process_loads_no_openssl_for_what_it_preloads(tmp_path: Path) -> None:
    # OpenSSL's library is 3.6 MiB of the worker's resident memory (issue 30)
    probe = ("import sys\nfrom slm_rerank.warm_process import server\nserver._preload()\n"
             "print(sorted(m for m in ('hashlib', '_hashlib', 'ssl') if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          timeout=120, cwd=tmp_path,
                          env={"HOME": str(tmp_path), "PATH": os.environ["PATH"],
                               "SLM_RERANK_CACHE_DIR": str(tmp_path / "cache"),
                               "XDG_CONFIG_HOME": str(tmp_path / "config")})
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "[]", done.stdout + done.stderr
