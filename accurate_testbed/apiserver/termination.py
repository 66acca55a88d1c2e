"""Emptying terminating containers: namespaces (their objects) and CRDs (their custom objects).

Like the real namespace controller, it deletes what is inside (objects with finalizers wait for
them), and only when nothing is left releases the container's finalizer so it disappears. It
acts as a controller of the server, so its deletions do not pass through admission webhooks.
It follows which containers are terminating from the changes it is told about, so a store full
of live namespaces costs it nothing.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence

from accurate_testbed.apiserver.api import CRD_CLEANUP_FINALIZER, Api
from accurate_testbed.apiserver.resources import APIEXTENSIONS, Resource, resources_of_crd
from accurate_testbed.apiserver.store import Change, Key, key_of

NAMESPACES = ("", "namespaces")
CRDS = (APIEXTENSIONS, "customresourcedefinitions")


class Termination:
    """A background step; see BackgroundLoop."""

    def __init__(self, api: Api) -> None:
        self.api = api
        self._terminating: set[Key] = set()  # containers being deleted, as far as changes tell

    def __call__(self, changes: Sequence[Change] | None) -> None:
        """Any change may be a deletion (or finalizer removal) a terminating container waits
        for, so each round with changes moves every terminating container along."""
        if changes is None:
            self._terminating = {
                key
                for key, obj in self.api.store.snapshot()
                if key[:2] in (NAMESPACES, CRDS) and obj["metadata"].get("deletionTimestamp")
            }
        else:
            for change in changes:
                self._follow(change)
        for key in sorted(self._terminating):
            container = self.api.store.get(*key)
            if container is None:
                self._terminating.discard(key)
            elif key[:2] == NAMESPACES:
                self._empty_namespace(container)
            else:
                self._empty_crd(container)

    def _follow(self, change: Change) -> None:
        if (change.group, change.plural) not in (NAMESPACES, CRDS):
            return
        key = key_of(change.group, change.plural, change.obj)
        if change.type != "DELETED" and change.obj["metadata"].get("deletionTimestamp"):
            self._terminating.add(key)
        else:
            self._terminating.discard(key)

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
            namespace_resource = self.api.resource_of(*NAMESPACES)
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
        crd_resource = self.api.resource_of(*CRDS)
        assert crd_resource is not None
        self.api.write_internal(crd_resource, crd, released)
