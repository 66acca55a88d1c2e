"""Garbage collection by ownerReferences, as kube-controller-manager's garbage collector does it
(pkg/controller/garbagecollector/garbagecollector.go: attemptToDeleteItem,
processDeletingDependentsItem, orphanDependents; operations.go and patch.go for its calls).

- A dependent none of whose owners exists any more is deleted, with its UID as precondition and
  the propagation policy its own finalizers ask for (background when none does).
- A dependent that still has a live owner stays; its references to owners that are gone, or
  that wait for their dependents, are removed with a patch.
- An owner in foreground deletion (finalizer ``foregroundDeletion``) has its dependents deleted
  (in foreground those that have dependents of their own), and loses the finalizer once no
  dependent that blocks it (``blockOwnerDeletion``) is left.
- An owner in orphan deletion (``orphan``) has its reference removed from every dependent, then
  loses the finalizer.

Like the real collector it is an API client, the ServiceAccount ``generic-garbage-collector``:
its deletions and patches pass the whole admission chain, so a webhook may refuse them, and an
item that failed is tried again after a delay that doubles with each failure (and at once when
a change concerns it, as an informer event requeues it).

Like the real collector's dependency graph, an index of dependents by owner uid follows every
change of the store as it is made, so a round costs work in proportion to the objects its changes
concern, not to the store; a round whose changes are unknown looks at everything.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterable, Sequence
from typing import Any

from accurate_testbed.apiserver import errors
from accurate_testbed.apiserver.api import MERGE_PATCH, STRATEGIC_PATCH, Api
from accurate_testbed.apiserver.errors import ApiError
from accurate_testbed.apiserver.store import Change, Key, key_of
from accurate_testbed.apiserver.workqueue import Retries, controller_caller

FOREGROUND = "foregroundDeletion"
ORPHAN = "orphan"
CALLER = controller_caller("generic-garbage-collector")
MAX_DELAY = 1000.0  # seconds: DefaultControllerRateLimiter's cap
_FINALIZER_ATTEMPTS = 5  # retry.DefaultBackoff.Steps, removeFinalizer's retries on conflict

Obj = dict[str, Any]


class GarbageCollector:
    """A background step; see BackgroundLoop."""

    def __init__(self, api: Api) -> None:
        self.api = api
        self._dependents: dict[str, set[Key]] = {}  # owner uid -> objects that name it
        self._lock = threading.Lock()  # rounds and retries take turns
        self._retries: Retries[Key] = Retries(self._retry, MAX_DELAY)
        with api.store.changed:
            for key, obj in api.store.snapshot():
                self._index(key, obj)
            api.store.subscribe(self._follow)

    def __call__(self, changes: Sequence[Change] | None) -> None:
        if changes is None:
            everything = self.api.store.snapshot()
            self._process(k for k, obj in everything if _owner_uids(obj) or _finalizing(obj))
            return
        items: set[Key] = set()
        for change in changes:
            key = key_of(change.group, change.plural, change.obj)
            if change.type == "DELETED":
                items |= self._dependents_of(change.obj["metadata"]["uid"])
            elif _owner_uids(change.obj) or _finalizing(change.obj):
                items.add(key)
            # A dependent that goes or lets go of its owner may be the one a foreground owner
            # is waiting for.
            for uid in _owner_uids(change.obj) | _owner_uids(change.old):
                owner = self.api.store.by_uid(uid)
                if owner is not None:
                    items.add(owner)
        self._process(sorted(items))

    def _retry(self, due: set[Key]) -> None:
        self._process(sorted(due))

    def _process(self, items: Iterable[Key]) -> None:
        with self._lock:
            for key in items:
                try:
                    self._attempt(key)
                except ApiError:
                    self._retries.failed(key)
                else:
                    self._retries.succeeded(key)

    def _attempt(self, key: Key) -> None:
        """attemptToDeleteItem, and the orphaning worker for an owner that asks for it."""
        obj = self.api.store.get(*key)
        if obj is None:
            return
        if _finalizing(obj):
            if FOREGROUND in obj["metadata"]["finalizers"]:
                self._finish_foreground(key, obj)
            else:
                self._finish_orphan(key, obj)
            return
        if obj["metadata"].get("deletionTimestamp") or not _owner_uids(obj):
            return
        solid, gone, waiting = self._classify(obj)
        if solid:
            if gone or waiting:
                self._drop_references(key, obj, gone | waiting)
        elif waiting and self._dependents_of(obj["metadata"]["uid"]):
            self._delete(key, obj, "Foreground")
        else:
            self._delete(key, obj, _policy(obj))

    def _classify(self, obj: Obj) -> tuple[set[str], set[str], set[str]]:
        """The owner uids that are live, gone, and waiting for their dependents to go."""
        solid: set[str] = set()
        gone: set[str] = set()
        waiting: set[str] = set()
        namespace = obj["metadata"].get("namespace", "")
        for ref in obj["metadata"]["ownerReferences"]:
            uid = ref.get("uid", "")
            owner = self._owner(ref, namespace)
            if owner is None:
                gone.add(uid)
            elif _deleting_dependents(owner):
                waiting.add(uid)
            else:
                solid.add(uid)
        return solid, gone, waiting

    def _owner(self, ref: Obj, namespace: str) -> Obj | None:
        """isDangling: the owner ``ref`` names, looked for in the dependent's namespace (owners
        never cross namespaces, so one elsewhere counts as gone)."""
        key = self.api.store.by_uid(ref.get("uid", ""))
        if key is None or key[2] not in ("", namespace) or key[3] != ref.get("name"):
            return None
        return self.api.store.get(*key)

    def _finish_foreground(self, key: Key, owner: Obj) -> None:
        """Delete the dependents; release the owner once none that blocks it is left."""
        for dependent_key, dependent in self._current_dependents(owner):
            if not _deleting_dependents(dependent):
                self._attempt(dependent_key)
        uid = owner["metadata"]["uid"]
        if not any(_blocks(dep, uid) for _, dep in self._current_dependents(owner)):
            self._remove_finalizer(key, FOREGROUND)

    def _finish_orphan(self, key: Key, owner: Obj) -> None:
        uid = owner["metadata"]["uid"]
        for dependent_key, dependent in self._current_dependents(owner):
            self._drop_references(dependent_key, dependent, {uid})
        self._remove_finalizer(key, ORPHAN)

    def _delete(self, key: Key, obj: Obj, policy: str) -> None:
        """deleteObject: with the UID as precondition, so a namesake created since is spared."""
        resource = self.api.resource_of(key[0], key[1])
        if resource is None:
            return
        meta = obj["metadata"]
        options = {"preconditions": {"uid": meta["uid"]}, "propagationPolicy": policy}
        try:
            self.api.delete(resource, meta.get("namespace", ""), meta["name"], options, CALLER)
        except ApiError as error:
            if error.code not in (404, 409):  # gone, or replaced by a namesake
                raise

    def _drop_references(self, key: Key, obj: Obj, uids: set[str]) -> None:
        """A strategic merge patch deleting the references by uid (metadata.uid in it names the
        object meant); kinds that take none (custom resources) get the JSON merge patch the
        collector falls back to, the remaining references at the resourceVersion it read."""
        resource = self.api.resource_of(key[0], key[1])
        if resource is None:
            return
        meta = obj["metadata"]
        if resource.custom:
            kept = [ref for ref in meta["ownerReferences"] if ref.get("uid") not in uids]
            version = meta["resourceVersion"]
            patch: Obj = {"metadata": {"resourceVersion": version, "ownerReferences": kept or None}}
            self._patch(key, patch, MERGE_PATCH)
        else:
            deletions = [{"$patch": "delete", "uid": uid} for uid in sorted(uids)]
            patch = {"metadata": {"ownerReferences": deletions, "uid": meta["uid"]}}
            self._patch(key, patch, STRATEGIC_PATCH)

    def _remove_finalizer(self, key: Key, finalizer: str) -> None:
        """removeFinalizer: a JSON merge patch of the finalizers at the resourceVersion read,
        read and sent again on a conflict."""
        for _ in range(_FINALIZER_ATTEMPTS):
            current = self.api.store.get(*key)
            finalizers = [] if current is None else current["metadata"].get("finalizers") or []
            if finalizer not in finalizers:
                return
            kept = [f for f in finalizers if f != finalizer]
            version = current["metadata"]["resourceVersion"]  # type: ignore[index]
            patch = {"metadata": {"resourceVersion": version, "finalizers": kept or None}}
            try:
                self._patch(key, patch, MERGE_PATCH)
                return
            except ApiError as error:
                if error.code != 409:
                    raise
        raise errors.conflict(
            key[0],
            key[1],
            key[3],
            f"updateMaxRetries({_FINALIZER_ATTEMPTS}) has reached. The garbage collector will "
            "retry later",
        )

    def _patch(self, key: Key, patch: Obj, content_type: str) -> None:
        resource = self.api.resource_of(key[0], key[1])
        if resource is None:
            return
        body = json.dumps(patch).encode()
        try:
            self.api.patch(resource, key[2], key[3], body, content_type, CALLER)
        except ApiError as error:
            if error.code != 404:
                raise

    def _follow(self, change: Change | None) -> None:
        """Keep the index current; called by the store under its lock."""
        if change is None:
            self._dependents = {}
            return
        key = key_of(change.group, change.plural, change.obj)
        if change.old is not None:
            for uid in _owner_uids(change.old):
                self._dependents.get(uid, set()).discard(key)
        if change.type != "DELETED":
            self._index(key, change.obj)

    def _index(self, key: Key, obj: Obj) -> None:
        for uid in _owner_uids(obj):
            self._dependents.setdefault(uid, set()).add(key)

    def _dependents_of(self, uid: str) -> set[Key]:
        with self.api.store.changed:
            return set(self._dependents.get(uid, ()))

    def _current_dependents(self, owner: Obj) -> list[tuple[Key, Obj]]:
        uid = owner["metadata"]["uid"]
        found = []
        for key in sorted(self._dependents_of(uid)):
            obj = self.api.store.get(*key)
            if obj is not None and uid in _owner_uids(obj):
                found.append((key, obj))
        return found


def _owner_uids(obj: Obj | None) -> set[str]:
    if obj is None:
        return set()
    return {ref.get("uid", "") for ref in obj["metadata"].get("ownerReferences") or []}


def _blocks(dependent: Obj, owner_uid: str) -> bool:
    """Whether the dependent's reference holds a foreground deletion of the owner up."""
    refs = dependent["metadata"].get("ownerReferences") or []
    return any(ref.get("uid") == owner_uid and ref.get("blockOwnerDeletion") for ref in refs)


def _policy(obj: Obj) -> str:
    """The propagation policy for a dependent of nobody: what its finalizers already ask."""
    finalizers = obj["metadata"].get("finalizers") or []
    if ORPHAN in finalizers:
        return "Orphan"
    return "Foreground" if FOREGROUND in finalizers else "Background"


def _deleting_dependents(obj: Obj) -> bool:
    meta = obj["metadata"]
    return bool(meta.get("deletionTimestamp")) and FOREGROUND in (meta.get("finalizers") or [])


def _finalizing(obj: Obj) -> bool:
    """Being deleted and waiting for the collector (foreground or orphan)."""
    meta = obj["metadata"]
    finalizers = meta.get("finalizers") or []
    return bool(meta.get("deletionTimestamp")) and bool({FOREGROUND, ORPHAN} & set(finalizers))
