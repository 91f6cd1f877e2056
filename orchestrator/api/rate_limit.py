"""The request-rate limit of `orchestrator serve`: a token bucket per key, in memory.

Each key (`Identity.key_id`) may send `per_minute` requests at once, and one
more each `60 / per_minute` seconds after: a burst of a minute's worth, then a
steady rate. The buckets live in the server's process (one server counts its
own requests; several behind one proxy each allow the rate).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass

from orchestrator.errors import RateLimitedError

LIMITED = "too many requests for key {key_id}: at most {per_minute} a minute; try again in {wait} s"
# A bucket untouched for a minute is full again: it is dropped, so idle keys cost no memory.
FULL_AFTER_SECONDS = 60.0


@dataclass
class _Bucket:
    tokens: float
    at: float


class RateLimit:
    """Allows each key `per_minute` requests a minute; `clock` gives seconds (monotonic)."""

    def __init__(self, per_minute: int, *, clock: Callable[[], float] = time.monotonic) -> None:
        if per_minute < 1:
            raise ValueError("per_minute must be at least 1")
        self.per_minute = per_minute
        self._per_second = per_minute / 60.0
        self._clock = clock
        self._buckets: dict[str, _Bucket] = {}
        self._swept_at = clock()

    def take(self, key_id: str) -> None:
        """Count one request of `key_id`, or raise `RateLimitedError` with the seconds to wait."""
        now = self._clock()
        self._sweep(now)
        bucket = self._buckets.get(key_id)
        if bucket is None:
            bucket = self._buckets[key_id] = _Bucket(float(self.per_minute), now)
        bucket.tokens = min(float(self.per_minute), bucket.tokens + (now - bucket.at) * self._per_second)
        bucket.at = now
        if bucket.tokens >= 1.0:
            bucket.tokens -= 1.0
            return
        wait = (1.0 - bucket.tokens) / self._per_second
        raise RateLimitedError(
            LIMITED.format(key_id=key_id, per_minute=self.per_minute, wait=math.ceil(wait)), retry_after=wait
        )

    def _sweep(self, now: float) -> None:
        if now - self._swept_at < FULL_AFTER_SECONDS:
            return
        self._swept_at = now
        for key_id in [k for k, b in self._buckets.items() if now - b.at >= FULL_AFTER_SECONDS]:
            del self._buckets[key_id]
