"""Fault injection and the request log: what tests use to make the server misbehave and to count.

Both are consulted by the HTTP layer for every request, before any API logic runs, so a failed
request has no effect on the stored state, as with a real server that answers 5xx or 429 early.
"""

from __future__ import annotations

import re
import threading
import time
from dataclasses import dataclass

_REASONS = {
    400: "BadRequest",
    403: "Forbidden",
    404: "NotFound",
    409: "Conflict",
    410: "Expired",
    422: "Invalid",
    429: "TooManyRequests",
    500: "InternalError",
    503: "ServiceUnavailable",
    504: "Timeout",
}


@dataclass(frozen=True)
class LoggedRequest:
    """One request as the server saw it; ``verb`` is the Kubernetes verb (list, watch, patch...)."""

    method: str
    path: str
    query: str
    verb: str
    user_agent: str
    user: str
    groups: tuple[str, ...] = ()
    dry_run: bool = False  # as the server reads it: a DELETE's body, when it has one


@dataclass
class _Failure:
    method: str | None
    path: re.Pattern[str]
    status: int
    remaining: int
    message: str


@dataclass
class _Latency:
    method: str | None
    path: re.Pattern[str]
    seconds: float


def reason_for(status: int) -> str:
    return _REASONS.get(status, "InternalError" if status >= 500 else "BadRequest")


class Faults:
    """Thread-safe rules; ``watch_epoch`` rises each time tests drop all watch streams."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._failures: list[_Failure] = []
        self._latencies: list[_Latency] = []
        self._log: list[LoggedRequest] = []
        self.watch_epoch = 0

    def fail(
        self,
        status: int,
        path: str = ".*",
        method: str | None = None,
        times: int = 1,
        message: str = "injected failure",
    ) -> None:
        """Answer the next ``times`` requests whose path matches ``path`` (a regex searched in the
        path) and whose method is ``method`` (any if None) with ``status``."""
        with self._lock:
            self._failures.append(_Failure(method, re.compile(path), status, times, message))

    def delay(self, seconds: float, path: str = ".*", method: str | None = None) -> None:
        """Add latency to every matching request until ``clear``."""
        with self._lock:
            self._latencies.append(_Latency(method, re.compile(path), seconds))

    def clear(self) -> None:
        with self._lock:
            self._failures.clear()
            self._latencies.clear()

    def drop_watches(self) -> None:
        with self._lock:
            self.watch_epoch += 1

    def injected_failure(self, method: str, path: str) -> tuple[int, str] | None:
        """The (status, message) to answer with, consuming one use of the first matching rule."""
        with self._lock:
            for failure in self._failures:
                if _matches(failure.method, failure.path, method, path):
                    failure.remaining -= 1
                    if failure.remaining <= 0:
                        self._failures.remove(failure)
                    return failure.status, failure.message
        return None

    def wait_latency(self, method: str, path: str) -> None:
        with self._lock:
            seconds = sum(
                rule.seconds
                for rule in self._latencies
                if _matches(rule.method, rule.path, method, path)
            )
        if seconds:
            time.sleep(seconds)

    def log(self, request: LoggedRequest) -> None:
        with self._lock:
            self._log.append(request)

    @property
    def requests(self) -> list[LoggedRequest]:
        with self._lock:
            return list(self._log)

    def clear_requests(self) -> None:
        with self._lock:
            self._log.clear()

    def reset(self) -> None:
        self.clear()
        self.clear_requests()


def _matches(want: str | None, pattern: re.Pattern[str], method: str, path: str) -> bool:
    return (want is None or want.upper() == method) and pattern.search(path) is not None
