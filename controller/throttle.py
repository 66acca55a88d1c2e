"""The pace of the controller's requests: the client-side rate limit and pauses after failures.

A token bucket, like client-go's, enforces --apiserver-qps-throttle: a full bucket lets a short
burst through at once, then requests go out at the steady rate, so a large fan-out cannot swamp
the API server whatever the number of workers. A rate of 0 turns the limit off, for clusters
whose API server protects itself (API Priority and Fairness) and operators who want the
server's pace rather than the client's. Growing pauses keep a failing call (a watch, a
write the server keeps refusing) from turning into a tight loop.
"""

from __future__ import annotations

import threading
import time


class Throttle:
    """Allows ``qps`` requests a second on average and ``burst`` at once (any number when
    ``qps`` is 0); shared by threads."""

    def __init__(self, qps: float, burst: int) -> None:
        if qps < 0:
            raise ValueError(f"the request rate must not be negative, not {qps}")
        self._rate = qps
        self._capacity = float(max(1, burst))
        self._tokens = self._capacity
        self._last = time.monotonic()
        self._lock = threading.Lock()

    @classmethod
    def for_qps(cls, qps: float) -> Throttle:
        """The Go Accurate's setting: a burst of one and a half seconds' worth of requests."""
        return cls(qps, int(qps * 1.5))

    def least_time(self, requests: int) -> float:
        """How long ``requests`` take at the least from a full bucket: what the limit alone
        costs a fan-out of that size."""
        return max(0.0, requests - self._capacity) / self._rate if self._rate else 0.0

    def wait(self, stop: threading.Event) -> bool:
        """Block until a request may go out; False when ``stop`` was set while waiting."""
        if not self._rate:
            return not stop.is_set()
        while True:
            with self._lock:
                now = time.monotonic()
                self._tokens = min(self._capacity, self._tokens + (now - self._last) * self._rate)
                self._last = now
                if self._tokens >= 1:
                    self._tokens -= 1
                    return True
                pause = (1 - self._tokens) / self._rate
            if stop.wait(pause):
                return False


class Backoff:
    """Pauses that double after each failure, from ``first`` up to ``limit`` seconds."""

    def __init__(self, first: float, limit: float) -> None:
        self.first = first
        self.limit = limit
        self._next = first

    def next(self) -> float:
        pause, self._next = self._next, min(self._next * 2, self.limit)
        return pause

    def reset(self) -> None:
        self._next = self.first
