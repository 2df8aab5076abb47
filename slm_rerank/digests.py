"""The two digests the package takes (cache keys, content checks), without ``hashlib``.

``hashlib`` loads OpenSSL's library as it is imported, for digests Python also builds in:
3.6 MiB of a warm worker's resident memory and about 5 ms of each command's start here
(issue 30: a worker within 64 MB). These are Python's own ``sha256`` and ``blake2b``; a
digest is the same whichever makes it, so no cache written before is lost. Where Python
was built without them, ``hashlib``'s are used. (The judge model's download is checked with
``hashlib``'s: over a GB file OpenSSL's is several times faster, and no search loads it.)
"""

from __future__ import annotations

try:
    from _blake2 import blake2b  # type: ignore[import-not-found,unused-ignore]
except ImportError:  # pragma: no cover - a Python built without its own blake2
    from hashlib import blake2b  # type: ignore[assignment,unused-ignore]
try:
    from _sha2 import sha256  # type: ignore[import-not-found,unused-ignore]  # 3.12+
except ImportError:
    try:
        from _sha256 import sha256  # type: ignore[import-not-found,no-redef,unused-ignore]
    except ImportError:  # pragma: no cover - a Python built without its own sha256
        from hashlib import sha256  # type: ignore[assignment,unused-ignore]

__all__ = ["blake2b", "sha256"]
