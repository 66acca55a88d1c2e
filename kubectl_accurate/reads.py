"""The reads the commands share: all namespaces at once, and single SubNamespaces.

Every command starts from one LIST of namespaces, whatever the cluster's size: the forest
answers every structural question from it without a request per namespace.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from libaccurate.constants import GROUP, STORAGE_VERSION, SUBNAMESPACE_PLURAL
from libaccurate.forest import Forest
from libaccurate.kube import ApiError, Kube, resource_path

Obj = Mapping[str, Any]
NAMESPACES = resource_path("", "v1", "namespaces")
SUBNAMESPACE_API_VERSION = f"{GROUP}/{STORAGE_VERSION}"


class Namespaces:
    """Every namespace of the cluster, by name, and the forest they form."""

    def __init__(self, items: list[dict[str, Any]]) -> None:
        self.items = items
        self.by_name = {item["metadata"]["name"]: item for item in items}
        self.forest = Forest.build(items)

    def get(self, name: str) -> dict[str, Any] | None:
        return self.by_name.get(name)


def list_namespaces(kube: Kube) -> Namespaces:
    return Namespaces(list(kube.list_objects(NAMESPACES).get("items") or []))


def namespace_path(name: str) -> str:
    return resource_path("", "v1", "namespaces", name=name)


def subnamespace_path(namespace: str, name: str | None = None) -> str:
    return resource_path(GROUP, STORAGE_VERSION, SUBNAMESPACE_PLURAL, namespace, name)


def get_subnamespace(kube: Kube, namespace: str, name: str) -> dict[str, Any] | None:
    """The SubNamespace, or None when there is none (or its namespace does not exist)."""
    try:
        return kube.get(subnamespace_path(namespace, name))
    except ApiError as error:
        if error.not_found:
            return None
        raise
