"""What kube-apiserver refuses (422) in a ResourceQuota: resource names a quota cannot track,
negative amounts, scopes (listed or in the scopeSelector) that do not exist, contradict each
other or cannot apply to a tracked resource, selector operators and values that do not fit, and
scopes changed after creation. Bad values are shown as Go's ``%#v`` prints them.

Read from ``pkg/apis/core/validation/validation.go`` (ValidateResourceQuota,
ValidateResourceQuotaUpdate, validateResourceQuotaScopes) and ``pkg/apis/core/helper/helpers.go``
(IsStandardQuotaResourceName, IsResourceQuotaScopeValidForResource).
"""

from __future__ import annotations

import functools
import json
import math
import re
from typing import Any

from accurate_testbed.apiserver.errors import GoStruct
from accurate_testbed.apiserver.quota_evaluators import MUST_SPECIFY, POD_COMPUTE, is_extended
from libaccurate import quantity
from libaccurate.validation import FieldError, validate_qualified_name

Obj = dict[str, Any]

# Counted in whole units (IsIntegerResourceName's list).
_COUNTS = frozenset(
    {
        "pods",
        "resourcequotas",
        "services",
        "replicationcontrollers",
        "secrets",
        "configmaps",
        "persistentvolumeclaims",
        "services.nodeports",
        "services.loadbalancers",
    }
)
_STANDARD = POD_COMPUTE | _COUNTS | {"storage", "requests.storage"}
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
_MAX_INT64 = 2**63 - 1
_WRITTEN = re.compile(r"([+-]?)([0-9]*)(?:\.([0-9]*))?(.*)")
_CONFLICTS = (("BestEffort", "NotBestEffort"), ("Terminating", "NotTerminating"))
NEGATIVE = "must be greater than or equal to 0"


_SELECTOR = "spec.scopeSelector.matchExpressions"
_EXISTS_ONLY = (
    "Terminating",
    "NotTerminating",
    "BestEffort",
    "NotBestEffort",
    "CrossNamespacePodAffinity",
)
_EXISTS_ONLY_TEXT = (  # as worded since 1.31
    "must be 'Exists' when scope is any of ResourceQuotaScopeTerminating, "
    "ResourceQuotaScopeNotTerminating, ResourceQuotaScopeBestEffort, "
    "ResourceQuotaScopeNotBestEffort or ResourceQuotaScopeCrossNamespacePodAffinity"
)


class _GoSlice:
    """A slice as Go's %#v prints it in a field error: ``[]T{"a", "b"}``, ``[]T(nil)``."""

    def __init__(self, element: str, items: list[Any] | None) -> None:
        self.element, self.items = element, items

    def __repr__(self) -> str:
        if self.items is None:
            return f"[]{self.element}(nil)"
        return f"[]{self.element}{{{', '.join(_go(item) for item in self.items)}}}"


def _go(value: Any) -> str:
    return json.dumps(value) if isinstance(value, str) else repr(value)


def _scopes(scopes: list[str] | None) -> _GoSlice:
    return _GoSlice("core.ResourceQuotaScope", scopes)


class _Requirement:
    """A ScopedResourceSelectorRequirement as %#v prints it."""

    def __init__(self, requirement: Obj) -> None:
        self.requirement = requirement

    def __repr__(self) -> str:
        req = self.requirement
        values = _GoSlice("string", req.get("values"))
        return (
            f"core.ScopedResourceSelectorRequirement{{ScopeName:{_go(req.get('scopeName', ''))}, "
            f"Operator:{_go(req.get('operator', ''))}, Values:{values!r}}}"
        )


class _Selector:
    """The ScopeSelector a field error shows (Go prints what the pointer points at)."""

    def __init__(self, requirements: list[Obj] | None) -> None:
        self.requirements = requirements

    def __repr__(self) -> str:
        items = None if self.requirements is None else [_Requirement(r) for r in self.requirements]
        expressions = _GoSlice("core.ScopedResourceSelectorRequirement", items)
        return f"core.ScopeSelector{{MatchExpressions:{expressions!r}}}"


def _resource_name_issues(name: str, path: str) -> list[FieldError]:
    """ValidateResourceQuotaResourceName: qualified, and standard when unprefixed (both
    checks report, as Go appends the second to the first's errors). The name is a
    core.ResourceName, whose String() prints it unquoted."""
    shown = GoStruct(name)
    issues = [FieldError(path, shown, e.detail) for e in validate_qualified_name(name, path)]
    if "/" in name:
        return issues
    standard = name in _STANDARD or name.startswith(_HUGE_PAGES)
    if not issues and not standard:
        detail = "must be a standard resource type or fully qualified"
        issues.append(FieldError(path, shown, detail))
    if not standard or name in _QUOTA_ONLY_EXCLUDED:
        issues.append(FieldError(path, shown, "must be a standard resource for quota"))
    return issues


def _list_issues(resources: Any, path: str) -> list[FieldError]:
    issues: list[FieldError] = []
    for name, text in sorted((resources or {}).items()):
        issues += _entry_issues(name, text, f"{path}[{name}]")
    return issues


@functools.lru_cache(maxsize=4096)
def _entry_issues(name: str, text: str, key: str) -> tuple[FieldError, ...]:
    """The issues of one resource and amount; remembered, as every quota status update
    validates the same few again (and a new amount of a known resource reuses its name's)."""
    issues = list(_name_issues(name, key))
    amount = quantity.parse(text)
    if amount.value < 0:
        issues.append(FieldError(key, str(amount), NEGATIVE))
    if _counted_in_units(name) and not _whole_in_millis(amount):
        issues.append(FieldError(key, _quantity_struct(text), "must be an integer"))
    return tuple(issues)


@functools.lru_cache(maxsize=4096)
def _name_issues(name: str, key: str) -> tuple[FieldError, ...]:
    return tuple(_resource_name_issues(name, key))


def _counted_in_units(name: str) -> bool:
    """IsIntegerResourceName: object counts, and extended resources, which every
    ``count/...`` and ``<class>.storageclass.storage.k8s.io/...`` name is too."""
    return name in _COUNTS or is_extended(name)


def _whole_in_millis(amount: quantity.Quantity) -> bool:
    """``MilliValue() % 1000 == 0``: the milli value rounds up and saturates at int64, so an
    amount of 9.3e15 or more (``1E``, ``10P``) is never whole (fixed only after 1.35)."""
    millis = math.ceil(amount.value * 1000)
    return millis <= _MAX_INT64 and millis % 1000 == 0


def _quantity_struct(text: str) -> GoStruct:
    """A resource.Quantity as %#v prints it (String has a pointer receiver), as ParseQuantity's
    fast path builds it from ``text``: exact for text already in canonical form, which is what
    is stored, and approximate for a quantity first written otherwise."""
    written = _WRITTEN.fullmatch(text.strip())
    assert written is not None  # the text parsed as a quantity already
    sign, whole, denominator, suffix = written.groups(default="")
    shifted = (whole.lstrip("0") or "0") + denominator
    fmt = quantity.parse(text).format
    if fmt == quantity.BINARY_SI:
        exponent = quantity.BINARY_SUFFIXES[suffix]
        value, scale = int(shifted) << exponent, 0
        kept = exponent % 10 == 0 and int(shifted) & 7 != 0
    else:
        decimal = quantity.DECIMAL_SUFFIXES.get(suffix)
        exponent = int(suffix[1:]) if decimal is None else decimal
        value, scale = int(shifted), exponent - len(denominator)
        kept = scale % 3 == 0 and not shifted.endswith("000") and shifted[0] != "0"
    cached = json.dumps(text.strip() if kept else "")
    value = -value if sign == "-" else value
    return GoStruct(
        f"resource.Quantity{{i:resource.int64Amount{{value:{value}, scale:{scale}}}, "
        f'd:resource.infDecAmount{{Dec:(*inf.Dec)(nil)}}, s:{cached}, Format:"{fmt}"}}'
    )


def _valid_for(scope: str, resource: str) -> bool:
    """IsResourceQuotaScopeValidForResource."""
    if scope == "BestEffort":
        return resource == "pods"
    if scope in _SCOPES:
        return resource == "pods" or resource in MUST_SPECIFY  # podComputeQuotaResources
    return True


def _tracked(spec: Obj) -> list[str]:
    """The quota's hard resources that IsStandardQuotaResourceName knows."""
    return sorted(
        name
        for name in spec.get("hard") or {}
        if (name in _STANDARD and name not in _QUOTA_ONLY_EXCLUDED) or name.startswith(_HUGE_PAGES)
    )


def _conflicts(scopes: set[str], path: str, shown: _GoSlice) -> list[FieldError]:
    return [
        FieldError(path, shown, "conflicting scopes") for pair in _CONFLICTS if set(pair) <= scopes
    ]


def _scope_issues(spec: Obj) -> list[FieldError]:
    """validateResourceQuotaScopes."""
    scopes = list(spec.get("scopes") or [])
    issues = []
    for scope in scopes:
        if scope not in _SCOPES:
            issues.append(FieldError("spec.scopes", _scopes(scopes), "unsupported scope"))
        for name in _tracked(spec):
            if not _valid_for(scope, name):
                detail = "unsupported scope applied to resource"
                issues.append(FieldError("spec.scopes", _scopes(scopes), detail))
    return issues + _conflicts(set(scopes), "spec.scopes", _scopes(scopes))


def _requirement_issues(requirement: Obj) -> list[FieldError]:
    """The operator and values of one scopeSelector requirement."""
    scope, operator = requirement.get("scopeName", ""), requirement.get("operator", "")
    values = requirement.get("values")
    issues = []
    if scope in _EXISTS_ONLY and operator != "Exists":
        issues.append(FieldError(f"{_SELECTOR}.operator", operator, _EXISTS_ONLY_TEXT))
    if operator in ("In", "NotIn"):
        if not values:
            detail = (
                "must be at least one value when `operator` is 'In' or 'NotIn' for scope selector"
            )
            issues.append(FieldError(f"{_SELECTOR}.values", None, detail, "FieldValueRequired"))
    elif operator in ("Exists", "DoesNotExist"):
        if values:
            detail = (
                "must be no value when `operator` is 'Exist' or 'DoesNotExist' for scope selector"
            )
            issues.append(FieldError(f"{_SELECTOR}.values", _GoSlice("string", values), detail))
    else:
        issues.append(
            FieldError(f"{_SELECTOR}.operator", operator, "not a valid selector operator")
        )
    return issues


def _selector_issues(spec: Obj) -> list[FieldError]:
    """validateScopeSelector."""
    selector = spec.get("scopeSelector")
    if selector is None:
        return []
    requirements = selector.get("matchExpressions")
    issues = []
    for requirement in requirements or []:
        scope = requirement.get("scopeName", "")
        if scope not in _SCOPES:
            issues.append(FieldError(f"{_SELECTOR}.scopeName", scope, "unsupported scope"))
        for name in _tracked(spec):
            if not _valid_for(scope, name):
                detail = "unsupported scope applied to resource"
                issues.append(FieldError(_SELECTOR, _Selector(requirements), detail))
        issues += _requirement_issues(requirement)
    scopes = {requirement.get("scopeName", "") for requirement in requirements or []}
    return issues + _conflicts(scopes, _SELECTOR, _scopes(spec.get("scopes")))


def quota_issues(obj: Obj) -> list[FieldError]:
    """ValidateResourceQuota, spec and status (hard names in sorted order; Go's map order is
    random, so a quota with several errors lists them in some order)."""
    spec, status = obj.get("spec") or {}, obj.get("status") or {}
    return [
        *_list_issues(spec.get("hard"), "spec.hard"),
        *_scope_issues(spec),
        *_selector_issues(spec),
        *_list_issues(status.get("hard"), "status.hard"),
        *_list_issues(status.get("used"), "status.used"),
    ]


def quota_update_issues(old: Obj, new: Obj) -> list[FieldError]:
    """ValidateResourceQuotaUpdate: the set of scopes may not change."""
    before = set((old.get("spec") or {}).get("scopes") or [])
    scopes = list((new.get("spec") or {}).get("scopes") or [])
    if before == set(scopes):
        return []
    return [FieldError("spec.scopes", _scopes(scopes), "field is immutable")]
