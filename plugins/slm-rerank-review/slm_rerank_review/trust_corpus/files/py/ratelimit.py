"""A token-bucket rate limiter for outgoing API calls.

Each client key gets its own bucket; buckets refill continuously at ``rate`` tokens per
second up to ``capacity``. Callers that find the bucket empty are told how long to wait.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field


@dataclass
class Bucket:
    capacity: float
    rate: float
    tokens: float = 0.0
    updated: float = field(default_factory=time.monotonic)

    def refill(self, now: float) -> None:
        elapsed = now - self.updated
        if elapsed <= 0:
            return
        self.tokens = min(self.capacity, self.tokens + elapsed * self.rate)
        self.updated = now


class RateLimiter:
    """Per-key token buckets behind one lock."""

    def __init__(self, capacity: float, rate: float, clock=time.monotonic) -> None:
        if rate <= 0:
            raise ValueError(f"rate must be positive, got {rate!r}")
        self._capacity = capacity
        self._rate = rate
        self._clock = clock
        self._buckets: dict[str, Bucket] = {}
        self._lock = threading.Lock()

    def _bucket(self, key: str) -> Bucket:
        bucket = self._buckets.get(key)
        if bucket is None:
            bucket = Bucket(self._capacity, self._rate, tokens=self._capacity,
                            updated=self._clock())
            self._buckets[key] = bucket
        return bucket

    def acquire(self, key: str, cost: float = 1.0) -> float:
        """Take ``cost`` tokens for ``key``; return 0.0, or the seconds to wait first."""
        with self._lock:
            bucket = self._bucket(key)
            bucket.refill(self._clock())
            if bucket.tokens >= cost:
                bucket.tokens -= cost
                return 0.0
            missing = cost - bucket.tokens
            return missing / self._rate

    def forget_idle(self, idle_seconds: float) -> int:
        """Drop buckets untouched for ``idle_seconds``; return how many were dropped."""
        now = self._clock()
        with self._lock:
            stale = [key for key, bucket in self._buckets.items()
                     if now - bucket.updated > idle_seconds]
            for key in stale:
                del self._buckets[key]
        return len(stale)
