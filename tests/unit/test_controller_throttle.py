"""A rate-limit bucket's waiters (issue 31, point 4): tokens go out in the order the requests
came, urgent ones first, at the rate and burst asked for, and a stopped wait neither loses a
token nor lets an extra one through. Real threads wait on the bucket; the time is a clock the
test moves, so what is asserted is an order, never a duration."""

from __future__ import annotations

import threading

from accurate_testbed.waiting import wait_for
from controller.throttle import Throttle


class ManualClock:
    """Time that moves only when the test moves it; a sleeper wakes once its time has come or
    its stop event is set (then the test moves the clock by nothing to wake it)."""

    def __init__(self) -> None:
        self._now = 0.0
        self._changed = threading.Condition()
        self.sleepers = 0

    def __call__(self) -> float:
        with self._changed:
            return self._now

    def sleep(self, stop: threading.Event, seconds: float) -> bool:
        with self._changed:
            until = self._now + seconds
            self.sleepers += 1
            while self._now < until and not stop.is_set():
                self._changed.wait()
            self.sleepers -= 1
            return stop.is_set()

    def advance(self, seconds: float) -> None:
        with self._changed:
            self._now += seconds
            self._changed.notify_all()


class Waiters:
    """Threads that each wait once on one bucket, noting who got a token, in turn."""

    def __init__(self, bucket: Throttle, clock: ManualClock) -> None:
        self.bucket = bucket
        self.clock = clock
        self.served: list[str] = []
        self.refused: list[str] = []

    def start(self, name: str, urgent: bool = False, stop: threading.Event | None = None) -> None:
        """Start a waiter and return once it sleeps at the bucket (its slot is taken)."""
        asleep = self.clock.sleepers + 1
        stop = stop or threading.Event()
        threading.Thread(target=self._wait, args=(name, urgent, stop), daemon=True).start()
        wait_for(lambda: self.clock.sleepers == asleep, what=f"{name} waiting")

    def _wait(self, name: str, urgent: bool, stop: threading.Event) -> None:
        (self.served if self.bucket.wait(stop, urgent) else self.refused).append(name)

    def after(self, seconds: float, count: int) -> list[str]:
        """Who has had a token once the clock has moved on by ``seconds`` and ``count`` have."""
        self.clock.advance(seconds)
        wait_for(lambda: len(self.served) >= count, what=f"{count} served")
        return list(self.served)


def _bucket(qps: float, burst: int) -> tuple[Throttle, ManualClock]:
    clock = ManualClock()
    return Throttle(qps, burst, clock, clock.sleep), clock


def test_waiters_get_tokens_in_the_order_they_came() -> None:
    bucket, clock = _bucket(1, 1)
    assert bucket.wait(threading.Event())
    waiters = Waiters(bucket, clock)
    names = ["a", "b", "c", "d", "e", "f"]
    for name in names:
        waiters.start(name)
    for count in range(1, len(names) + 1):
        assert waiters.after(1, count) == names[:count]


def test_the_burst_goes_at_once_then_the_rate_holds_and_a_full_bucket_holds_no_more() -> None:
    """``stop`` is set, so a request that would have to wait is refused (its token given back)
    instead of waited for."""
    bucket, clock = _bucket(2, 3)
    refuse = threading.Event()
    refuse.set()
    assert [bucket.wait(refuse) for _ in range(4)] == [True, True, True, False]
    clock.advance(0.5)
    assert [bucket.wait(refuse) for _ in range(2)] == [True, False]
    clock.advance(0.25)
    assert not bucket.wait(refuse)
    clock.advance(0.25)
    assert bucket.wait(refuse)
    clock.advance(100)
    assert [bucket.wait(refuse) for _ in range(4)] == [True, True, True, False]


def test_an_urgent_request_goes_before_the_bulk_ones_waiting_and_after_urgent_ones() -> None:
    bucket, clock = _bucket(1, 1)
    assert bucket.wait(threading.Event())
    waiters = Waiters(bucket, clock)
    waiters.start("bulk 1")
    waiters.start("bulk 2")
    waiters.start("urgent 1", urgent=True)
    waiters.start("bulk 3")
    waiters.start("urgent 2", urgent=True)
    order = ["urgent 1", "urgent 2", "bulk 1", "bulk 2", "bulk 3"]
    for count in range(1, len(order) + 1):
        assert waiters.after(1, count) == order[:count]


def test_a_stopped_wait_gives_its_slot_to_the_next_request_and_no_more() -> None:
    """The first waiter is stopped while a second waits behind it: a third, arriving then,
    has the first's token, the second keeps its own, and no token is left over for a fourth."""
    bucket, clock = _bucket(1, 1)
    assert bucket.wait(threading.Event())
    waiters = Waiters(bucket, clock)
    stop = threading.Event()
    waiters.start("stopped", stop=stop)
    waiters.start("second")
    stop.set()
    clock.advance(0)
    wait_for(lambda: waiters.refused == ["stopped"], what="the stop")
    waiters.start("third")
    assert waiters.after(1, 1) == ["third"]
    assert waiters.after(1, 2) == ["third", "second"]
    refuse = threading.Event()
    refuse.set()
    assert not bucket.wait(refuse)
    clock.advance(1)
    assert bucket.wait(refuse)


def test_a_stop_ends_a_wait_at_once_and_refuses_the_request() -> None:
    """On the real clock, at one request in a thousand seconds."""
    sleeping = threading.Event()

    def sleep(stop: threading.Event, seconds: float) -> bool:
        sleeping.set()
        return stop.wait(seconds)

    bucket = Throttle(0.001, 1, sleep=sleep)
    stop = threading.Event()
    assert bucket.wait(stop)
    answers: list[bool] = []
    waiter = threading.Thread(target=lambda: answers.append(bucket.wait(stop)), daemon=True)
    waiter.start()
    sleeping.wait(10)
    stop.set()
    waiter.join(10)
    assert not waiter.is_alive()
    assert answers == [False]
