"""The object store: current objects, the global resourceVersion counter and the watch history.

Like etcd behind kube-apiserver, one counter orders every write of every kind, and a bounded log of
recent changes serves watches; a watch that asks for a version older than the log is told 410
Gone, which is how clients learn to re-list. Stored objects are never mutated in place: a write
stores a new dict, so readers may hold references without copying.
"""

from __future__ import annotations

import copy
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

Key = tuple[str, str, str, str]  # group, plural, namespace ("" if cluster-scoped), name


@dataclass(frozen=True)
class Change:
    """One entry of the watch history."""

    rv: int
    type: str  # ADDED, MODIFIED or DELETED
    group: str
    plural: str
    obj: dict[str, Any]
    # The object before this change (None for ADDED): a watch with a selector needs it to tell
    # MODIFIED from "started matching" (ADDED) and "stopped matching" (DELETED).
    old: dict[str, Any] | None = None

    @property
    def namespace(self) -> str:
        return str(self.obj["metadata"].get("namespace", ""))


# Told every change as it is made, under the store's lock, and None when everything is forgotten.
Listener = Callable[[Change | None], None]


class Expired(Exception):
    """The requested resourceVersion is older than the kept history."""

    def __init__(self, requested: int, oldest: int):
        super().__init__(f"too old resource version: {requested} ({oldest})")


def key_of(group: str, plural: str, obj: dict[str, Any]) -> Key:
    meta = obj["metadata"]
    return (group, plural, meta.get("namespace", ""), meta["name"])


class Store:
    """Thread-safe; ``changed`` is notified after every write so waiters need not poll."""

    def __init__(self, history: int = 10000) -> None:
        self.changed = threading.Condition(threading.RLock())
        self._objects: dict[Key, dict[str, Any]] = {}
        self._uids: dict[str, Key] = {}
        self._log: deque[Change] = deque(maxlen=history)
        self._rv = 1
        self._compacted = 1
        self._listeners: list[Listener] = []

    @property
    def resource_version(self) -> int:
        return self._rv

    def set_history(self, size: int) -> None:
        """Shrink or grow the watch history (tests use a tiny one to force 410 Gone)."""
        with self.changed:
            while len(self._log) > size:
                self._compacted = self._log.popleft().rv
            self._log = deque(self._log, maxlen=size)

    def reset(self) -> None:
        """Forget every object; the counter keeps rising so old versions never come back."""
        with self.changed:
            self._objects.clear()
            self._uids.clear()
            self._log.clear()
            self._compacted = self._rv
            for listener in self._listeners:
                listener(None)
            self.changed.notify_all()

    def subscribe(self, listener: Listener) -> None:
        """Keep ``listener`` informed, synchronously: a cache kept this way (RBAC's index) is
        never behind the store, unlike one fed by a watch."""
        with self.changed:
            self._listeners.append(listener)

    def get(self, group: str, plural: str, namespace: str, name: str) -> dict[str, Any] | None:
        """The stored object (read-only) or None."""
        return self._objects.get((group, plural, namespace, name))

    def by_uid(self, uid: str) -> Key | None:
        return self._uids.get(uid)

    def select(
        self, group: str, plural: str, namespace: str | None = None
    ) -> tuple[list[dict[str, Any]], int]:
        """Objects of one resource (read-only), optionally in one namespace, with the current rv."""
        with self.changed:
            items = [
                obj
                for (g, p, ns, _), obj in self._objects.items()
                if g == group and p == plural and (namespace is None or ns == namespace)
            ]
            return sorted(items, key=_sort_key), self._rv

    def snapshot(self) -> list[tuple[Key, dict[str, Any]]]:
        """Every stored object with its key (read-only), at one instant."""
        with self.changed:
            return list(self._objects.items())

    def write(self, group: str, plural: str, obj: dict[str, Any]) -> dict[str, Any]:
        """Store a copy of ``obj`` under a new resourceVersion; returns the stored object."""
        with self.changed:
            key = key_of(group, plural, obj)
            stored = copy.deepcopy(obj)
            previous = self._objects.get(key)
            event = "ADDED" if previous is None else "MODIFIED"
            self._rv += 1
            stored["metadata"]["resourceVersion"] = str(self._rv)
            self._objects[key] = stored
            self._uids[stored["metadata"]["uid"]] = key
            self._record(Change(self._rv, event, group, plural, stored, previous))
            return stored

    def remove(self, group: str, plural: str, obj: dict[str, Any]) -> dict[str, Any]:
        """Delete the object; the DELETED event carries the object at the deletion's version."""
        with self.changed:
            key = key_of(group, plural, obj)
            current = self._objects.pop(key)
            self._uids.pop(current["metadata"]["uid"], None)
            self._rv += 1
            final = copy.deepcopy(current)
            final["metadata"]["resourceVersion"] = str(self._rv)
            self._record(Change(self._rv, "DELETED", group, plural, final, current))
            return final

    def changes_after(self, rv: int) -> list[Change]:
        """Changes with a version above ``rv``; raises Expired when some were already dropped."""
        with self.changed:
            if rv < self._compacted:
                raise Expired(rv, self._compacted)
            return [change for change in self._log if change.rv > rv]

    def wait_for_change(self, rv: int, timeout: float) -> bool:
        """Block until the counter passes ``rv``, ``wake`` is called or the timeout ends; True if
        the counter passed."""
        with self.changed:
            if self._rv <= rv:
                self.changed.wait(timeout)
            return self._rv > rv

    def wake(self) -> None:
        """Wake all waiters without a change (used to make watches re-check their exits)."""
        with self.changed:
            self.changed.notify_all()

    def _record(self, change: Change) -> None:
        if self._log.maxlen == 0:
            self._compacted = change.rv
        elif len(self._log) == self._log.maxlen:
            self._compacted = self._log.popleft().rv
        self._log.append(change)
        for listener in self._listeners:
            listener(change)
        self.changed.notify_all()


def _sort_key(obj: dict[str, Any]) -> tuple[str, str]:
    meta = obj["metadata"]
    return (meta.get("namespace", ""), meta["name"])
