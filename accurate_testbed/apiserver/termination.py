"""Emptying terminating containers: namespaces (their objects) and CRDs (their custom objects).

Like the real namespace controller, it deletes what is inside (objects with finalizers wait for
them), and only when nothing is left releases the container's finalizer so it disappears. It
acts as a controller of the server, so its deletions do not pass through admission webhooks.
It follows which containers are terminating from the changes it is told about, so a store full
of live namespaces costs it nothing.

A namespace found empty is released on a later pass, ``NAMESPACE_PASS`` on, as the real
controller checks again after deleting (on a real cluster that takes seconds): a namespace is
seen ``Terminating`` for a moment even when it held nothing, so a client (or a test) that goes on
as if the DELETE had removed it meets what it would meet on a real cluster.
"""

from __future__ import annotations

import copy
import threading
import time
from collections.abc import Sequence

from accurate_testbed.apiserver.api import CRD_CLEANUP_FINALIZER, Api
from accurate_testbed.apiserver.resources import APIEXTENSIONS, Resource, resources_of_crd
from accurate_testbed.apiserver.store import Change, Key, key_of

NAMESPACES = ("", "namespaces")
CRDS = (APIEXTENSIONS, "customresourcedefinitions")
NAMESPACE_PASS = 0.3  # seconds from finding a namespace empty to releasing it


class Termination:
    """A background step; see BackgroundLoop."""

    def __init__(self, api: Api) -> None:
        self.api = api
        self._terminating: set[Key] = set()  # containers being deleted, as far as changes tell
        self._emptied: dict[Key, float] = {}  # namespace -> when it was found empty
        self._later: threading.Timer | None = None  # the next pass for the emptied ones
        # The loop's rounds and the later passes both move containers along.
        self._lock = threading.Lock()

    def __call__(self, changes: Sequence[Change] | None) -> None:
        """Any change may be a deletion (or finalizer removal) a terminating container waits
        for, so each round with changes moves every terminating container along."""
        with self._lock:
            if changes is None:
                self._terminating = {
                    key
                    for key, obj in self.api.store.snapshot()
                    if key[:2] in (NAMESPACES, CRDS) and obj["metadata"].get("deletionTimestamp")
                }
            else:
                for change in changes:
                    self._follow(change)
            self._move_along()

    def _move_along(self) -> None:
        self._emptied = {k: t for k, t in self._emptied.items() if k in self._terminating}
        for key in sorted(self._terminating):
            container = self.api.store.get(*key)
            if container is None:
                self._terminating.discard(key)
            elif key[:2] == NAMESPACES:
                self._empty_namespace(key, container)
            else:
                self._empty_crd(container)

    def _later_pass(self) -> None:
        with self._lock:
            self._later = None
            self._move_along()
            if self._emptied:
                self._pass_at(min(self._emptied.values()) + NAMESPACE_PASS)

    def _pass_at(self, moment: float) -> None:
        """Make a pass at ``moment`` (monotonic time) unless one is due already."""
        if self._later is None:
            self._later = threading.Timer(max(moment - time.monotonic(), 0), self._later_pass)
            self._later.daemon = True
            self._later.start()

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

    def _empty_namespace(self, key: Key, namespace: dict) -> None:
        name = namespace["metadata"]["name"]
        seen: set[tuple[str, str]] = set()
        remaining = False
        for resource in self.api.registry:
            if resource.namespaced and (resource.group, resource.plural) not in seen:
                seen.add((resource.group, resource.plural))
                remaining |= self._delete_all(resource, name)
        finalizers = namespace.get("spec", {}).get("finalizers") or []
        if remaining or "kubernetes" not in finalizers:
            self._emptied.pop(key, None)
            return
        emptied = self._emptied.setdefault(key, time.monotonic())
        if time.monotonic() < emptied + NAMESPACE_PASS:
            self._pass_at(emptied + NAMESPACE_PASS)
        else:
            del self._emptied[key]
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
