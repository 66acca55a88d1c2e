"""Garbage collection by ownerReferences, as the real garbage collector does it.

Background: an object all of whose owners are gone is deleted. Foreground: an owner carrying the
``foregroundDeletion`` finalizer waits until its dependents are deleted. Orphan: an owner carrying
``orphan`` has its references removed from its dependents before it goes.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator, Sequence
from typing import Any

from tests.apiserver.api import Api
from tests.apiserver.store import Change

FOREGROUND = "foregroundDeletion"
ORPHAN = "orphan"


class GarbageCollector:
    """A background step; see BackgroundLoop."""

    def __init__(self, api: Api) -> None:
        self.api = api

    def __call__(self, changes: Sequence[Change] | None) -> None:
        if changes is not None and not any(_relevant(change) for change in changes):
            return
        objects = list(self._objects())
        for resource_key, obj in objects:
            refs = obj["metadata"].get("ownerReferences") or []
            if refs and all(self.api.store.by_uid(ref.get("uid", "")) is None for ref in refs):
                self._delete(resource_key, obj, None)
        for resource_key, obj in objects:
            finalizers = obj["metadata"].get("finalizers") or []
            if obj["metadata"].get("deletionTimestamp") and FOREGROUND in finalizers:
                self._finish_foreground(resource_key, obj, objects)
            elif obj["metadata"].get("deletionTimestamp") and ORPHAN in finalizers:
                self._finish_orphan(resource_key, obj, objects)

    def _objects(self) -> Iterator[tuple[tuple[str, str], dict[str, Any]]]:
        for (group, plural, _, _), obj in self.api.store.snapshot():
            yield (group, plural), obj

    def _delete(
        self, resource_key: tuple[str, str], obj: dict[str, Any], policy: str | None
    ) -> None:
        resource = self.api.resource_of(*resource_key)
        if resource is not None:
            self.api.delete_quietly(resource, obj, policy)

    def _finish_foreground(self, owner_key: tuple[str, str], owner: dict, objects: list) -> None:
        dependents = _dependents(owner, objects)
        for resource_key, dependent in dependents:
            self._delete(resource_key, dependent, "Foreground")
        if not dependents:
            self._drop_finalizer(owner_key, owner, FOREGROUND)

    def _finish_orphan(self, owner_key: tuple[str, str], owner: dict, objects: list) -> None:
        uid = owner["metadata"]["uid"]
        for resource_key, dependent in _dependents(owner, objects):
            freed = copy.deepcopy(dependent)
            refs = [r for r in freed["metadata"]["ownerReferences"] if r.get("uid") != uid]
            freed["metadata"]["ownerReferences"] = refs
            if not refs:
                del freed["metadata"]["ownerReferences"]
            self._write(resource_key, dependent, freed)
        self._drop_finalizer(owner_key, owner, ORPHAN)

    def _drop_finalizer(self, resource_key: tuple[str, str], obj: dict, finalizer: str) -> None:
        released = copy.deepcopy(obj)
        released["metadata"]["finalizers"] = [
            f for f in obj["metadata"]["finalizers"] if f != finalizer
        ]
        self._write(resource_key, obj, released)

    def _write(self, resource_key: tuple[str, str], old: dict, new: dict) -> None:
        resource = self.api.resource_of(*resource_key)
        if resource is not None:
            self.api.write_internal(resource, old, new)


def _relevant(change: Change) -> bool:
    meta = change.obj["metadata"]
    return (
        change.type == "DELETED"
        or bool(meta.get("ownerReferences"))
        or bool({FOREGROUND, ORPHAN} & set(meta.get("finalizers") or []))
    )


def _dependents(owner: dict, objects: list) -> list[tuple[tuple[str, str], dict[str, Any]]]:
    uid = owner["metadata"]["uid"]
    return [
        (key, obj)
        for key, obj in objects
        if any(ref.get("uid") == uid for ref in obj["metadata"].get("ownerReferences") or [])
    ]
