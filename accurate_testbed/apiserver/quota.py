"""ResourceQuota admission: charge a write to every quota of its namespace before it is stored.

As kube-apiserver's ResourceQuota plugin does (``apiserver/pkg/admission/plugin/resourcequota``,
controller.go and admission.go), it runs last, after the validating webhooks; it refuses what a
quota does not allow with a 403 naming the quota and the numbers, and otherwise writes each
charged quota's ``status.used`` through the API itself, as the server's own loopback user, with
the quota's resourceVersion, before the object is stored. That write is an ordinary UPDATE of
``resourcequotas/status``: it passes through the admission webhooks (a webhook may refuse it, and
then the original request fails with that webhook's refusal, after three more tries), and a
concurrent charge makes it a conflict, so the quota is read again and the request checked again:
two writes racing for the last unit never both pass. Writes in one namespace are checked one at a
time, as the plugin's per-namespace work queue does, and a request waits at most
``EVALUATION_TIMEOUT`` for its check (then 500 ``resource quota evaluation timed out``, while the
check goes on).
"""

from __future__ import annotations

import copy
import threading
import uuid
from collections.abc import Sequence
from typing import Any

from accurate_testbed.apiserver import errors
from accurate_testbed.apiserver.api import Api, Attempt, Caller, Obj
from accurate_testbed.apiserver.errors import ApiError
from accurate_testbed.apiserver.quota_evaluators import Evaluator, evaluator_for, matches
from libaccurate import quantity

# The loopback client's identity (server/config.go, AuthorizeClientBearerToken).
APISERVER_USER: dict[str, Any] = {
    "username": "system:apiserver",
    "uid": str(uuid.uuid4()),
    "groups": ["system:authenticated", "system:masters"],
}
_LOOPBACK_AGENT = "kube-apiserver/v1.32.0 (linux/amd64) kubernetes"
_RETRIES = 3  # checkAttributes: e.checkQuotas(quotas, admissionAttributes, 3)
EVALUATION_TIMEOUT = 10.0  # Evaluate: seconds a request waits for its quota check


class QuotaAdmission:
    """The ResourceQuota admission plugin; ``validate`` is called for every write."""

    def __init__(self, api: Api) -> None:
        self.api = api
        self._locks: dict[str, threading.Lock] = {}
        self._locks_lock = threading.Lock()

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
        outcome: list[BaseException | None] = []

        def work() -> None:
            try:
                with self._lock(namespace):
                    quotas = self._quotas(namespace)
                    if quotas:
                        self._check(quotas, attempt, evaluator, _RETRIES)
                outcome.append(None)
            except BaseException as error:  # handed to the waiting request
                outcome.append(error)

        worker = threading.Thread(target=work, name="quota-evaluator", daemon=True)
        worker.start()
        worker.join(EVALUATION_TIMEOUT)
        if not outcome:  # the work goes on, as the plugin's worker does, but the request fails
            raise errors.internal_error("resource quota evaluation timed out")
        if outcome[0] is not None:
            raise outcome[0]

    def _lock(self, namespace: str) -> threading.Lock:
        with self._locks_lock:
            return self._locks.setdefault(namespace, threading.Lock())

    def _quotas(self, namespace: str) -> list[Obj]:
        found, _ = self.api.store.select("", "resourcequotas", namespace)
        return list(found)

    def _check(
        self, quotas: list[Obj], attempt: Attempt, evaluator: Evaluator, retries: int
    ) -> None:
        """checkQuotas for one request: charge, write the changed quotas, and on a failed
        write read them again and start over, ``retries`` more times, then fail with the
        last write's error."""
        charged = check_request(quotas, attempt, evaluator)
        if attempt.caller.dry_run:
            return
        failed: list[Obj] = []
        last_error: ApiError | None = None
        for before, after in zip(quotas, charged, strict=True):
            if quantity.equal(_used(before), _used(after)):
                continue
            try:
                self._write_status(after)
            except ApiError as error:
                failed.append(after)
                last_error = error
        if last_error is None:
            return
        if retries <= 0:
            raise last_error
        names = {quota["metadata"]["name"] for quota in failed}
        namespace = attempt.obj["metadata"]["namespace"] if attempt.obj else ""
        again = [q for q in self._quotas(namespace) if q["metadata"]["name"] in names]
        self._check(again, attempt, evaluator, retries - 1)

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
        if any(resource not in _used(quota) for resource in restricted):
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
    charged = copy.deepcopy(quota)
    charged.setdefault("status", {})["used"] = quantity.render_list(new_usage)
    return charged


def _forbidden(attempt: Attempt, why: str) -> ApiError:
    """admission.NewForbidden: ``<resource> "<name>" is forbidden: <why>``."""
    assert attempt.obj is not None
    meta = attempt.obj["metadata"]
    name = meta.get("name") or meta.get("generateName") or "Unknown"
    return errors.forbidden(attempt.resource.group, attempt.resource.plural, name, why)
