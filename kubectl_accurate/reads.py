"""What the commands read before they decide: the namespaces, all of them or the readable part.

An administrator's command starts from one LIST of namespaces, whatever the cluster's size:
the forest answers every structural question from it without a request per namespace. A
tenant holds RoleBindings in their own namespaces and may not list namespaces (403); their view
is then built from what they may read, as kube-apiserver lets them: the namespaces the command
names (else the current namespace, ``-n`` or the context's), the parents and templates above
them as far as readable, and, for the commands that draw trees, the SubNamespaces below,
recursively. A namespace the user may not read is remembered with the server's refusal.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from kubectl_accurate.namespaces import Namespaces
from kubectl_accurate.subnamespace_api import SubNamespaceApi
from libaccurate.forest import node_from_object
from libaccurate.network.kube import ApiError, Kube, resource_path

NAMESPACES = resource_path("", "v1", "namespaces")
LIMITED_NOTE = (
    "note: you may not list namespaces, so this shows only the namespaces you may read; "
    "ask an administrator to see them all"
)


def namespace_path(name: str) -> str:
    return resource_path("", "v1", "namespaces", name=name)


def read_namespaces(
    kube: Kube, api: SubNamespaceApi, names: Iterable[str | None], below: bool = False
) -> Namespaces:
    """Every namespace, or, when listing them is forbidden, the view described above, built
    from ``names`` (None stands for the current namespace)."""
    try:
        return Namespaces(kube.list_objects(NAMESPACES).get("items") or [])
    except ApiError as error:
        if error.code != 403:
            raise
    current = kube.credentials.namespace
    view = _Readable(kube, api)
    for name in dict.fromkeys(name or current for name in names):
        view.up_from(name)
        if below:
            view.down_from(name)
    return Namespaces(list(view.found.values()), view.refused, view.subnamespaces)


class _Readable:
    """The namespaces one user could get, and the refusals, gathered one request each."""

    def __init__(self, kube: Kube, api: SubNamespaceApi) -> None:
        self.kube = kube
        self.api = api
        self.found: dict[str, dict[str, Any]] = {}
        self.refused: dict[str, str] = {}
        self.absent: set[str] = set()
        self.subnamespaces: dict[str, list[str]] = {}

    def get(self, name: str) -> dict[str, Any] | None:
        if name in self.found or name in self.refused or name in self.absent:
            return self.found.get(name)
        try:
            self.found[name] = self.kube.get(namespace_path(name))
        except ApiError as error:
            if error.not_found:
                self.absent.add(name)
            elif error.code == 403:
                self.refused[name] = error.message
            else:
                raise
        return self.found.get(name)

    def up_from(self, name: str) -> None:
        """The namespace and its parent or template, theirs, ... while readable and new."""
        seen: set[str] = set()
        current: str | None = name
        while current is not None and current not in seen:
            seen.add(current)
            namespace = self.get(current)
            current = node_from_object(namespace).source if namespace else None

    def down_from(self, name: str) -> None:
        """The sub-namespaces below ``name``, found through the SubNamespaces in each."""
        pending, seen = [name], {name}
        while pending:
            parent = pending.pop()
            if self.get(parent) is None:
                continue
            try:
                children = self.api.list(parent)
            except ApiError as error:
                if error.code != 403:
                    raise
                continue
            self.subnamespaces[parent] = [sub["metadata"]["name"] for sub in children]
            for child in self.subnamespaces[parent]:
                if child not in seen:
                    seen.add(child)
                    pending.append(child)
