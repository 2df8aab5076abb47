"""The Claude Code prompt hook (``slm-rerank hook claude-prompt``), no click inside.

Modules: ``claude`` (the hook: its input, plan, search and output, always exit 0),
``stdio`` (stdin read within the deadline, stderr one line), ``prompt_classifier`` (a code
question or not) and ``vocabulary`` (a repository's words, cached).
"""
