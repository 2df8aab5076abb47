"""The managed llama-server: ``slm-rerank serve`` and the bundled binary and model."""
