"""The misbehaving servers live in ``slm_rerank.testing.servers`` (a plugin's tests use
them too); the host's tests import them by this name."""

from slm_rerank.testing.servers import Misbehaving, gzip_bomb, misbehaving_server  # noqa: F401
