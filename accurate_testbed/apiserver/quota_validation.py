"""What kube-apiserver refuses (422) in a ResourceQuota: resource names a quota cannot track,
negative amounts, scopes that do not exist, contradict each other or cannot apply to a tracked
resource, and scopes changed after creation.

Read from ``pkg/apis/core/validation/validation.go`` (ValidateResourceQuota,
ValidateResourceQuotaUpdate, validateResourceQuotaScopes) and ``pkg/apis/core/helper/helpers.go``
(IsStandardQuotaResourceName, IsResourceQuotaScopeValidForResource).
"""

from __future__ import annotations

from typing import Any

from accurate_testbed.apiserver.quota_evaluators import MUST_SPECIFY, POD_COMPUTE
from libaccurate import quantity
from libaccurate.validation import FieldError, validate_qualified_name

Obj = dict[str, Any]

_STANDARD = POD_COMPUTE | {
    "pods",
    "resourcequotas",
    "services",
    "replicationcontrollers",
    "secrets",
    "configmaps",
    "persistentvolumeclaims",
    "storage",
    "requests.storage",
    "services.nodeports",
    "services.loadbalancers",
}
_QUOTA_ONLY_EXCLUDED = frozenset({"storage"})  # a standard resource, but not one for quota
_HUGE_PAGES = ("hugepages-", "requests.hugepages-")
_SCOPES = frozenset(
    {
        "Terminating",
        "NotTerminating",
        "BestEffort",
        "NotBestEffort",
        "PriorityClass",
        "CrossNamespacePodAffinity",
    }
)
_CONFLICTS = (("BestEffort", "NotBestEffort"), ("Terminating", "NotTerminating"))
NEGATIVE = "must be greater than or equal to 0"


class _Scopes:
    """``[]core.ResourceQuotaScope{...}`` as Go's %#v prints the list in a field error."""

    def __init__(self, scopes: list[str]) -> None:
        self.scopes = scopes

    def __repr__(self) -> str:
        inner = ", ".join(f'"{scope}"' for scope in self.scopes)
        return f"[]core.ResourceQuotaScope{{{inner}}}"


def _resource_name_issues(name: str, path: str) -> list[FieldError]:
    """ValidateResourceQuotaResourceName: qualified, and standard when unprefixed (both
    checks report, as Go appends the second to the first's errors)."""
    issues = [FieldError(path, name, e.detail) for e in validate_qualified_name(name, path)]
    if "/" in name:
        return issues
    standard = name in _STANDARD or name.startswith(_HUGE_PAGES)
    if not issues and not standard:
        issues.append(FieldError(path, name, "must be a standard resource type or fully qualified"))
    if not standard or name in _QUOTA_ONLY_EXCLUDED:
        issues.append(FieldError(path, name, "must be a standard resource for quota"))
    return issues


def _list_issues(resources: Any, path: str) -> list[FieldError]:
    issues: list[FieldError] = []
    for name, value in sorted((resources or {}).items()):
        key = f"{path}[{name}]"
        issues += _resource_name_issues(name, key)
        if quantity.parse(value).nanos < 0:
            issues.append(FieldError(key, str(quantity.parse(value)), NEGATIVE))
    return issues


def _valid_for(scope: str, resource: str) -> bool:
    """IsResourceQuotaScopeValidForResource."""
    if scope == "BestEffort":
        return resource == "pods"
    if scope in _SCOPES:
        return resource == "pods" or resource in MUST_SPECIFY  # podComputeQuotaResources
    return True


def _scope_issues(spec: Obj) -> list[FieldError]:
    """validateResourceQuotaScopes."""
    scopes = list(spec.get("scopes") or [])
    if not scopes:
        return []
    tracked = sorted(
        name
        for name in spec.get("hard") or {}
        if (name in _STANDARD and name not in _QUOTA_ONLY_EXCLUDED) or name.startswith(_HUGE_PAGES)
    )
    issues = []
    for scope in scopes:
        if scope not in _SCOPES:
            issues.append(FieldError("spec.scopes", _Scopes(scopes), "unsupported scope"))
        for name in tracked:
            if not _valid_for(scope, name):
                detail = "unsupported scope applied to resource"
                issues.append(FieldError("spec.scopes", _Scopes(scopes), detail))
    for pair in _CONFLICTS:
        if set(pair) <= set(scopes):
            issues.append(FieldError("spec.scopes", _Scopes(scopes), "conflicting scopes"))
    return issues


def quota_issues(obj: Obj) -> list[FieldError]:
    """ValidateResourceQuota, spec and status (hard names in sorted order; Go's map order is
    random, so a quota with several errors lists them in some order)."""
    spec, status = obj.get("spec") or {}, obj.get("status") or {}
    return [
        *_list_issues(spec.get("hard"), "spec.hard"),
        *_scope_issues(spec),
        *_list_issues(status.get("hard"), "status.hard"),
        *_list_issues(status.get("used"), "status.used"),
    ]


def quota_update_issues(old: Obj, new: Obj) -> list[FieldError]:
    """ValidateResourceQuotaUpdate: the set of scopes may not change."""
    before = set((old.get("spec") or {}).get("scopes") or [])
    scopes = list((new.get("spec") or {}).get("scopes") or [])
    if before == set(scopes):
        return []
    return [FieldError("spec.scopes", _Scopes(scopes), "field is immutable")]
