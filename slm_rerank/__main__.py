"""``python -m slm_rerank``: the `slm-rerank` command, where its script cannot be run (a
system without ``#!`` lines)."""

from slm_rerank.cli import main

if __name__ == "__main__":
    main()
