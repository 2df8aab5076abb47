#!/usr/bin/env python3
"""How long the Python API's idle-work thread takes to build the word index of ROOT, and
how much the process grows: two searches (the second asks for the build), then waiting
for the thread to end.

    python tests/bench/idle_index_build.py ROOT
"""

import os
import sys
import threading
import time

from slm_rerank_ripgrep import word_index

import slm_rerank

root = sys.argv[1]


def rss() -> float:
    return int(open("/proc/self/statm").read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


q = "matrix determinant bareiss"
slm_rerank.search(q, root, fast=True)
before = rss()
c0 = time.process_time()
t0 = time.monotonic()
slm_rerank.search(q, root, fast=True)
while any(t.name == "slm-rerank-idle-work" for t in threading.enumerate()):
    time.sleep(0.005)
print(f"second call + build: {time.monotonic() - t0:.2f} s wall, "
      f"{time.process_time() - c0:.2f} s CPU; rss {before:.1f} -> {rss():.1f} MiB; "
      f"{word_index.summary()}")
