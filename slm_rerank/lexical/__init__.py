"""The lexical stage: query terms, scope, which files count, tool output, chunks, scores."""
