"""Reading a request path and method the way kube-apiserver's RequestInfo does.

``/api/v1/namespaces/N/configmaps/X`` is a namespaced object; ``/api/v1/namespaces/N/status`` is
the status of namespace N (``status`` and ``finalize`` are the namespace subresources).
"""

from __future__ import annotations

from dataclasses import dataclass

_NAMESPACE_SUBRESOURCES = ("status", "finalize")


@dataclass(frozen=True)
class ResourcePath:
    group: str
    version: str
    plural: str
    namespace: str | None = None
    name: str | None = None
    subresource: str | None = None


def parse_resource_path(path: str) -> ResourcePath | None:
    """The resource a path addresses, or None for anything that is not a resource path."""
    parts = [part for part in path.split("/") if part]
    if len(parts) >= 3 and parts[0] == "api":
        group, version, rest = "", parts[1], parts[2:]
    elif len(parts) >= 4 and parts[0] == "apis":
        group, version, rest = parts[1], parts[2], parts[3:]
    else:
        return None
    namespace = None
    if rest[0] == "namespaces" and len(rest) > 2 and rest[2] not in _NAMESPACE_SUBRESOURCES:
        namespace, rest = rest[1], rest[2:]
    if len(rest) > 3:
        return None
    return ResourcePath(
        group,
        version,
        rest[0],
        namespace,
        rest[1] if len(rest) > 1 else None,
        rest[2] if len(rest) > 2 else None,
    )


def verb_of(method: str, path: ResourcePath, watch: bool) -> str:
    if method == "GET":
        if path.name is None:
            return "watch" if watch else "list"
        return "get"
    if method == "DELETE" and path.name is None:
        return "deletecollection"
    return {"POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}.get(
        method, method.lower()
    )
