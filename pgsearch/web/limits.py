"""Per-token request rates: a token bucket per token, in memory, one per process.

Each token may make `rate` requests per second on average and `burst` at once
(two seconds' worth, at least one), so one busy agent cannot starve the others of
the server's connection pool. Failed token checks are limited the same way per
client address. A refused request is told how long to wait. The
buckets are forgotten after a minute of silence, so the table stays small.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

#: Seconds of a token's rate it may spend at once.
BURST_SECONDS = 2.0
#: A bucket unused this long is dropped (it would be full again anyway).
IDLE_SECONDS = 60.0


@dataclass(slots=True)
class _Bucket:
    tokens: float
    stamp: float


class RateLimiter:
    """Token buckets keyed by token id; `take` is called once per request."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._buckets: dict[str, _Bucket] = {}
        self._swept = clock()

    def take(self, key: str, rate: float) -> float:
        """0.0 when `key` may make a request now (and it is counted), else the
        seconds until it may."""
        bucket = self._refilled(key, rate)
        if bucket.tokens >= 1.0:
            bucket.tokens -= 1.0
            return 0.0
        return (1.0 - bucket.tokens) / rate

    def give_back(self, key: str, rate: float) -> None:
        """Return one request taken from `key` (it turned out not to count)."""
        bucket = self._refilled(key, rate)
        bucket.tokens = min(max(1.0, rate * BURST_SECONDS), bucket.tokens + 1.0)

    def _refilled(self, key: str, rate: float) -> _Bucket:
        now = self._clock()
        if now - self._swept > IDLE_SECONDS:
            self._sweep(now)
        burst = max(1.0, rate * BURST_SECONDS)
        bucket = self._buckets.get(key)
        if bucket is None:
            bucket = self._buckets[key] = _Bucket(tokens=burst, stamp=now)
        else:
            bucket.tokens = min(burst, bucket.tokens + (now - bucket.stamp) * rate)
            bucket.stamp = now
        return bucket

    def _sweep(self, now: float) -> None:
        self._swept = now
        for key in [k for k, b in self._buckets.items() if now - b.stamp > IDLE_SECONDS]:
            del self._buckets[key]
