"""ResourceQuota admission: charge a write to every quota of its namespace before it is stored.

As kube-apiserver's ResourceQuota plugin does (``apiserver/pkg/admission/plugin/resourcequota``,
controller.go and admission.go), it runs last, after the validating webhooks; it refuses what a
quota does not allow with a 403 naming the quota and the numbers, and otherwise writes each
charged quota's ``status.used`` through the API itself, as the server's own loopback user, with
the quota's resourceVersion, before the object is stored. That write is an ordinary UPDATE of
``resourcequotas/status``: it passes through the admission webhooks (a webhook may refuse it, and
then the original request fails with that webhook's refusal, after three more tries), and a
concurrent charge makes it a conflict, so the quota is read again and the request checked again:
two writes racing for the last unit never both pass. The checks are made by a fixed pool of
``EVALUATOR_WORKERS`` long-lived workers, each taking all the requests waiting in one namespace
and checking them together, as the plugin's per-namespace work queue does, so writes in one
namespace are checked one batch at a time and their charges share one status update per quota.
A request waits at most ``EVALUATION_TIMEOUT`` for its check (then 500 ``resource quota
evaluation timed out``, while the check goes on).
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from accurate_testbed.apiserver import errors
from accurate_testbed.apiserver.api import Api, Attempt, Caller, Obj
from accurate_testbed.apiserver.errors import ApiError
from accurate_testbed.apiserver.quota_evaluators import Evaluator, evaluator_for, matches
from accurate_testbed.apiserver.uids import new_uid
from libaccurate import quantity

# The loopback client's identity (server/config.go, AuthorizeClientBearerToken).
APISERVER_USER: dict[str, Any] = {
    "username": "system:apiserver",
    "uid": new_uid(),
    "groups": ["system:authenticated", "system:masters"],
}
_LOOPBACK_AGENT = "kube-apiserver/v1.32.0 (linux/amd64) kubernetes"
_RETRIES = 3  # checkAttributes: e.checkQuotas(quotas, admissionAttributes, 3)
EVALUATION_TIMEOUT = 10.0  # Evaluate: seconds a request waits for its quota check
EVALUATOR_WORKERS = 5  # admission.go: NewResourceQuota(configuration, 5)


class QuotaAdmission:
    """The ResourceQuota admission plugin; ``validate`` is called for every write."""

    def __init__(self, api: Api, workers: int = EVALUATOR_WORKERS) -> None:
        self.api = api
        self._queue = _WorkQueue()
        self._workers = workers
        self._started = False
        self._start_lock = threading.Lock()

    def validate(self, attempt: Attempt) -> None:
        """Admit or refuse ``attempt``, charging the quotas it uses."""
        if attempt.subresource or attempt.obj is None:
            return  # subresources are ignored; DELETE is not a quota operation
        resource = attempt.resource
        namespace = attempt.obj["metadata"].get("namespace", "")
        if not resource.namespaced or not namespace:
            return
        evaluator = evaluator_for(resource.group, resource.plural)
        if evaluator is None or not evaluator.handles(attempt.operation):
            return
        if not self._quotas(namespace):
            return  # nothing to charge (checkAttributes answers at once)
        self._start()
        waiter = _Waiter(attempt, evaluator)
        self._queue.add(namespace, waiter)
        if not waiter.wait(EVALUATION_TIMEOUT):
            # The work goes on, as the plugin's worker does, but the request fails.
            raise errors.internal_error("resource quota evaluation timed out")
        if waiter.result is not None:
            raise waiter.result

    def stop(self) -> None:
        """End the workers once they finish what they hold (the server is shutting down)."""
        self._queue.close()

    def _start(self) -> None:
        """Start the workers on the first charge, as Evaluate's ``init.Do(e.start)`` does: a
        server whose namespaces never hold a quota runs none."""
        if self._started:
            return
        with self._start_lock:
            if self._started:
                return
            self._started = True
            for index in range(self._workers):
                name = f"quota-evaluator-{index}"
                threading.Thread(target=self._work, name=name, daemon=True).start()

    def _work(self) -> None:
        """doWork: take one namespace's waiting requests, check them, hand the results over."""
        while (taken := self._queue.take()) is not None:
            namespace, waiters = taken
            try:
                self._check_namespace(namespace, waiters)
            except BaseException as error:  # a bug must not leave requests waiting for nothing
                for waiter in waiters:
                    if isinstance(waiter.result, _DefaultDeny):
                        waiter.result = error
            finally:
                for waiter in waiters:
                    waiter.finish()
                self._queue.done(namespace)

    def _check_namespace(self, namespace: str, waiters: list[_Waiter]) -> None:
        """checkAttributes: with no quota left in the namespace every request passes."""
        quotas = self._quotas(namespace)
        if not quotas:
            for waiter in waiters:
                waiter.result = None
            return
        self._check(namespace, quotas, waiters, _RETRIES)

    def _quotas(self, namespace: str) -> list[Obj]:
        found, _ = self.api.store.select("", "resourcequotas", namespace)
        return list(found)

    def _check(
        self, namespace: str, quotas: list[Obj], waiters: list[_Waiter], retries: int
    ) -> None:
        """checkQuotas for a batch: charge each request in turn to the running quotas (a
        refused one charges nothing), write each quota that changed once, and when a write
        fails read the failed quotas again and check the whole batch against them,
        ``retries`` more times; then the requests still waiting fail with the last error."""
        original = quotas
        changed = False
        for waiter in waiters:
            try:
                charged = check_request(quotas, waiter.attempt, waiter.evaluator)
            except ApiError as error:
                waiter.result = error
                continue
            if waiter.attempt.caller.dry_run:
                waiter.result = None
                continue
            if any(_charged(a, b) for a, b in zip(quotas, charged, strict=True)):
                changed = True
            else:
                waiter.result = None  # no quota counts it: nothing to wait for
            quotas = charged
        if not changed:
            return
        failed, last_error = self._write_changed(original, quotas)
        if last_error is None or retries <= 0:
            for waiter in waiters:
                if isinstance(waiter.result, _DefaultDeny):
                    waiter.result = last_error
            return
        names = {quota["metadata"]["name"] for quota in failed}
        again = [q for q in self._quotas(namespace) if q["metadata"]["name"] in names]
        self._check(namespace, again, waiters, retries - 1)

    def _write_changed(
        self, original: list[Obj], charged: list[Obj]
    ) -> tuple[list[Obj], ApiError | None]:
        """Write every quota whose usage changed; the ones that failed and the last error."""
        failed: list[Obj] = []
        last_error: ApiError | None = None
        for before, after in zip(original, charged, strict=True):
            if not _charged(before, after):
                continue
            try:
                self._write_status(after)
            except ApiError as error:
                failed.append(after)
                last_error = error
        return failed, last_error

    def _write_status(self, quota: Obj) -> None:
        resource = self.api.resource_of("", "resourcequotas")
        assert resource is not None
        meta = quota["metadata"]
        loopback = Caller(APISERVER_USER, user_agent=_LOOPBACK_AGENT)
        # What a status update reads of its body: the status, and the version it was made from.
        body = {"metadata": {"resourceVersion": meta["resourceVersion"]}, "status": quota["status"]}
        self.api.update(
            resource, meta["namespace"], meta["name"], body, loopback, subresource="status"
        )


class _DefaultDeny(ApiError):
    """A request's result until its check decides (controller.go's defaultDeny). One still
    holding it when the checks end (its quotas were deleted during a retry) fails with it, a
    plain Go error that kube-apiserver answers as a 500 without a reason."""

    def __init__(self) -> None:
        super().__init__(500, "", "DEFAULT DENY")


def _held_lock() -> threading.Lock:
    lock = threading.Lock()
    lock.acquire()
    return lock


@dataclass(eq=False)
class _Waiter:
    """admissionWaiter: one request waiting for its check, and the check's outcome. The check
    ends by releasing a lock the waiter holds from the start: the plainest wake-up there is,
    paid on every counted write."""

    attempt: Attempt
    evaluator: Evaluator
    result: BaseException | None = field(default_factory=_DefaultDeny)
    _checking: threading.Lock = field(default_factory=_held_lock)

    def wait(self, timeout: float) -> bool:
        """Whether the check ended within ``timeout`` seconds."""
        return self._checking.acquire(timeout=timeout)

    def finish(self) -> None:
        self._checking.release()


class _WorkQueue:
    """The plugin's queue of namespaces with their waiting requests (work, dirtyWork and
    inProgress in controller.go): a namespace is handed to one worker at a time, with every
    request that waits in it; requests that come while it is being checked wait for the next
    turn, so one namespace's checks never overlap while other namespaces' run beside them."""

    def __init__(self) -> None:
        self._ready: deque[str] = deque()
        self._work: dict[str, list[_Waiter]] = {}
        self._in_progress: set[str] = set()
        self._closed = False
        self._lock = threading.Condition(threading.Lock())

    def add(self, namespace: str, waiter: _Waiter) -> None:
        with self._lock:
            waiting = self._work.setdefault(namespace, [])
            if not waiting and namespace not in self._in_progress:
                self._ready.append(namespace)
                self._lock.notify()
            waiting.append(waiter)

    def take(self) -> tuple[str, list[_Waiter]] | None:
        """The next namespace and its waiters; None once the queue is closed."""
        with self._lock:
            while not self._ready and not self._closed:
                self._lock.wait()
            if self._closed:
                return None
            namespace = self._ready.popleft()
            self._in_progress.add(namespace)
            return namespace, self._work.pop(namespace)

    def done(self, namespace: str) -> None:
        with self._lock:
            self._in_progress.discard(namespace)
            if self._work.get(namespace):
                self._ready.append(namespace)
                self._lock.notify()

    def close(self) -> None:
        with self._lock:
            self._closed = True
            self._lock.notify_all()


def _charged(before: Obj, after: Obj) -> bool:
    """Whether a quota's usage moved (quota.Equals on status.used)."""
    return after is not before and not quantity.equal(_used(before), _used(after))


def _used(quota: Obj) -> dict[str, quantity.Quantity]:
    return quantity.parse_list((quota.get("status") or {}).get("used"))


def check_request(quotas: Sequence[Obj], attempt: Attempt, evaluator: Evaluator) -> list[Obj]:
    """CheckRequest: the quotas as they would be with this request charged, or a 403.

    A quota takes part when it tracks a resource of this kind and its scopes match the object;
    the object must then satisfy the quota's constraints (``must specify``), the quota must
    have usage for what it tracks (the controller fills it in), and the new usage of every
    resource the request adds to must stay within hard. An UPDATE is charged the difference
    (never below zero) to the quotas that already counted the old object."""
    obj = attempt.obj
    assert obj is not None
    interesting: list[int] = []
    for index, quota in enumerate(quotas):
        if not matches(evaluator, quota, obj):
            continue
        name = quota["metadata"]["name"]
        restricted = evaluator.matching_resources((quota.get("status") or {}).get("hard") or {})
        problem = evaluator.constraints(restricted, obj)
        if problem:
            raise _forbidden(attempt, f"failed quota: {name}: {problem}")
        used = _used(quota)
        if any(resource not in used for resource in restricted):
            raise _forbidden(
                attempt,
                f"status unknown for quota: {name}, resources: {','.join(sorted(restricted))}",
            )
        interesting.append(index)
    if not interesting:
        return list(quotas)
    usage = evaluator.usage(obj)
    negative = sorted(name for name, amount in usage.items() if amount.value < 0)
    if negative:
        raise _forbidden(attempt, f"quota usage is negative for resource(s): {','.join(negative)}")
    deltas = {index: usage for index in interesting}
    old = attempt.old
    if attempt.operation == "UPDATE" and old is not None and old["metadata"].get("resourceVersion"):
        difference = quantity.subtract_non_negative(usage, evaluator.usage(old))
        for index in interesting:
            if matches(evaluator, quotas[index], old):
                deltas[index] = difference
    charged = list(quotas)
    for index in interesting:
        delta = quantity.remove_zeros(deltas[index])
        if delta:
            charged[index] = _charge(quotas[index], delta, attempt)
    return charged


def _charge(quota: Obj, delta: quantity.ResourceList, attempt: Attempt) -> Obj:
    status = quota.get("status") or {}
    hard = quantity.parse_list(status.get("hard"))
    used = quantity.parse_list(status.get("used"))
    requested = quantity.mask(delta, hard)
    new_usage = quantity.add(used, requested)
    over = quantity.exceeded(quantity.mask(new_usage, requested), hard)
    if over:
        raise _forbidden(
            attempt,
            f"exceeded quota: {quota['metadata']['name']}, "
            f"requested: {quantity.pretty(quantity.mask(requested, over))}, "
            f"used: {quantity.pretty(quantity.mask(used, over))}, "
            f"limited: {quantity.pretty(quantity.mask(hard, over))}",
        )
    # The rest is shared with the quota as read: nothing changes a quota in place.
    return {**quota, "status": {**status, "used": quantity.render_list(new_usage)}}


def _forbidden(attempt: Attempt, why: str) -> ApiError:
    """admission.NewForbidden: ``<resource> "<name>" is forbidden: <why>``."""
    assert attempt.obj is not None
    meta = attempt.obj["metadata"]
    name = meta.get("name") or meta.get("generateName") or "Unknown"
    return errors.forbidden(attempt.resource.group, attempt.resource.plural, name, why)
