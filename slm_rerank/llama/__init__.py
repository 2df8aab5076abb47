"""The managed llama-server: ``slm-rerank serve``, the server ``--local`` starts, the bundled
binary and model.

Modules, lowest first: ``state`` (the files in ``<cache>/serve/``), ``ports`` (probing a
port), ``bundled`` (the binary and the GGUF), ``processes`` (which pids are ours),
``supervisor`` (running llama-server), ``control`` (start detached, status, stop),
``__main__`` (the detached supervisor's entry point); beside them
``judge_model`` (the judge GGUF, fetched into the cache only on request).
"""
