"""The OpenAPI v3 documents kubectl reads before it writes.

kubectl (create -f, apply) checks per kind whether the server validates fields itself (a
``fieldValidation`` query parameter on the kind's PATCH operation); when it does, kubectl skips
client-side validation, which would need the protobuf-encoded v2 document. So each group-version
document lists the resource paths with that parameter; schemas are included for CRDs only.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from accurate_testbed.apiserver.resources import Registry, Resource


def _prefix(group: str, version: str) -> str:
    return f"api/{version}" if not group else f"apis/{group}/{version}"


def _document_path(resource: Resource) -> str:
    base = "/" + _prefix(resource.group, resource.version)
    scope = "/namespaces/{namespace}" if resource.namespaced else ""
    return f"{base}{scope}/{resource.plural}/{{name}}"


def _schema_name(resource: Resource) -> str:
    group = ".".join(reversed(resource.group.split("."))) if resource.group else "core"
    return f"{group}.{resource.version}.{resource.kind}"


def _operation(resource: Resource) -> dict[str, Any]:
    return {
        "x-kubernetes-group-version-kind": {
            "group": resource.group,
            "version": resource.version,
            "kind": resource.kind,
        },
        "parameters": [
            {"name": name, "in": "query", "schema": {"type": "string"}}
            for name in ("dryRun", "fieldManager", "fieldValidation", "force")
        ],
        "responses": {"200": {"description": "OK"}},
    }


def group_version_document(registry: Registry, group: str, version: str) -> dict[str, Any] | None:
    resources = registry.in_group_version(group, version)
    if not resources:
        return None
    schemas = {
        _schema_name(resource): {
            **(resource.schema or {"type": "object"}),
            "x-kubernetes-group-version-kind": [
                {"group": resource.group, "version": resource.version, "kind": resource.kind}
            ],
        }
        for resource in resources
        if resource.custom
    }
    return {
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": "v1.32.0"},
        "paths": {
            _document_path(resource): {"patch": _operation(resource)} for resource in resources
        },
        "components": {"schemas": schemas},
    }


def root_document(registry: Registry) -> dict[str, Any]:
    paths = {}
    for group, versions in registry.group_versions().items():
        for version in versions:
            document = group_version_document(registry, group, version)
            digest = hashlib.sha256(json.dumps(document, sort_keys=True).encode()).hexdigest()
            prefix = _prefix(group, version)
            paths[prefix] = {"serverRelativeURL": f"/openapi/v3/{prefix}?hash={digest.upper()}"}
    return {"paths": paths}
