"""Garbage collection by ownerReferences, as the real garbage collector does it.

Background: an object all of whose owners are gone is deleted. Foreground: an owner carrying the
``foregroundDeletion`` finalizer waits until its dependents are deleted. Orphan: an owner carrying
``orphan`` has its references removed from its dependents before it goes.

Like the real collector's dependency graph, an index of dependents by owner uid follows every
change of the store as it is made, so a round costs work in proportion to the objects its changes
concern, not to the store; a round whose changes are unknown looks at everything.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Sequence
from typing import Any

from accurate_testbed.apiserver.api import Api
from accurate_testbed.apiserver.store import Change, Key, key_of

FOREGROUND = "foregroundDeletion"
ORPHAN = "orphan"


class GarbageCollector:
    """A background step; see BackgroundLoop."""

    def __init__(self, api: Api) -> None:
        self.api = api
        self._dependents: dict[str, set[Key]] = {}  # owner uid -> objects that name it
        with api.store.changed:
            for key, obj in api.store.snapshot():
                self._index(key, obj)
            api.store.subscribe(self._follow)

    def __call__(self, changes: Sequence[Change] | None) -> None:
        if changes is None:
            everything = self.api.store.snapshot()
            self._collect(
                [key for key, obj in everything if _owner_uids(obj)],
                [key for key, obj in everything if _finalizing(obj)],
            )
            return
        dependents: set[Key] = set()
        owners: set[Key] = set()
        for change in changes:
            key = key_of(change.group, change.plural, change.obj)
            if change.type == "DELETED":
                dependents |= self._dependents_of(change.obj["metadata"]["uid"])
            elif _owner_uids(change.obj):
                dependents.add(key)
            if _finalizing(change.obj):
                owners.add(key)
            # A dependent that goes or lets go of its owner may be the one a foreground owner
            # is waiting for.
            for uid in _owner_uids(change.obj) | _owner_uids(change.old):
                owner = self.api.store.by_uid(uid)
                if owner is not None:
                    owners.add(owner)
        self._collect(sorted(dependents), sorted(owners))

    def _collect(self, dependents: Iterable[Key], owners: Iterable[Key]) -> None:
        """Delete the dependents whose owners are all gone, then move the owners waiting in
        foreground or orphan deletion along."""
        store = self.api.store
        for key in dependents:
            obj = store.get(*key)
            uids = _owner_uids(obj)
            if obj is not None and uids and all(store.by_uid(uid) is None for uid in uids):
                self._delete(key, obj, None)
        for key in owners:
            owner = store.get(*key)
            if owner is None or not _finalizing(owner):
                continue
            if FOREGROUND in owner["metadata"]["finalizers"]:
                self._finish_foreground(key, owner)
            else:
                self._finish_orphan(key, owner)

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

    def _index(self, key: Key, obj: dict[str, Any]) -> None:
        for uid in _owner_uids(obj):
            self._dependents.setdefault(uid, set()).add(key)

    def _dependents_of(self, uid: str) -> set[Key]:
        with self.api.store.changed:
            return set(self._dependents.get(uid, ()))

    def _current_dependents(self, owner: dict[str, Any]) -> list[tuple[Key, dict[str, Any]]]:
        uid = owner["metadata"]["uid"]
        found = []
        for key in sorted(self._dependents_of(uid)):
            obj = self.api.store.get(*key)
            if obj is not None and uid in _owner_uids(obj):
                found.append((key, obj))
        return found

    def _delete(self, key: Key, obj: dict[str, Any], policy: str | None) -> None:
        resource = self.api.resource_of(key[0], key[1])
        if resource is not None:
            self.api.delete_quietly(resource, obj, policy)

    def _finish_foreground(self, owner_key: Key, owner: dict[str, Any]) -> None:
        dependents = self._current_dependents(owner)
        for key, dependent in dependents:
            self._delete(key, dependent, "Foreground")
        if not dependents:
            self._drop_finalizer(owner_key, owner, FOREGROUND)

    def _finish_orphan(self, owner_key: Key, owner: dict[str, Any]) -> None:
        uid = owner["metadata"]["uid"]
        for key, dependent in self._current_dependents(owner):
            freed = copy.deepcopy(dependent)
            refs = [r for r in freed["metadata"]["ownerReferences"] if r.get("uid") != uid]
            freed["metadata"]["ownerReferences"] = refs
            if not refs:
                del freed["metadata"]["ownerReferences"]
            self._write(key, dependent, freed)
        self._drop_finalizer(owner_key, owner, ORPHAN)

    def _drop_finalizer(self, key: Key, obj: dict[str, Any], finalizer: str) -> None:
        released = copy.deepcopy(obj)
        released["metadata"]["finalizers"] = [
            f for f in obj["metadata"]["finalizers"] if f != finalizer
        ]
        self._write(key, obj, released)

    def _write(self, key: Key, old: dict[str, Any], new: dict[str, Any]) -> None:
        resource = self.api.resource_of(key[0], key[1])
        if resource is not None:
            self.api.write_internal(resource, old, new)


def _owner_uids(obj: dict[str, Any] | None) -> set[str]:
    if obj is None:
        return set()
    return {ref.get("uid", "") for ref in obj["metadata"].get("ownerReferences") or []}


def _finalizing(obj: dict[str, Any]) -> bool:
    """Being deleted and waiting for the collector (foreground or orphan)."""
    meta = obj["metadata"]
    finalizers = meta.get("finalizers") or []
    return bool(meta.get("deletionTimestamp")) and bool({FOREGROUND, ORPHAN} & set(finalizers))
