"""Validation the real server applies before it stores an object (answered as 422 Invalid).

Covers object names by kind, labels and annotations (through libaccurate.validation, the same
rules the product's webhooks use), the immutable fields the product runs into, ResourceQuotas
(``quota_validation``), and the schema of custom objects.
"""

from __future__ import annotations

import re
from typing import Any

from accurate_testbed.apiserver import schema
from accurate_testbed.apiserver.errors import GoStruct
from accurate_testbed.apiserver.quota_validation import quota_issues, quota_update_issues
from accurate_testbed.apiserver.resources import RBAC, Resource
from libaccurate.validation import (
    FieldError,
    validate_annotations,
    validate_dns1123_label,
    validate_dns1123_subdomain,
    validate_labels,
)

_DNS1035 = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?")
_DNS1035_TEXT = (
    "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an "
    "alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or "
    "'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')"
)
_IMMUTABLE_DATA = "field is immutable when `immutable` is set"


def _name_issues(resource: Resource, name: str) -> list[FieldError]:
    path = "metadata.name"
    if resource.group == RBAC:
        if name in (".", "..") or "/" in name or "%" in name:
            return [FieldError(path, name, "may not contain '/' or '%'")]
        return []
    if resource.kind == "Namespace":
        return validate_dns1123_label(name, path)
    if resource.kind == "Service":
        issues = []
        if len(name) > 63:
            issues.append(FieldError(path, name, "must be no more than 63 characters"))
        if not _DNS1035.fullmatch(name):
            issues.append(FieldError(path, name, _DNS1035_TEXT))
        return issues
    return validate_dns1123_subdomain(name, path)


def _metadata_issues(meta: dict[str, Any]) -> list[FieldError]:
    return [
        *validate_labels(meta.get("labels") or {}, "metadata.labels"),
        *validate_annotations(meta.get("annotations") or {}, "metadata.annotations"),
    ]


def _crd_issues(obj: dict[str, Any]) -> list[FieldError]:
    spec = obj.get("spec") or {}
    names = spec.get("names") or {}
    expected = f"{names.get('plural', '')}.{spec.get('group', '')}"
    if obj["metadata"]["name"] != expected:
        return [
            FieldError(
                "metadata.name",
                obj["metadata"]["name"],
                'must be spec.names.plural+"."+spec.group',
            )
        ]
    return []


def check_object(resource: Resource, obj: dict[str, Any]) -> list[FieldError]:
    """Everything wrong with an object on its own (create and update alike)."""
    meta = obj["metadata"]
    if not meta.get("name"):
        return [
            FieldError(
                "metadata.name", None, "name or generateName is required", "FieldValueRequired"
            )
        ]
    issues = _name_issues(resource, meta["name"]) + _metadata_issues(meta)
    if resource.custom:
        issues += schema.check(obj, resource.schema)
    if resource.kind == "CustomResourceDefinition":
        issues += _crd_issues(obj)
    if (resource.group, resource.kind) == ("", "ResourceQuota"):
        issues += quota_issues(obj)
    return issues


def _role_ref_issue(old: dict[str, Any], new: dict[str, Any]) -> list[FieldError]:
    if old.get("roleRef") == new.get("roleRef"):
        return []
    ref = new.get("roleRef") or {}
    shown = ", ".join(
        f'{go_name}:"{ref.get(name) or ""}"'
        for go_name, name in (("APIGroup", "apiGroup"), ("Kind", "kind"), ("Name", "name"))
    )
    return [FieldError("roleRef", GoStruct(f"rbac.RoleRef{{{shown}}}"), "cannot change roleRef")]


def _immutable_data_issues(old: dict[str, Any], new: dict[str, Any]) -> list[FieldError]:
    if not old.get("immutable"):
        return []
    issues = []
    if not new.get("immutable"):
        issues.append(FieldError("immutable", None, _IMMUTABLE_DATA, "FieldValueForbidden"))
    for field in ("data", "binaryData"):
        if (old.get(field) or {}) != (new.get(field) or {}):
            issues.append(FieldError(field, None, _IMMUTABLE_DATA, "FieldValueForbidden"))
    return issues


def _finalizer_issues(old: dict[str, Any], new: dict[str, Any]) -> list[FieldError]:
    if not old["metadata"].get("deletionTimestamp"):
        return []
    added = set(new["metadata"].get("finalizers") or []) - set(
        old["metadata"].get("finalizers") or []
    )
    if not added:
        return []
    return [
        FieldError(
            "metadata.finalizers",
            sorted(added),
            "no new finalizers can be added if the object is being deleted",
            "FieldValueForbidden",
        )
    ]


def check_update(resource: Resource, old: dict[str, Any], new: dict[str, Any]) -> list[FieldError]:
    """What an update may not change, in addition to ``check_object`` of the new object."""
    issues = _finalizer_issues(old, new)
    if resource.kind in ("RoleBinding", "ClusterRoleBinding") and resource.group == RBAC:
        issues += _role_ref_issue(old, new)
    if resource.group == "" and resource.kind in ("Secret", "ConfigMap"):
        issues += _immutable_data_issues(old, new)
    if (resource.group, resource.kind) == ("", "ResourceQuota"):
        issues += quota_update_issues(old, new)
    return issues
