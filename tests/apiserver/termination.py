"""Emptying terminating containers: namespaces (their objects) and CRDs (their custom objects).

Like the real namespace controller, it deletes what is inside (objects with finalizers wait for
them), and only when nothing is left releases the container's finalizer so it disappears. It
acts as a controller of the server, so its deletions do not pass through admission webhooks.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence

from tests.apiserver.api import CRD_CLEANUP_FINALIZER, Api
from tests.apiserver.resources import APIEXTENSIONS, Resource, resources_of_crd
from tests.apiserver.store import Change

_CONTAINER_KINDS = {("", "namespaces"), (APIEXTENSIONS, "customresourcedefinitions")}


class Termination:
    """A background step; see BackgroundLoop."""

    def __init__(self, api: Api) -> None:
        self.api = api
        self._terminating = False  # whether the last pass left a container waiting

    def __call__(self, changes: Sequence[Change] | None) -> None:
        if changes is not None and not any(self._relevant(change) for change in changes):
            return
        self._terminating = False
        for namespace in self.api.store.select("", "namespaces")[0]:
            if namespace["metadata"].get("deletionTimestamp"):
                self._terminating = True
                self._empty_namespace(namespace)
        for crd in self.api.store.select(APIEXTENSIONS, "customresourcedefinitions")[0]:
            if crd["metadata"].get("deletionTimestamp"):
                self._terminating = True
                self._empty_crd(crd)

    def _relevant(self, change: Change) -> bool:
        """Containers changing, or a deletion (or finalizer removal) while one is waiting."""
        if (change.group, change.plural) in _CONTAINER_KINDS:
            return True
        return self._terminating

    def _delete_all(self, resource: Resource, namespace: str | None) -> bool:
        """Delete every object of ``resource`` (in ``namespace``); True if any was left."""
        items, _ = self.api.store.select(resource.group, resource.plural, namespace)
        for item in items:
            self.api.delete_quietly(resource, item)
        return bool(items)

    def _empty_namespace(self, namespace: dict) -> None:
        name = namespace["metadata"]["name"]
        seen: set[tuple[str, str]] = set()
        remaining = False
        for resource in self.api.registry:
            if resource.namespaced and (resource.group, resource.plural) not in seen:
                seen.add((resource.group, resource.plural))
                remaining |= self._delete_all(resource, name)
        finalizers = namespace.get("spec", {}).get("finalizers") or []
        if not remaining and "kubernetes" in finalizers:
            released = copy.deepcopy(namespace)
            released["spec"]["finalizers"] = [f for f in finalizers if f != "kubernetes"]
            namespace_resource = self.api.resource_of("", "namespaces")
            assert namespace_resource is not None
            self.api.write_internal(namespace_resource, namespace, released)

    def _empty_crd(self, crd: dict) -> None:
        finalizers = crd["metadata"].get("finalizers") or []
        served = resources_of_crd(crd)
        if CRD_CLEANUP_FINALIZER not in finalizers:
            return
        if served and self._delete_all(served[0], None):
            return
        released = copy.deepcopy(crd)
        released["metadata"]["finalizers"] = [f for f in finalizers if f != CRD_CLEANUP_FINALIZER]
        crd_resource = self.api.resource_of(APIEXTENSIONS, "customresourcedefinitions")
        assert crd_resource is not None
        self.api.write_internal(crd_resource, crd, released)
