"""Discovery documents: /version, /api, /apis and the per group-version resource lists.

Only the legacy (unaggregated) form is served; clients that ask for aggregated discovery fall
back to it when the response's content type is plain JSON, as they do with older servers.
"""

from __future__ import annotations

from typing import Any

from accurate_testbed.apiserver.resources import Registry, Resource

_NOT_WHILE_TERMINATING = ("create", "patch", "update")
VERSION = {
    "major": "1",
    "minor": "32",
    "gitVersion": "v1.32.0-accurate-test",
    "gitCommit": "0000000000000000000000000000000000000000",
    "gitTreeState": "clean",
    "buildDate": "2025-01-01T00:00:00Z",
    "goVersion": "go1.23.0",
    "compiler": "gc",
    "platform": "linux/amd64",
}


def core_versions() -> dict[str, Any]:
    return {
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": "127.0.0.1"}],
    }


def _group(name: str, versions: list[str]) -> dict[str, Any]:
    entries = [{"groupVersion": f"{name}/{version}", "version": version} for version in versions]
    return {"name": name, "versions": entries, "preferredVersion": entries[0]}


def group_list(registry: Registry) -> dict[str, Any]:
    groups = [
        _group(name, versions) for name, versions in registry.group_versions().items() if name
    ]
    return {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}


def group(registry: Registry, name: str) -> dict[str, Any] | None:
    versions = registry.group_versions().get(name)
    if not versions or not name:
        return None
    return {"kind": "APIGroup", "apiVersion": "v1", **_group(name, versions)}


def _advertised_verbs(resource: Resource) -> list[str]:
    """The verbs discovery lists: a terminating CRD's resource loses create, patch and update
    there (its handler still serves patch and update, so finalizers can be removed)."""
    if resource.terminating:
        return [verb for verb in resource.verbs if verb not in _NOT_WHILE_TERMINATING]
    return list(resource.verbs)


def _entries(resource: Resource) -> list[dict[str, Any]]:
    main = {
        "name": resource.plural,
        "singularName": resource.singular_name,
        "namespaced": resource.namespaced,
        "kind": resource.kind,
        "verbs": _advertised_verbs(resource),
    }
    if resource.short_names:
        main["shortNames"] = list(resource.short_names)
    if resource.categories:
        main["categories"] = list(resource.categories)
    subresources = [
        {
            "name": f"{resource.plural}/{sub}",
            "singularName": "",
            "namespaced": resource.namespaced,
            "kind": resource.kind,
            "verbs": ["get", "patch", "update"] if sub == "status" else ["update"],
        }
        for sub in resource.subresources
    ]
    return [main, *subresources]


def resource_list(registry: Registry, group_name: str, version: str) -> dict[str, Any] | None:
    resources = registry.in_group_version(group_name, version)
    if not resources:
        return None
    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": f"{group_name}/{version}" if group_name else version,
        "resources": [entry for resource in resources for entry in _entries(resource)],
    }
