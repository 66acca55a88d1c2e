"""The namespace forest an admission review is judged on: the controller's cache, corrected by
live reads from the API of what the rule at hand depends on.

The cache may not have caught up with a change made a moment ago (``kubectl accurate sub move``
patches a namespace's parent label and deletes the old SubNamespace right after). So a review
reads live the namespaces a reference leads to when the cache lacks them, the namespace itself
before deciding whether deleting its SubNamespace deletes it, and the current dependents of a
namespace before it may lose what others depend on. A failed read fails the review (KubeError)
rather than let a request through unchecked.

The cache's forest is shared and kept current by watch events, so a review never copies or
rebuilds it: the live reads happen first, with the forest let go, and the verdict is reached
while the forest is held, with the corrections put in place for that moment and taken out again.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager
from typing import Any, Protocol

from libaccurate.admission import CREATE, DELETE, UPDATE
from libaccurate.constants import LABEL_PARENT, LABEL_TEMPLATE
from libaccurate.forest import Forest, Node, node_from_object
from libaccurate.network.kube import ApiError, Kube, resource_path

_NAMESPACES = resource_path("", "v1", "namespaces")
# A chain of parent/template links is short; this only stops a pathological one.
_MAX_LIVE_READS = 64

Corrections = Mapping[str, Node | None]
# What the cached forest says links to a namespace through each label.
_LINKED = {LABEL_PARENT: Forest.children, LABEL_TEMPLATE: Forest.instances}


class NamespaceSource(Protocol):
    """Where the webhooks get the namespace forest from: the controller's cache."""

    def reading(self) -> AbstractContextManager[Forest]:
        """The forest of every namespace as last seen (it may lag behind the API a little),
        held still until the block ends. The holder may change it only if it restores it
        before the end, and must not wait on anything meanwhile."""
        ...


class LiveReads:
    """Forests for reviews: ``namespaces`` (the cache) corrected with reads through ``kube``.

    Each method reads what the review needs and returns the forest to judge on, to be used in
    a ``with`` block that holds it still: keep the block to the verdict alone.
    """

    def __init__(self, namespaces: NamespaceSource, kube: Kube) -> None:
        self._namespaces = namespaces
        self._kube = kube

    def for_namespace(
        self, operation: str, new: Mapping[str, Any] | None, old: Mapping[str, Any] | None
    ) -> AbstractContextManager[Forest]:
        """The forest to judge a CREATE, UPDATE or DELETE of a namespace on."""
        view = _LiveView(self._namespaces, self._kube)
        if operation == DELETE:
            view.refresh_dependents(_name(old))
            return view.judged()
        after = node_from_object(new or {})
        if operation == UPDATE and _links(after) == _links(node_from_object(old or {})):
            return view.judged()
        if after.source is not None:
            view.include_chain(after.source)
        if operation == UPDATE:
            view.refresh_dependents(after.name)
        return view.judged()

    def for_subnamespace(
        self, operation: str, obj: Mapping[str, Any], allow_cascading_deletion: bool
    ) -> AbstractContextManager[Forest]:
        """The forest to judge a CREATE or DELETE of the SubNamespace ``obj`` on (its old self
        for a DELETE)."""
        view = _LiveView(self._namespaces, self._kube)
        metadata = obj["metadata"]
        if operation == CREATE:
            view.include_chain(metadata["namespace"])
        elif operation == DELETE and not allow_cascading_deletion:
            # Whether the namespace is still this SubNamespace's child decides everything: a
            # cached copy may predate the label patch that moved it away. Only if it still is
            # do its children count, and only they: the rule looks no further (this review
            # sits between the controller and its removal of the finalizer, issue 31).
            name = metadata["name"]
            node = view.refresh(name)
            if node is not None and node.parent == metadata["namespace"]:
                view.refresh_dependents(name, (LABEL_PARENT,))
        return view.judged()


class _LiveView:
    """The cache's forest and the live reads that correct it for one review."""

    def __init__(self, namespaces: NamespaceSource, kube: Kube) -> None:
        self._namespaces = namespaces
        self._kube = kube
        self._corrections: dict[str, Node | None] = {}

    @contextmanager
    def judged(self) -> Iterator[Forest]:
        """The cached forest held still, with the corrections in place until the block ends."""
        with self._namespaces.reading() as forest:
            undo = _apply(forest, self._corrections)
            try:
                yield forest
            finally:
                _apply(forest, undo)

    def refresh(self, name: str) -> Node | None:
        """Take what the API says of ``name`` now over the cache (None: gone); returns it."""
        node = self._corrections[name] = self._get(name)
        return node

    def include_chain(self, name: str) -> None:
        """Make ``name`` and every namespace above it known, reading missing ones live.

        A name the API does not have either stays missing, so the rule sees it as missing.
        """
        for _ in range(_MAX_LIVE_READS):
            with self.judged() as forest:
                unknown = _first_unknown(forest, name)
            if unknown is None:
                return
            found = self._get(unknown)
            if found is None:
                return
            self._corrections[unknown] = found

    def refresh_dependents(
        self, name: str, labels: tuple[str, ...] = (LABEL_PARENT, LABEL_TEMPLATE)
    ) -> None:
        """Take what the API says depends on ``name`` through ``labels`` (its children, the
        namespaces made from it as a template) now over what the cache says."""
        live = [node_from_object(obj) for label in labels for obj in self._list(f"{label}={name}")]
        current = {node.name for node in live}
        with self.judged() as forest:
            cached = [dependent for label in labels for dependent in _LINKED[label](forest, name)]
            stale = set(cached) - current
        self._corrections.update({node.name: node for node in live})
        self._corrections.update({gone: self._get(gone) for gone in stale})

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


def _apply(forest: Forest, corrections: Corrections) -> dict[str, Node | None]:
    """Put ``corrections`` in ``forest``; returns what undoes the ones that changed it."""
    undo = {}
    for name, node in corrections.items():
        held = forest.get(name)
        if held == node:
            continue
        undo[name] = held
        if node is None:
            forest.remove(name)
        else:
            forest.upsert(node)
    return undo


def _first_unknown(forest: Forest, name: str) -> str | None:
    if name not in forest:
        return name
    chain = forest.walk_sources(name)
    return chain.names[-1] if chain.end == "missing" else None


def _links(node: Node) -> tuple[str | None, str | None, str | None]:
    return node.type, node.parent, node.template


def _name(obj: Mapping[str, Any] | None) -> str:
    return str((obj or {})["metadata"]["name"])
