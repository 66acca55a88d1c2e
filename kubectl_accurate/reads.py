"""What the commands read before they decide: the namespaces, all of them or the readable part.

An administrator's command starts from one LIST of namespaces, whatever the cluster's size:
the forest answers every structural question from it without a request per namespace. A
tenant holds RoleBindings in their own namespaces and may not list namespaces (403); their view
is then built from what they may read, as kube-apiserver lets them: the namespaces the command
names (else the current namespace, ``-n`` or the context's), the parents and templates above
them as far as readable, and, for the commands that draw trees, the SubNamespaces below,
recursively. A namespace the user may not read is remembered with the server's refusal.

Nothing a tenant may read names a sub-namespace that has no SubNamespace (one grafted by its
parent label alone, by hand or by HNC): its parent label and the copies that name their
source are inside it, SelfSubjectRulesReview answers for one namespace named in advance, and
no API lists the namespaces a user holds rights in. So such a namespace is in a tenant's view
only when the view starts at it or below it; ``list`` without ROOT therefore reads down from
every namespace on the way up, and the notes below say what a view leaves out.
"""

from __future__ import annotations

from collections.abc import Iterable
from itertools import pairwise
from typing import Any, Literal

from kubectl_accurate.namespaces import Namespaces
from kubectl_accurate.subnamespace_api import SubNamespaceApi
from libaccurate.forest import node_from_object
from libaccurate.network.kube import ApiError, Kube, resource_path

NAMESPACES = resource_path("", "v1", "namespaces")
LIMITED_NOTE = (
    "note: you may not list namespaces, so this shows only the namespaces you may read; "
    "ask an administrator to see them all"
)
TREE_NOTE = (
    "note: you may not list namespaces, so this shows only the namespaces you may read, "
    "found up from where it starts and down through SubNamespaces: a sub-namespace without "
    "a SubNamespace (grafted by its parent label alone) is left out unless the view starts at "
    "it or below it ('kubectl accurate list -n NS'); ask an administrator to see them all"
)
CHILDREN_NOTE = (
    "note: you may not list namespaces, so this shows only the namespaces you may read, and "
    "of the children only those a SubNamespace made: a child grafted by its parent label "
    "alone is not counted ('kubectl accurate ns describe CHILD' shows its parent); ask an "
    "administrator to see them all"
)
# Where a partial view reads SubNamespaces: nowhere, below each namespace named, or below
# each and every namespace above it that was read.
Below = Literal["nothing", "named", "chain"]


def namespace_path(name: str) -> str:
    return resource_path("", "v1", "namespaces", name=name)


def read_namespaces(
    kube: Kube, api: SubNamespaceApi, names: Iterable[str | None], below: Below = "nothing"
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
        chain = view.up_from(name)
        starts = {"nothing": [], "named": chain[:1], "chain": view.tree_part(chain)}[below]
        for start in starts:
            view.down_from(start)
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

    def up_from(self, name: str) -> list[str]:
        """The namespace and its parent or template, theirs, ... while readable and new;
        returns those read, from ``name`` up."""
        chain: list[str] = []
        current: str | None = name
        while current is not None and current not in chain:
            namespace = self.get(current)
            if namespace is None:
                break
            chain.append(current)
            current = node_from_object(namespace).source
        return chain

    def tree_part(self, chain: list[str]) -> list[str]:
        """The chain's first namespace and those above it by parent links, up to the first
        template link: the part that can hold SubNamespaces."""
        kept = chain[:1]
        for lower, upper in pairwise(chain):
            if node_from_object(self.found[lower]).parent != upper:
                break
            kept.append(upper)
        return kept

    def down_from(self, name: str) -> None:
        """The sub-namespaces below ``name``, found through the SubNamespaces in each."""
        pending, seen = [name], {name}
        while pending:
            parent = pending.pop()
            if parent in self.subnamespaces or self.get(parent) is None:
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
