"""Emptying terminating containers: namespaces (their objects) and CRDs (their custom objects).

Namespaces as kube-controller-manager's namespace controller empties them
(pkg/controller/namespace/deletion/namespaced_resources_deleter.go, status_condition_utils.go,
namespace_controller.go): an API client, the ServiceAccount ``namespace-controller``. Each pass
sends a DeleteCollection (propagation Background) for every namespaced kind that can be deleted,
which passes admission object by object, so a webhook may refuse; reports in the namespace's
status conditions what failed (``NamespaceDeletionContentFailure``) and what is left
(``NamespaceContentRemaining``, ``NamespaceFinalizersRemaining``); and once nothing is left
takes its finalizer off through the ``namespaces/{name}/finalize`` subresource (an UPDATE that
passes admission too), which removes the namespace. A pass that failed is made again after a
delay that doubles with each failure, up to a minute (the controller's rate-limited queue); a
namespace waiting for finalizers of its objects gets a pass whenever something in it changes.

A namespace found empty is released on a later pass, ``NAMESPACE_PASS`` on, as the real
controller checks again after deleting (on a real cluster that takes seconds): a namespace is
seen ``Terminating`` for a moment even when it held nothing, so a client (or a test) that goes on
as if the DELETE had removed it meets what it would meet on a real cluster.

CRDs as the CRD finalizer controller of the API server does it (apiextensions-apiserver's
pkg/controller/finalizer/crd_finalizer.go): instances (held ones stay, served, until their
finalizers go) are deleted through the storage directly, without admission, and once none is
left the cleanup finalizer is released, which removes the CRD. (Its condition and finalizer
writes skip admission here; the real one sends them to ``customresourcedefinitions/status``
through its loopback client, where webhooks on that subresource would see them.)

It follows which containers are terminating from the changes it is told about, so a store full
of live namespaces costs it nothing.
"""

from __future__ import annotations

import contextlib
import copy
import threading
import time
from collections import Counter
from collections.abc import Sequence

from accurate_testbed.apiserver import crds
from accurate_testbed.apiserver.api import Api, Obj, now
from accurate_testbed.apiserver.errors import ApiError
from accurate_testbed.apiserver.resources import APIEXTENSIONS, Resource, resources_of_crd
from accurate_testbed.apiserver.store import Change, Key, key_of
from accurate_testbed.apiserver.workqueue import Retries, controller_caller

NAMESPACES = ("", "namespaces")
CRDS = (APIEXTENSIONS, "customresourcedefinitions")
NAMESPACE_PASS = 0.3  # seconds from finding a namespace empty to releasing it
CALLER = controller_caller("namespace-controller")
MAX_DELAY = 60.0  # seconds: nsControllerRateLimiter's cap
TOKEN = "kubernetes"  # the finalizer the namespace controller takes off
# The condition types the controller keeps, in the order it adds them, with the reason and
# message each has while nothing is wrong.
CONDITIONS = {
    "NamespaceDeletionDiscoveryFailure": (
        "ResourcesDiscovered",
        "All resources successfully discovered",
    ),
    "NamespaceDeletionGroupVersionParsingFailure": (
        "ParsedGroupVersions",
        "All legacy kube types successfully parsed",
    ),
    "NamespaceDeletionContentFailure": (
        "ContentDeleted",
        "All content successfully deleted, may be waiting on finalization",
    ),
    "NamespaceContentRemaining": ("ContentRemoved", "All content successfully removed"),
    "NamespaceFinalizersRemaining": ("ContentRemoved", "All content successfully removed"),
}


class Termination:
    """A background step; see BackgroundLoop."""

    def __init__(self, api: Api) -> None:
        self.api = api
        self._terminating: set[Key] = set()  # containers being deleted, as far as changes tell
        self._emptied: dict[Key, float] = {}  # namespace -> when it was found empty
        self._later: threading.Timer | None = None  # the next pass for the emptied ones
        self._retries: Retries[Key] = Retries(self._retry, MAX_DELAY)
        # The loop's rounds, the later passes and the retries all move containers along.
        self._lock = threading.Lock()

    def __call__(self, changes: Sequence[Change] | None) -> None:
        """A namespace is moved along when it or something in it changed (a deletion or a
        finalizer removal it may wait for); CRDs on every round with changes."""
        with self._lock:
            if changes is None:
                self._terminating = {
                    key
                    for key, obj in self.api.store.snapshot()
                    if key[:2] in (NAMESPACES, CRDS) and obj["metadata"].get("deletionTimestamp")
                }
                touched = set(self._terminating)
            else:
                touched = set()
                for change in changes:
                    self._follow(change)
                    touched.add(_namespace_of(change))
            self._move_along(touched)

    def _move_along(self, namespaces: set[Key]) -> None:
        """Move the terminating CRDs and ``namespaces`` along (a namespace whose last pass
        failed only when its retry is due)."""
        self._emptied = {k: t for k, t in self._emptied.items() if k in self._terminating}
        for key in sorted(self._terminating):
            container = self.api.store.get(*key)
            if container is None:
                self._terminating.discard(key)
                self._retries.succeeded(key)
            elif key[:2] != NAMESPACES:
                self._empty_crd(container)
            elif key in namespaces and not self._retries.waiting(key):
                self._empty_namespace(key, container)

    def _later_pass(self) -> None:
        with self._lock:
            self._later = None
            self._move_along(set(self._emptied))
            if self._emptied:
                self._pass_at(min(self._emptied.values()) + NAMESPACE_PASS)

    def _retry(self, due: set[Key]) -> None:
        with self._lock:
            self._move_along(due)

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

    def _empty_namespace(self, key: Key, namespace: Obj) -> None:
        """One sync of the namespace controller (Delete in namespaced_resources_deleter.go)."""
        if not (namespace.get("spec") or {}).get("finalizers"):
            return  # finalized already: only metadata finalizers hold it
        failures, remaining = self._delete_all_content(namespace["metadata"]["name"])
        self._report(namespace, failures, remaining)
        if failures:
            self._emptied.pop(key, None)
            self._retries.failed(key)
            return
        self._retries.succeeded(key)
        if remaining:
            self._emptied.pop(key, None)
            return
        emptied = self._emptied.setdefault(key, time.monotonic())
        if time.monotonic() < emptied + NAMESPACE_PASS:
            self._pass_at(emptied + NAMESPACE_PASS)
            return
        del self._emptied[key]
        try:
            self._finalize(key)
        except ApiError:
            self._retries.failed(key)

    def _delete_all_content(self, namespace: str) -> tuple[list[str], list[tuple[str, Obj]]]:
        """deleteAllContent: a DeleteCollection for every namespaced kind that can be deleted;
        the messages of those refused, and the objects left (held by finalizers) with their
        kind as the conditions name it."""
        failures: list[str] = []
        remaining: list[tuple[str, Obj]] = []
        for resource in self.api.registry.namespaced("delete"):
            options = {"propagationPolicy": "Background"}
            try:
                self.api.delete_collection(resource, namespace, "", "", CALLER, options)
            except ApiError as error:
                failures.append(error.status["message"])
                continue
            left, _ = self.api.store.select(resource.group, resource.plural, namespace)
            remaining += [(f"{resource.plural}.{resource.group}", obj) for obj in left]
        return failures, remaining

    def _report(
        self, namespace: Obj, failures: list[str], remaining: list[tuple[str, Obj]]
    ) -> None:
        """Write the namespace's deletion conditions (status_condition_utils.go) when they
        changed; a write that fails is only logged by the real controller, so left."""
        wanted = {kind: ("False", *ok) for kind, ok in CONDITIONS.items()}
        if failures:
            wanted["NamespaceDeletionContentFailure"] = (
                "True",
                "ContentDeletionFailed",
                f"Failed to delete all resource types, {len(failures)} remaining: "
                + ", ".join(sorted(failures)),
            )
        kinds = Counter(kind for kind, _ in remaining)
        held = Counter(f for _, obj in remaining for f in obj["metadata"].get("finalizers") or [])
        for kind, counted, shown, reason, lead in (
            ("NamespaceContentRemaining", kinds, "{} has {} resource instances",
             "SomeResourcesRemain", "Some resources are remaining: "),
            ("NamespaceFinalizersRemaining", held, "{} in {} resource instances",
             "SomeFinalizerRemain", "Some finalizers are remaining: "),
        ):  # fmt: skip
            if counted:
                listed = sorted(shown.format(name, n) for name, n in counted.items())
                wanted[kind] = ("True", reason, lead + ", ".join(listed))
        updated = copy.deepcopy(namespace)
        conditions = updated.setdefault("status", {}).setdefault("conditions", [])
        for kind, (status, reason, message) in wanted.items():
            found = next((c for c in conditions if c.get("type") == kind), None)
            if found is None:
                conditions.append(_condition(kind, status, reason, message))
            elif (found.get("status"), found.get("reason"), found.get("message")) != (
                status,
                reason,
                message,
            ):
                if found.get("status") != status:
                    found["lastTransitionTime"] = now()
                found.update(status=status, reason=reason, message=message)
        if updated == namespace:
            return
        name = namespace["metadata"]["name"]
        with contextlib.suppress(ApiError):
            self.api.update(self._namespaces(), "", name, updated, CALLER, subresource="status")

    def _finalize(self, key: Key) -> None:
        """finalizeNamespace: the finalizers but ``kubernetes`` (sorted, as a set), sent to the
        finalize subresource; read and sent again on a conflict (retryOnConflictError)."""
        while True:
            namespace = self.api.store.get(*key)
            if namespace is None:
                return
            finalized = copy.deepcopy(namespace)
            kept = set(namespace["spec"].get("finalizers") or []) - {TOKEN}
            finalized["spec"]["finalizers"] = sorted(kept)
            try:
                self.api.update(self._namespaces(), "", key[3], finalized, CALLER, "finalize")
                return
            except ApiError as error:
                if error.code == 404:
                    return
                if error.code != 409:
                    raise

    def _namespaces(self) -> Resource:
        resource = self.api.resource_of(*NAMESPACES)
        assert resource is not None
        return resource

    def _empty_crd(self, crd: dict) -> None:
        """The finalizer controller's steps: say deletion is in progress, delete the instances
        (held ones stay, served, until their finalizers go), and once none is left report it
        completed and release the cleanup finalizer, which removes the CRD."""
        if crds.CLEANUP_FINALIZER not in (crd["metadata"].get("finalizers") or []):
            return
        crd = self._write_crd(crd, crds.DELETION_IN_PROGRESS)
        served = resources_of_crd(crd)
        if served and self._delete_instances(served[0]):
            return
        self._write_crd(crd, crds.DELETION_COMPLETED, release=True)

    def _delete_instances(self, resource: Resource) -> bool:
        """Delete every instance, past admission; True if any was left."""
        items, _ = self.api.store.select(resource.group, resource.plural)
        for item in items:
            self.api.delete_quietly(resource, item)
        return bool(items)

    def _write_crd(self, crd: dict, state: tuple[str, str, str], release: bool = False) -> dict:
        """Store ``crd`` with its Terminating condition at ``state`` (and without the cleanup
        finalizer when ``release``), writing only when that changes it."""
        changed = copy.deepcopy(crd)
        crds.set_condition(changed, crds.TERMINATING, state, now())
        if release:
            changed["metadata"]["finalizers"] = [
                f for f in changed["metadata"]["finalizers"] if f != crds.CLEANUP_FINALIZER
            ]
        if changed == crd:
            return crd
        crd_resource = self.api.resource_of(*CRDS)
        assert crd_resource is not None
        return self.api.write_internal(crd_resource, crd, changed)


def _namespace_of(change: Change) -> Key:
    """The namespace a change concerns: the namespace changed, or the one its object is in."""
    if (change.group, change.plural) == NAMESPACES:
        return key_of(change.group, change.plural, change.obj)
    return ("", "namespaces", "", change.namespace)


def _condition(kind: str, status: str, reason: str, message: str) -> Obj:
    return {
        "type": kind,
        "status": status,
        "lastTransitionTime": now(),
        "reason": reason,
        "message": message,
    }
