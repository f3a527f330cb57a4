"""Rate limits that hold under concurrent bursts.

DRF's ``SimpleRateThrottle`` reads a request history from the cache, checks it and writes it back: two requests
arriving together both read the same history and both pass (a burst of 25 token creations against a 20/min limit
let 25 through). Here every request *claims a slot* with the cache's atomic ``add`` — Redis ``SET NX`` in full
mode, an ``INSERT`` on the cache table's primary key otherwise — so of N concurrent requests exactly
``num_requests`` claim a slot and the others are refused. Each slot expires ``duration`` seconds after it was
claimed, which makes the limit a sliding window: at most ``num_requests`` requests in any ``duration`` seconds.

Limits above :data:`MAX_SLOTS` requests per period (not used by this service) fall back to a fixed-window counter
(``add`` + ``incr``: atomic on Redis, best effort on the database cache). The database cache's ``add`` also answers
False when the database is busy (SQLite under a burst): a slot that is still free afterwards is tried again, so a
burst is neither let through nor refused below the limit.
"""

from __future__ import annotations

import random
import time
from typing import Any

from rest_framework.throttling import ScopedRateThrottle, SimpleRateThrottle

MAX_SLOTS = 64
BUSY_RETRIES = 20  # the database cache's add() answers False, like a taken slot, when SQLite is busy


class AtomicRateThrottleMixin:
    """``allow_request`` for a :class:`SimpleRateThrottle` whose cache key is set: atomic slots, sliding window."""

    cache: Any
    timer: Any
    num_requests: int | None
    duration: int | None
    key: str | None

    def claim(self, key: str) -> bool:
        limit, duration = int(self.num_requests or 0), int(self.duration or 1)
        now = float(self.timer())
        self.wait_s: float | None = None
        if limit > MAX_SLOTS:
            window = int(now // duration)
            counter = f"{key}:w{window}"
            self.cache.add(counter, 0, timeout=duration + 1)
            count = int(self.cache.incr(counter))
            if count <= limit:
                return True
            self.wait_s = (window + 1) * duration - now
            return False
        start = random.randrange(limit) if limit else 0  # spread concurrent claims over the slots
        for i in range(limit):
            slot = f"{key}:s{(start + i) % limit}"
            for attempt in range(BUSY_RETRIES):
                if self.cache.add(slot, now, timeout=duration):
                    return True
                if self.cache.get(slot) is not None:
                    break  # taken: try the next slot
                time.sleep(0.002 * (attempt + 1))  # add() failed on a busy database (SQLite): try this slot again
        claimed = [float(v) for v in self.cache.get_many([f"{key}:s{i}" for i in range(limit)]).values()]
        self.wait_s = max(1.0, min(claimed) + duration - now) if claimed else float(duration)
        return False

    def wait(self) -> float | None:
        return getattr(self, "wait_s", None)


class AtomicSimpleRateThrottle(AtomicRateThrottleMixin, SimpleRateThrottle):
    def allow_request(self, request: Any, view: Any) -> bool:
        if self.rate is None:
            return True
        self.key = self.get_cache_key(request, view)
        return True if self.key is None else self.claim(self.key)


class AtomicScopedRateThrottle(AtomicRateThrottleMixin, ScopedRateThrottle):
    """DRF's :class:`ScopedRateThrottle` (``throttle_scope`` on the view, rates in ``DEFAULT_THROTTLE_RATES``, one
    budget per user and scope) with atomic slots."""

    def allow_request(self, request: Any, view: Any) -> bool:
        self.scope = getattr(view, self.scope_attr, None)
        if not self.scope:
            return True
        self.rate = self.get_rate()
        self.num_requests, self.duration = self.parse_rate(self.rate)
        self.key = self.get_cache_key(request, view)
        return True if self.key is None else self.claim(self.key)
