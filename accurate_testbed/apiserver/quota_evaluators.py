"""What an object uses of a ResourceQuota, per kind, as kube-apiserver's quota evaluators
measure it.

Read from ``pkg/quota/v1/evaluator/core`` (pods.go, services.go, persistent_volume_claims.go,
registry.go), ``apiserver/pkg/quota/v1/generic/evaluator.go`` (the object count evaluator every
other resource gets, custom ones included) and ``pkg/api/v1/resource/helpers.go`` (PodRequests,
PodLimits). Admission and the quota controller both ask this module, so a pod counts the same
when it is created and when usage is recalculated.
"""

from __future__ import annotations

import datetime
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from libaccurate import quantity
from libaccurate.quantity import Quantity

Obj = Mapping[str, Any]
Usage = dict[str, Quantity]
Requirement = Mapping[str, Any]  # a ScopedResourceSelectorRequirement

# Resources quota never counts (install/update_filter.go): virtual ones and events.
IGNORED = frozenset({("", "events"), ("events.k8s.io", "events"), ("", "bindings")})
# The legacy names some object counts also go by (core/registry.go).
_ALIASES = {
    "configmaps": "configmaps",
    "resourcequotas": "resourcequotas",
    "replicationcontrollers": "replicationcontrollers",
    "secrets": "secrets",
}
_REQUESTS = "requests."
_STORAGE_CLASS = ".storageclass.storage.k8s.io/"
_QUALIFIED_NAME = re.compile(
    r"([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
    r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?"
)


def count_name(group: str, plural: str) -> str:
    """ObjectCountQuotaResourceNameFor: ``count/pods``, ``count/deployments.apps``."""
    return f"count/{plural}.{group}" if group else f"count/{plural}"


@dataclass(frozen=True)
class Evaluator:
    """The object count evaluator; the kinds with more to count refine it."""

    group: str
    plural: str

    def handles(self, operation: str) -> bool:
        return operation == "CREATE"

    def names(self) -> tuple[str, ...]:
        alias = _ALIASES.get(self.plural) if not self.group else None
        return (count_name(self.group, self.plural),) + ((alias,) if alias else ())

    def matching_resources(self, names: Iterable[str]) -> list[str]:
        own = set(self.names())
        return [name for name in names if name in own]

    def matches_scope(self, requirement: Requirement, obj: Obj) -> bool:
        """MatchesNoScopeFunc: a quota with any scope never counts these objects."""
        return False

    def usage(self, obj: Obj) -> Usage:
        return {name: quantity.count(1) for name in self.names()}

    def constraints(self, required: Iterable[str], obj: Obj) -> str | None:
        return None


# -- pods ----------------------------------------------------------------------------------------

# Quota on these makes every container say how much it wants (a mistake kept for compatibility).
MUST_SPECIFY = frozenset(
    {"cpu", "memory", "requests.cpu", "requests.memory", "limits.cpu", "limits.memory"}
)
POD_COMPUTE = MUST_SPECIFY | {
    "ephemeral-storage",
    "requests.ephemeral-storage",
    "limits.ephemeral-storage",
}
_POD_RESOURCES = POD_COMPUTE | {"count/pods", "pods"}
_TERMINAL = ("Succeeded", "Failed")


def _is_native(name: str) -> bool:
    return "/" not in name or "kubernetes.io/" in name


def is_extended(name: str) -> bool:
    """helper.IsExtendedResourceName: a domain-qualified, non-kubernetes.io resource."""
    if _is_native(name) or name.startswith(_REQUESTS):
        return False
    return bool(_QUALIFIED_NAME.fullmatch(_REQUESTS + name))


def _compute_usage(requests: Mapping[str, Quantity], limits: Mapping[str, Quantity]) -> Usage:
    """podComputeUsageHelper: what requests and limits of a pod (or one container) count as."""
    result: Usage = {"pods": quantity.count(1)}
    for name in ("cpu", "memory", "ephemeral-storage"):
        if name in requests:
            result[name] = result[_REQUESTS + name] = requests[name]
        if name in limits:
            result["limits." + name] = limits[name]
    for name, request in requests.items():
        if name.startswith("hugepages-"):
            result[name] = result[_REQUESTS + name] = request
        if is_extended(name):
            result[_REQUESTS + name] = request
    return result


def _resources(container: Obj, kind: str) -> dict[str, Quantity]:
    return quantity.parse_list((container.get("resources") or {}).get(kind))


def _maximum(first: Mapping[str, Quantity], second: Mapping[str, Quantity]) -> Usage:
    result = dict(first)
    for name, amount in second.items():
        if name not in result or result[name] < amount:
            result[name] = amount
    return result


def pod_totals(pod: Obj, kind: str) -> Usage:
    """PodRequests/PodLimits: containers summed, then the largest of that and each init
    container (a restartable, sidecar, init container runs beside the rest and adds up)."""
    spec = pod.get("spec") or {}
    total: Usage = {}
    for container in spec.get("containers") or []:
        total = quantity.add(total, _resources(container, kind))
    sidecars: Usage = {}
    init_peak: Usage = {}
    for container in spec.get("initContainers") or []:
        own = _resources(container, kind)
        if container.get("restartPolicy") == "Always":
            total = quantity.add(total, own)
            sidecars = quantity.add(sidecars, own)
            init_peak = _maximum(init_peak, sidecars)
        else:
            init_peak = _maximum(init_peak, quantity.add(own, sidecars))
    total = _maximum(total, init_peak)
    overhead = quantity.parse_list(spec.get("overhead"))
    if kind == "requests":
        return quantity.add(total, overhead)
    return {name: amount + overhead.get(name, quantity.ZERO) for name, amount in total.items()}


def charged(pod: Obj, now: datetime.datetime | None = None) -> bool:
    """QuotaV1Pod: terminal pods and pods past their deletion grace period use no compute."""
    if (pod.get("status") or {}).get("phase") in _TERMINAL:
        return False
    meta = pod.get("metadata") or {}
    deleted, grace = meta.get("deletionTimestamp"), meta.get("deletionGracePeriodSeconds")
    if deleted and grace is not None:
        when = datetime.datetime.strptime(deleted, "%Y-%m-%dT%H:%M:%SZ").replace(
            tzinfo=datetime.timezone.utc
        ) + datetime.timedelta(seconds=grace)
        return (now or datetime.datetime.now(datetime.timezone.utc)) <= when
    return True


def _best_effort(pod: Obj) -> bool:
    """qos.GetPodQOS == BestEffort: no container asks for or caps cpu or memory."""
    spec = pod.get("spec") or {}
    for container in (spec.get("containers") or []) + (spec.get("initContainers") or []):
        for kind in ("requests", "limits"):
            wanted = (container.get("resources") or {}).get(kind) or {}
            if any(name in wanted for name in ("cpu", "memory")):
                return False
    return True


def _cross_namespace_affinity(pod: Obj) -> bool:
    affinity = (pod.get("spec") or {}).get("affinity") or {}
    for kind in ("podAffinity", "podAntiAffinity"):
        rules = affinity.get(kind) or {}
        terms = list(rules.get("requiredDuringSchedulingIgnoredDuringExecution") or [])
        terms += [
            weighted.get("podAffinityTerm") or {}
            for weighted in rules.get("preferredDuringSchedulingIgnoredDuringExecution") or []
        ]
        if any(
            term.get("namespaces") or term.get("namespaceSelector") is not None for term in terms
        ):
            return True
    return False


def selector_requirement_holds(requirement: Requirement, labels: Mapping[str, str]) -> bool:
    """A ScopedResourceSelectorRequirement as the label selector it converts to."""
    key, operator = requirement.get("scopeName", ""), requirement.get("operator", "")
    values = requirement.get("values") or []
    if operator == "In":
        return key in labels and labels[key] in values
    if operator == "NotIn":
        return key not in labels or labels[key] not in values
    if operator == "Exists":
        return key in labels
    if operator == "DoesNotExist":
        return key not in labels
    return False


@dataclass(frozen=True)
class Pods(Evaluator):
    group: str = ""
    plural: str = "pods"

    def matching_resources(self, names: Iterable[str]) -> list[str]:
        return [
            name
            for name in names
            if name in _POD_RESOURCES
            or name.startswith(("hugepages-", "requests.hugepages-"))
            or (not _is_native(name) and name.startswith(_REQUESTS))
        ]

    def matches_scope(self, requirement: Requirement, obj: Obj) -> bool:
        """podMatchesScopeFunc."""
        scope = requirement.get("scopeName")
        spec = obj.get("spec") or {}
        if scope in ("Terminating", "NotTerminating"):
            deadline = spec.get("activeDeadlineSeconds")
            terminating = deadline is not None and deadline >= 0
            return terminating == (scope == "Terminating")
        if scope in ("BestEffort", "NotBestEffort"):
            return _best_effort(obj) == (scope == "BestEffort")
        if scope == "PriorityClass":
            name = spec.get("priorityClassName") or ""
            if requirement.get("operator") == "Exists":
                return bool(name)
            return selector_requirement_holds(requirement, {"PriorityClass": name} if name else {})
        if scope == "CrossNamespacePodAffinity":
            return _cross_namespace_affinity(obj)
        return False

    def usage(self, obj: Obj) -> Usage:
        """PodUsageFunc: ``count/pods`` always, compute only while the pod is charged."""
        result: Usage = {"count/pods": quantity.count(1)}
        if not charged(obj):
            return result
        return quantity.add(
            result, _compute_usage(pod_totals(obj, "requests"), pod_totals(obj, "limits"))
        )

    def constraints(self, required: Iterable[str], obj: Obj) -> str | None:
        """Constraints: ``must specify limits.cpu for: a,b; requests.memory for: a``."""
        wanted = set(required) & MUST_SPECIFY
        missing: dict[str, set[str]] = {}
        spec = obj.get("spec") or {}
        for container in (spec.get("containers") or []) + (spec.get("initContainers") or []):
            has = _compute_usage(_resources(container, "requests"), _resources(container, "limits"))
            for name in wanted - has.keys():
                missing.setdefault(name, set()).add(container.get("name", ""))
        if not missing:
            return None
        parts = [f"{name} for: {','.join(sorted(missing[name]))}" for name in sorted(missing)]
        return "must specify " + "; ".join(parts)


# -- services and persistent volume claims -------------------------------------------------------


@dataclass(frozen=True)
class Services(Evaluator):
    group: str = ""
    plural: str = "services"

    def handles(self, operation: str) -> bool:
        return operation in ("CREATE", "UPDATE")  # a service's type can change

    def names(self) -> tuple[str, ...]:
        return ("count/services", "services", "services.loadbalancers", "services.nodeports")

    def usage(self, obj: Obj) -> Usage:
        spec = obj.get("spec") or {}
        ports = spec.get("ports") or []
        kind = spec.get("type")
        node_ports = 0
        if kind == "NodePort":
            node_ports = len(ports)
        elif kind == "LoadBalancer":
            if spec.get("allocateLoadBalancerNodePorts") is False:
                node_ports = sum(1 for port in ports if port.get("nodePort"))
            else:
                node_ports = len(ports)
        return {
            "count/services": quantity.count(1),
            "services": quantity.count(1),
            "services.loadbalancers": quantity.count(1 if kind == "LoadBalancer" else 0),
            "services.nodeports": quantity.count(node_ports),
        }


@dataclass(frozen=True)
class PersistentVolumeClaims(Evaluator):
    group: str = ""
    plural: str = "persistentvolumeclaims"

    def handles(self, operation: str) -> bool:
        return operation in ("CREATE", "UPDATE")  # a claim may be resized

    def matching_resources(self, names: Iterable[str]) -> list[str]:
        own = ("count/persistentvolumeclaims", "persistentvolumeclaims", "requests.storage")
        return [
            name
            for name in names
            if name in own
            or name.endswith(
                (_STORAGE_CLASS + "persistentvolumeclaims", _STORAGE_CLASS + "requests.storage")
            )
        ]

    def usage(self, obj: Obj) -> Usage:
        spec = obj.get("spec") or {}
        annotations = (obj.get("metadata") or {}).get("annotations") or {}
        storage_class = annotations.get("volume.beta.kubernetes.io/storage-class") or spec.get(
            "storageClassName"
        )
        result: Usage = {
            "persistentvolumeclaims": quantity.count(1),
            "count/persistentvolumeclaims": quantity.count(1),
        }
        if storage_class:
            result[storage_class + _STORAGE_CLASS + "persistentvolumeclaims"] = quantity.count(1)
        requested = _storage(obj)
        if requested is not None:
            result["requests.storage"] = requested
            if storage_class:
                result[storage_class + _STORAGE_CLASS + "requests.storage"] = requested
        return result


def _storage(claim: Obj) -> Quantity | None:
    """getStorageUsage: the request, or the allocated size when larger, in whole bytes."""
    requests = quantity.parse_list(
        ((claim.get("spec") or {}).get("resources") or {}).get("requests")
    )
    allocated = quantity.parse_list((claim.get("status") or {}).get("allocatedResources"))
    wanted = requests.get("storage")
    if wanted is None:
        return None
    if "storage" in allocated and wanted < allocated["storage"]:
        wanted = allocated["storage"]
    return quantity.round_up(wanted, 0)


_SPECIAL: dict[tuple[str, str], Evaluator] = {
    ("", "pods"): Pods(),
    ("", "services"): Services(),
    ("", "persistentvolumeclaims"): PersistentVolumeClaims(),
}


def evaluator_for(group: str, plural: str) -> Evaluator | None:
    """The evaluator for a namespaced resource, or None for one quota ignores."""
    if (group, plural) in IGNORED:
        return None
    return _SPECIAL.get((group, plural)) or Evaluator(group, plural)


def scope_requirements(quota: Obj) -> list[Requirement]:
    """getScopeSelectorsFromQuota: each of ``spec.scopes`` as an Exists requirement, then the
    scopeSelector's matchExpressions."""
    spec = quota.get("spec") or {}
    requirements: list[Requirement] = [
        {"scopeName": scope, "operator": "Exists"} for scope in spec.get("scopes") or []
    ]
    return requirements + list((spec.get("scopeSelector") or {}).get("matchExpressions") or [])


def matches(evaluator: Evaluator, quota: Obj, obj: Obj) -> bool:
    """generic.Matches: the quota's hard names a resource of this kind and every scope holds."""
    hard = (quota.get("status") or {}).get("hard") or {}
    if not evaluator.matching_resources(hard):
        return False
    return all(evaluator.matches_scope(r, obj) for r in scope_requirements(quota))
