"""When kube-controller-manager's controllers try a failed item again, and who they are.

Both the namespace controller and the garbage collector put an item whose sync failed back on
a rate-limited work queue (client-go ``util/workqueue``, ``AddRateLimited``): the per-item
delay starts at 5ms and doubles with each failure in a row, up to a cap (60s for namespaces,
``nsControllerRateLimiter`` in pkg/controller/namespace/namespace_controller.go; 1000s for the
collector's ``DefaultControllerRateLimiter``). A success forgets the count. They call the API
as their own ServiceAccounts in kube-system (``--use-service-account-credentials``, as kubeadm
runs them), so every write passes through the same admission chain as any client's: mutating
webhooks, validation, validating webhooks, quota. (Their bootstrap roles allow what they do, so
authorization, which this server makes at its HTTP front, is not asked again.)
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

from accurate_testbed.apiserver.api import Caller
from accurate_testbed.apiserver.authentication import service_account_groups
from accurate_testbed.apiserver.rbac import AUTHENTICATED

FIRST_DELAY = 0.005  # seconds, ItemExponentialFailureRateLimiter's base delay
Item = TypeVar("Item", bound=Hashable)


def controller_caller(controller: str) -> Caller:
    """kube-controller-manager's ``controller`` as an API client: its ServiceAccount, and the
    User-Agent the controller manager gives each controller's client (so its writes are
    recorded under the manager ``kube-controller-manager``)."""
    return Caller(
        user_info={
            "username": f"system:serviceaccount:kube-system:{controller}",
            "groups": [*service_account_groups("kube-system"), AUTHENTICATED],
        },
        user_agent=f"kube-controller-manager/v1.32.0 (linux/amd64) kubernetes/{controller}",
    )


class Retries(Generic[Item]):
    """Items whose last attempt failed, each tried again once its delay is over: ``again`` is
    called (on a timer thread) with the items that are due."""

    def __init__(self, again: Callable[[set[Item]], None], cap: float) -> None:
        self._again = again
        self._cap = cap
        self._failures: dict[Item, int] = {}
        self._due: dict[Item, float] = {}  # item -> monotonic time of its next attempt
        self._timer: threading.Timer | None = None
        self._lock = threading.Lock()

    def failed(self, item: Item) -> None:
        with self._lock:
            count = self._failures.get(item, 0)
            self._failures[item] = count + 1
            self._due[item] = time.monotonic() + min(FIRST_DELAY * 2**count, self._cap)
            self._schedule()

    def succeeded(self, item: Item) -> None:
        with self._lock:
            self._failures.pop(item, None)
            self._due.pop(item, None)

    def waiting(self, item: Item) -> bool:
        """Whether ``item`` waits for its retry (and so is not tried again before)."""
        with self._lock:
            return item in self._due

    def _schedule(self) -> None:
        if self._timer is not None or not self._due:
            return
        delay = max(min(self._due.values()) - time.monotonic(), 0)
        self._timer = threading.Timer(delay, self._fire)
        self._timer.daemon = True
        self._timer.start()

    def _fire(self) -> None:
        with self._lock:
            self._timer = None
            now = time.monotonic()
            due = {item for item, moment in self._due.items() if moment <= now}
            for item in due:
                del self._due[item]
            self._schedule()
        if due:
            self._again(due)
