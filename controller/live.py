"""The namespace forest an admission review is judged on: the controller's cache, corrected by
live reads from the API of what the rule at hand depends on.

The cache may not have caught up with a change made a moment ago (``kubectl accurate sub move``
patches a namespace's parent label and deletes the old SubNamespace right after). So a review
reads live the namespaces a reference leads to when the cache lacks them, the namespace itself
before deciding whether deleting its SubNamespace deletes it, and the current dependents of a
namespace before it may lose what others depend on. A failed read fails the review (KubeError)
rather than let a request through unchecked.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from libaccurate.admission import CREATE, DELETE, UPDATE
from libaccurate.constants import LABEL_PARENT, LABEL_TEMPLATE
from libaccurate.forest import Forest, Node, node_from_object
from libaccurate.kube import ApiError, Kube, resource_path

_NAMESPACES = resource_path("", "v1", "namespaces")
# A chain of parent/template links is short; this only stops a pathological one.
_MAX_LIVE_READS = 64


class NamespaceSource(Protocol):
    """Where the webhooks get the namespace forest from: the controller's cache."""

    def forest(self) -> Forest:
        """The forest of every namespace as last seen; it may lag behind the API a little."""
        ...


class LiveReads:
    """Forests for reviews: ``namespaces`` (the cache) corrected with reads through ``kube``."""

    def __init__(self, namespaces: NamespaceSource, kube: Kube) -> None:
        self._namespaces = namespaces
        self._kube = kube

    def for_namespace(
        self, operation: str, new: Mapping[str, Any] | None, old: Mapping[str, Any] | None
    ) -> Forest:
        """The forest to judge a CREATE, UPDATE or DELETE of a namespace on."""
        view = _LiveView(self._namespaces.forest(), self._kube)
        if operation == DELETE:
            view.refresh_dependents(_name(old))
            return view.forest
        after = node_from_object(new or {})
        if operation == UPDATE and _links(after) == _links(node_from_object(old or {})):
            return view.forest
        if after.source is not None:
            view.include_chain(after.source)
        if operation == UPDATE:
            view.refresh_dependents(after.name)
        return view.forest

    def for_subnamespace(
        self, operation: str, obj: Mapping[str, Any], allow_cascading_deletion: bool
    ) -> Forest:
        """The forest to judge a CREATE or DELETE of the SubNamespace ``obj`` on (its old self
        for a DELETE)."""
        view = _LiveView(self._namespaces.forest(), self._kube)
        metadata = obj["metadata"]
        if operation == CREATE:
            view.include_chain(metadata["namespace"])
        elif operation == DELETE and not allow_cascading_deletion:
            # Whether the namespace is still this SubNamespace's child decides everything: a
            # cached copy may predate the label patch that moved it away.
            view.refresh(metadata["name"])
            view.include_chain(metadata["name"])
            view.refresh_dependents(metadata["name"])
        return view.forest


class _LiveView:
    """A forest from the cache, corrected with live reads of the namespaces a review needs."""

    def __init__(self, cached: Forest, kube: Kube) -> None:
        self.forest = cached
        self._kube = kube

    def refresh(self, name: str) -> None:
        """Replace the cached ``name`` by what the API says now (gone if it is gone)."""
        self._update({name: self._get(name)})

    def include_chain(self, name: str) -> None:
        """Make ``name`` and every namespace above it known, reading missing ones live.

        A name the API does not have either stays missing, so the rule sees it as missing.
        """
        for _ in range(_MAX_LIVE_READS):
            unknown = self._first_unknown(name)
            if unknown is None:
                return
            found = self._get(unknown)
            if found is None:
                return
            self._update({unknown: found})

    def refresh_dependents(self, name: str) -> None:
        """Replace what the cache says depends on ``name`` by what the API says now."""
        live = [
            node_from_object(obj)
            for label in (LABEL_PARENT, LABEL_TEMPLATE)
            for obj in self._list(f"{label}={name}")
        ]
        current = {node.name for node in live}
        changes: dict[str, Node | None] = {node.name: node for node in live}
        for stale in set(self.forest.dependents(name)) - current:
            changes[stale] = self._get(stale)
        self._update(changes)

    def _first_unknown(self, name: str) -> str | None:
        if name not in self.forest:
            return name
        chain = self.forest.walk_sources(name)
        return chain.names[-1] if chain.end == "missing" else None

    def _update(self, changes: Mapping[str, Node | None]) -> None:
        """Rebuild the forest only when the live reads differ from the cache."""
        if all(self.forest.get(name) == node for name, node in changes.items()):
            return
        nodes = dict(self.forest.nodes)
        for name, node in changes.items():
            if node is None:
                nodes.pop(name, None)
            else:
                nodes[name] = node
        self.forest = Forest.build(nodes.values())

    def _get(self, name: str) -> Node | None:
        try:
            # resource_path quotes the name, which comes from a label of the request.
            path = resource_path("", "v1", "namespaces", name=name)
            return node_from_object(self._kube.get(path))
        except ApiError as error:
            if error.not_found:
                return None
            raise

    def _list(self, selector: str) -> list[dict[str, Any]]:
        listed = self._kube.list_objects(_NAMESPACES, labelSelector=selector)
        return list(listed.get("items") or [])


def _links(node: Node) -> tuple[str | None, str | None, str | None]:
    return node.type, node.parent, node.template


def _name(obj: Mapping[str, Any] | None) -> str:
    return str((obj or {})["metadata"]["name"])
