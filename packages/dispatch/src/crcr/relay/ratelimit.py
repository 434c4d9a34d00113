"""A per-repository sliding-window rate limit, as the relay applies to callbacks (about 60 a minute upstream)."""

from __future__ import annotations

import math
import threading
import time
from collections import defaultdict, deque
from collections.abc import Callable


class SlidingWindow:
    """At most `limit` requests per `window` seconds per key; a refused request does not count."""

    def __init__(self, limit: int, window: float = 60.0, clock: Callable[[], float] = time.monotonic) -> None:
        self.limit = limit
        self.window = window
        self.clock = clock
        self._seen: defaultdict[str, deque[float]] = defaultdict(deque)
        self._lock = threading.Lock()

    def admit(self, key: str) -> int | None:
        """Count one request for `key`; None if admitted, else the whole seconds until one would be (Retry-After)."""
        now = self.clock()
        with self._lock:
            seen = self._seen[key]
            while seen and seen[0] <= now - self.window:
                seen.popleft()
            if len(seen) >= self.limit:
                return max(1, math.ceil(seen[0] + self.window - now))
            seen.append(now)
            return None
