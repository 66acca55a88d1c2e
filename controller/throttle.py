"""The pace of the controller's requests: the client-side rate limit and pauses after failures.

--apiserver-qps-throttle is applied as the Go controller applies it: controller-runtime gives
each resource kind a client of its own, and client-go gives each client a token bucket of its
own, so the limit holds per kind (Namespaces, SubNamespaces, each watched kind, Events), not
for the controller as a whole. A full bucket lets a short burst through at once, then requests
of that kind go out at the steady rate. Unset (0, the default since the Go controller of
2026-04), there is no client-side limit: the API server's priority and fairness sets the pace,
as controller-runtime leaves it. Growing pauses keep a failing call (a watch, a write the
server keeps refusing) from turning into a tight loop.

A bucket serves its waiters in the order they came, as client-go's limiter
(golang.org/x/time/rate ``Wait``) does: each request takes a slot, the time of its token, as it
arrives (the bucket may go below empty) and sleeps until then. Waking first wins nothing, so
the writers at one bucket send in the order they took their requests, and a namespace's last
copy, and its status with it, is not overtaken by later namespaces' copies. Two rules of ours:

- An urgent request (the SubNamespace lane's) takes the earliest slot not yet due that a bulk
  request holds, behind the urgent ones already waiting; that bulk request and each one after
  it move back by one slot, the last into a new slot at the end. A slot already due is never
  taken away, and the rate and the burst hold: the slots are the same plus one at the end.
- A stopped wait gives its slot back. If nobody holds a slot after it, its token goes back into
  the bucket (as ``rate.Reservation.Cancel`` does). Otherwise the waiters asleep behind it keep
  their slots (moving them earlier would mean waking them, and they sleep on the caller's stop
  event alone) and the freed slot goes to the next request to arrive before it is due; one
  left unclaimed passes as a token nobody asked for does. So a stopped wait delays nobody and
  lets no extra request through. The controller stops waits only when it stops altogether.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(eq=False)
class _Waiter:
    """A request waiting at a bucket, and when its token comes."""

    urgent: bool
    at: float


@dataclass(eq=False)
class _Slot:
    """A token's time, held by a waiting request or freed by a stopped one (``None``)."""

    at: float
    holder: _Waiter | None


class Throttle:
    """Allows ``qps`` requests a second on average and ``burst`` at once (any number when
    ``qps`` is 0), to waiters in the order they came, urgent ones first; shared by threads.
    ``clock`` and ``sleep`` (True when ``stop`` was set) are the real ones but in tests."""

    def __init__(
        self,
        qps: float,
        burst: int,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[threading.Event, float], bool] = threading.Event.wait,
    ) -> None:
        if qps < 0:
            raise ValueError(f"the request rate must not be negative, not {qps}")
        self._rate = qps
        self._capacity = float(max(1, burst))
        self._clock = clock
        self._sleep = sleep
        # What the bucket holds as of ``_last`` less the slots given out: below zero while
        # requests wait.
        self._tokens = self._capacity
        self._last = clock()
        self._lock = threading.Lock()
        # The slots given out and not yet used, in time order.
        self._slots: list[_Slot] = []

    @classmethod
    def for_qps(cls, qps: float) -> Throttle:
        """The Go Accurate's setting: a burst of one and a half seconds' worth of requests."""
        return cls(qps, int(qps * 1.5))

    def least_time(self, requests: int) -> float:
        """How long ``requests`` take at the least from a full bucket: what the limit alone
        costs a fan-out of that size."""
        return max(0.0, requests - self._capacity) / self._rate if self._rate else 0.0

    def wait(self, stop: threading.Event, urgent: bool = False) -> bool:
        """Block until this request's token comes; False when ``stop`` was set first (the
        token is then given back). An ``urgent`` request goes before the bulk ones waiting,
        so that a long pass of the same kind does not hold it up."""
        if not self._rate:
            return not stop.is_set()
        with self._lock:
            waiter = self._arrive(urgent)
        while True:
            with self._lock:
                # Read each time round: an urgent request may have pushed it back.
                pause = waiter.at - self._clock()
                if pause <= 0:
                    self._slots = [slot for slot in self._slots if slot.holder is not waiter]
                    return True
            if self._sleep(stop, pause):
                with self._lock:
                    self._give_back(waiter)
                return False

    def _refill(self) -> float:
        """Bring the bucket up to now, dropping freed slots nobody claimed in time."""
        now = self._clock()
        self._tokens = min(self._capacity, self._tokens + (now - self._last) * self._rate)
        self._last = now
        self._slots = [slot for slot in self._slots if slot.holder or slot.at > now]
        return now

    def _arrive(self, urgent: bool) -> _Waiter:
        """The waiter of a new request, in the first slot not yet due that it may take (a
        freed one; for an urgent request also one a bulk request holds), else in a new one."""
        now = self._refill()
        waiter = _Waiter(urgent, now)
        carried: _Waiter | None = waiter
        # Once a bulk waiter is pushed back, it pushes back each bulk waiter after it in turn.
        pushing = urgent
        for slot in self._slots:
            if carried is None:
                break
            taken = slot.holder
            if slot.at > now and (taken is None or (pushing and not taken.urgent)):
                carried.at = slot.at
                carried, slot.holder = taken, carried
        if carried is not None:
            self._tokens -= 1
            carried.at = now + max(0.0, -self._tokens) / self._rate
            if carried.at > now:
                self._slots.append(_Slot(carried.at, carried))
        return waiter

    def _give_back(self, waiter: _Waiter) -> None:
        """Free the slot of a stopped ``waiter``: back into the bucket when it and the freed
        ones after it are the last, else for the next request to arrive."""
        self._refill()
        for slot in self._slots:
            if slot.holder is waiter:
                slot.holder = None
        while self._slots and self._slots[-1].holder is None:
            self._slots.pop()
            self._tokens = min(self._capacity, self._tokens + 1)


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
