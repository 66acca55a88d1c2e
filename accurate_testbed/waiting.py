"""Waiting for a condition with a deadline, never for a fixed time."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

# How long a test gives the work of a cluster's controllers (the namespace controller emptying
# and removing a namespace, the garbage collector, the CRD finalizer): the in-memory server's
# take milliseconds, a real cluster's seconds, and more when a test run has kept them busy.
CONTROLLER_TIMEOUT = 120.0


def wait_for(condition: Callable[[], T | None], timeout: float = 10.0, what: str = "") -> T:
    """Poll ``condition`` until it returns something truthy, or fail after ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        result = condition()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what or condition}")
        time.sleep(0.02)
