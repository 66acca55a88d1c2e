"""The resource quota controller: ``status.hard`` mirrors ``spec.hard`` and ``status.used`` is
recounted from the namespace's objects, as kube-controller-manager's does it
(``pkg/controller/resourcequota/resource_quota_controller.go`` syncResourceQuota, and
resource_quota_monitor.go for what makes it recount).

Admission charges usage as objects are created; this controller gives usage back. It recounts a
quota when the quota is created or its ``spec.hard`` changes, when an object it counts is
deleted (or a pod ends, a service changes type, a claim's allocated size changes), and every
``RESYNC_SECONDS`` all of them, the controller-manager's default sync period. It writes status
through the API as its ServiceAccount (so admission webhooks on ``resourcequotas/status`` see
it, as on a cluster run with ``--use-service-account-credentials``), with the resourceVersion it
read; a write that fails is tried again on the next round.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from typing import Any

from accurate_testbed.apiserver.api import Api, Caller, Obj
from accurate_testbed.apiserver.errors import ApiError
from accurate_testbed.apiserver.quota_evaluators import (
    Evaluator,
    charged,
    evaluator_for,
    scope_requirements,
)
from accurate_testbed.apiserver.store import Change
from accurate_testbed.apiserver.uids import new_uid
from libaccurate import quantity

RESYNC_SECONDS = 300.0  # --resource-quota-sync-period
CONTROLLER_USER: dict[str, Any] = {
    "username": "system:serviceaccount:kube-system:resourcequota-controller",
    "uid": new_uid(),
    "groups": [
        "system:serviceaccounts",
        "system:serviceaccounts:kube-system",
        "system:authenticated",
    ],
}
_AGENT = "kube-controller-manager/v1.32.0 (linux/amd64) kubernetes/resourcequota-controller"
QuotaKey = tuple[str, str]  # namespace, name


class QuotaController:
    """A background step; see BackgroundLoop."""

    def __init__(self, api: Api) -> None:
        self.api = api
        self._last_full = time.monotonic()
        self._failed: set[QuotaKey] = set()

    def __call__(self, changes: Sequence[Change] | None) -> None:
        if changes is None or time.monotonic() - self._last_full >= RESYNC_SECONDS:
            self._last_full = time.monotonic()
            quotas, _ = self.api.store.select("", "resourcequotas")
            targets = {_key(quota) for quota in quotas}
        else:
            targets = set(self._failed)
            for change in changes:
                targets |= self._affected(change)
        self._failed = set()
        for key in sorted(targets):
            try:
                self.sync(*key)
            except ApiError:
                self._failed.add(key)

    def _affected(self, change: Change) -> set[QuotaKey]:
        """The quotas a change makes stale (the quota monitor's replenishment rules)."""
        if not change.namespace:
            return set()
        if (change.group, change.plural) == ("", "resourcequotas") and change.type != "DELETED":
            old_hard = ((change.old or {}).get("spec") or {}).get("hard")
            new_hard = (change.obj.get("spec") or {}).get("hard")
            if change.type == "ADDED" or old_hard != new_hard:
                return {_key(change.obj)}
            return set()
        evaluator = evaluator_for(change.group, change.plural)
        if evaluator is None or not _gives_back(change):
            return set()
        quotas, _ = self.api.store.select("", "resourcequotas", change.namespace)
        return {
            _key(quota)
            for quota in quotas
            if evaluator.matching_resources((quota.get("status") or {}).get("hard") or {})
        }

    def sync(self, namespace: str, name: str) -> None:
        """syncResourceQuota: write status when hard or the recounted usage differs."""
        quota = self.api.store.get("", "resourcequotas", namespace, name)
        if quota is None:
            return
        status = quota.get("status") or {}
        hard = quantity.parse_list((quota.get("spec") or {}).get("hard"))
        used = quantity.parse_list(status.get("used"))
        used.update(self._usage(quota, hard))
        used = quantity.mask(used, hard)
        dirty = (
            status.get("hard") is None
            or status.get("used") is None
            or not quantity.equal(quantity.parse_list(status.get("hard")), hard)
            or not quantity.equal(quantity.parse_list(status.get("used")), used)
        )
        if not dirty:
            return
        updated = {
            **quota,
            "status": {"hard": quantity.render_list(hard), "used": quantity.render_list(used)},
        }
        resource = self.api.resource_of("", "resourcequotas")
        assert resource is not None
        caller = Caller(CONTROLLER_USER, user_agent=_AGENT)
        self.api.update(resource, namespace, name, updated, caller, subresource="status")

    def _usage(self, quota: Obj, hard: quantity.ResourceList) -> dict[str, quantity.Quantity]:
        """CalculateUsage: for each kind that counts a resource of ``hard``, the sum over the
        namespace's objects that match the quota's scopes, each tracked resource from zero."""
        namespace = quota["metadata"]["namespace"]
        requirements = scope_requirements(quota)
        total: dict[str, quantity.Quantity] = {}
        for evaluator in self._evaluators():
            tracked = evaluator.matching_resources(hard)
            if not tracked:
                continue
            stats: dict[str, quantity.Quantity] = {name: quantity.ZERO for name in tracked}
            objects, _ = self.api.store.select(evaluator.group, evaluator.plural, namespace)
            for obj in objects:
                if all(evaluator.matches_scope(r, obj) for r in requirements):
                    stats = quantity.add(stats, evaluator.usage(obj))
            total = quantity.add(total, quantity.mask(stats, tracked))
        return total

    def _evaluators(self) -> Iterable[Evaluator]:
        """One per namespaced resource that can be created (quotable), each once."""
        for resource in self.api.registry.namespaced("create"):
            evaluator = evaluator_for(resource.group, resource.plural)
            if evaluator is not None:
                yield evaluator


def _gives_back(change: Change) -> bool:
    """Whether a change may lower usage (DefaultUpdateFilter): any deletion, a pod that stops
    being charged, a service whose quota type changes, a claim whose allocated size changes."""
    if change.type == "DELETED":
        return True
    if change.type != "MODIFIED" or change.old is None:
        return False
    if (change.group, change.plural) == ("", "pods"):
        return charged(change.old) and not charged(change.obj)
    if (change.group, change.plural) == ("", "services"):
        return _quota_service_type(change.old) != _quota_service_type(change.obj)
    if (change.group, change.plural) == ("", "persistentvolumeclaims"):
        allocated = "allocatedResources"
        return (change.old.get("status") or {}).get(allocated) != (
            change.obj.get("status") or {}
        ).get(allocated)
    return False


def _quota_service_type(service: Obj) -> str:
    """GetQuotaServiceType: the types quota counts something for, else none."""
    kind = (service.get("spec") or {}).get("type")
    return kind if kind in ("NodePort", "LoadBalancer") else ""


def _key(quota: Obj) -> QuotaKey:
    return quota["metadata"]["namespace"], quota["metadata"]["name"]
