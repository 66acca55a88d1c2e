"""Hands the applier's requests to its writer threads: one queue per resource kind, the kinds
taken in turn, so that every kind's rate-limit bucket works at the same time.

With ``--apiserver-qps-throttle`` each kind has a bucket of its own (controller.throttle). One
queue for everything sent the writes in plan order, so the writers all waited on the bucket of
whatever kind came next in it while the others' sat idle: a namespace's status went out only
after every copy queued before it. Here a free writer takes the oldest request of the kind that
has the fewest requests in flight (of those tied, the one served longest ago): a kind with
work waiting always has a writer at its bucket, as long as there are writers for every kind,
and within a kind requests go out in the order given (parents before children). Without a
limit nothing waits on a bucket and the writers simply share the work out.
"""

from __future__ import annotations

import itertools
import threading
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any, TypeVar

T = TypeVar("T")
_Job = tuple[Future[Any], Callable[[], Any]]


class Dispatcher:
    """Runs jobs on ``workers`` threads, each job queued under a kind; shared by threads."""

    def __init__(self, workers: int, name: str) -> None:
        self._queues: dict[str, deque[_Job]] = {}
        self._running: dict[str, int] = {}
        self._served: dict[str, int] = {}
        self._ticks = itertools.count()
        self._changed = threading.Condition()
        self._closed = False
        self._threads = [
            threading.Thread(target=self._work, name=f"{name}_{index}", daemon=True)
            for index in range(workers)
        ]
        for thread in self._threads:
            thread.start()

    def submit(self, kind: str, job: Callable[[], T]) -> Future[T]:
        """Queue ``job`` under ``kind``; its future holds what it returns or raises."""
        future: Future[T] = Future()
        with self._changed:
            if self._closed:
                raise RuntimeError("the dispatcher is closed")
            self._queues.setdefault(kind, deque()).append((future, job))
            self._changed.notify()
        return future

    def close(self) -> None:
        """Run what is queued, then let the threads go."""
        with self._changed:
            self._closed = True
            self._changed.notify_all()
        for thread in self._threads:
            thread.join()

    def _work(self) -> None:
        while (taken := self._take()) is not None:
            kind, (future, job) = taken
            if future.set_running_or_notify_cancel():
                try:
                    future.set_result(job())
                except BaseException as error:
                    # The future carries it to whoever waits for the job.
                    future.set_exception(error)
            with self._changed:
                self._running[kind] -= 1

    def _take(self) -> tuple[str, _Job] | None:
        """The next job for a free thread, waiting for one; None once closed and drained."""
        with self._changed:
            while True:
                waiting = [kind for kind, queue in self._queues.items() if queue]
                if waiting:
                    kind = min(
                        waiting, key=lambda k: (self._running.get(k, 0), self._served.get(k, -1))
                    )
                    self._running[kind] = self._running.get(kind, 0) + 1
                    self._served[kind] = next(self._ticks)
                    return kind, self._queues[kind].popleft()
                if self._closed:
                    return None
                self._changed.wait()
