"""The pace of the controller's requests: the client-side rate limit and pauses after failures.

--apiserver-qps-throttle is applied as the Go controller applies it: controller-runtime gives
each resource kind a client of its own, and client-go gives each client a token bucket of its
own, so the limit holds per kind (Namespaces, SubNamespaces, each watched kind, Events), not
for the controller as a whole. A full bucket lets a short burst through at once, then requests
of that kind go out at the steady rate. Unset (0, the default since the Go controller of
2026-04), there is no client-side limit: the API server's priority and fairness sets the pace,
as controller-runtime leaves it. Growing pauses keep a failing call (a watch, a write the
server keeps refusing) from turning into a tight loop.
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
        # How many urgent requests are waiting: the others let them go first.
        self._urgent = 0

    @classmethod
    def for_qps(cls, qps: float) -> Throttle:
        """The Go Accurate's setting: a burst of one and a half seconds' worth of requests."""
        return cls(qps, int(qps * 1.5))

    def least_time(self, requests: int) -> float:
        """How long ``requests`` take at the least from a full bucket: what the limit alone
        costs a fan-out of that size."""
        return max(0.0, requests - self._capacity) / self._rate if self._rate else 0.0

    def wait(self, stop: threading.Event, urgent: bool = False) -> bool:
        """Block until a request may go out; False when ``stop`` was set while waiting. An
        ``urgent`` request (the SubNamespace lane's) takes the next token before any other
        waiting for it, so that a long pass of the same kind does not hold it up."""
        if not self._rate:
            return not stop.is_set()
        with self._lock:
            self._urgent += urgent
        try:
            while True:
                with self._lock:
                    now = time.monotonic()
                    self._tokens = min(
                        self._capacity, self._tokens + (now - self._last) * self._rate
                    )
                    self._last = now
                    if self._tokens >= 1 and (urgent or not self._urgent):
                        self._tokens -= 1
                        return True
                    # Until the next token, or (giving way to an urgent request) a token's time.
                    pause = (1 - self._tokens if self._tokens < 1 else 1) / self._rate
                if stop.wait(pause):
                    return False
        finally:
            with self._lock:
                self._urgent -= urgent


class Throttles:
    """One ``Throttle`` per resource kind, each allowing ``qps`` requests a second (none at
    all when ``qps`` is 0); made on first use, shared by threads."""

    def __init__(self, qps: float) -> None:
        if qps < 0:
            raise ValueError(f"the request rate must not be negative, not {qps}")
        self.qps = qps
        self._buckets: dict[str, Throttle] = {}
        self._lock = threading.Lock()

    def of(self, resource: str) -> Throttle:
        """The bucket of ``resource`` (a kind's resource name, ``namespaces``, ``events``)."""
        with self._lock:
            found = self._buckets.get(resource)
            if found is None:
                found = self._buckets[resource] = Throttle.for_qps(self.qps)
            return found


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
