"""Every test: the user's config, cache, plugins and environment names kept out."""

from slm_rerank.testing.isolation import isolated_home  # noqa: F401
