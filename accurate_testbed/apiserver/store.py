"""The object store: current objects, the global resourceVersion counter and the watch history.

Like etcd behind kube-apiserver, one counter orders every write of every kind, and a bounded log of
recent changes serves watches; a watch that asks for a version older than the log is told 410
Gone, which is how clients learn to re-list. Stored objects are never mutated in place: a write
stores a new dict, so readers may hold references without copying.

Objects are kept per resource with their (namespace, name) keys in order, and the log is read from
its newest end, so a read costs what it returns, not what the store holds: the in-memory server
must stay as fast with 50,000 objects as with 50. The log also serves reads of the past: the state
at an older version is the current one with every later change undone (each change carries the
object before it), which is how a chunked list serves all its pages at the version of the first.
"""

from __future__ import annotations

import bisect
import threading
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from accurate_testbed.apiserver.cloning import clone

Obj = dict[str, Any]
Key = tuple[str, str, str, str]  # group, plural, namespace ("" if cluster-scoped), name
Position = tuple[str, str]  # namespace ("" if cluster-scoped), name: an object's place in a list


@dataclass(frozen=True)
class Change:
    """One entry of the watch history."""

    rv: int
    type: str  # ADDED, MODIFIED or DELETED
    group: str
    plural: str
    obj: Obj
    # The object before this change (None for ADDED): a watch with a selector needs it to tell
    # MODIFIED from "started matching" (ADDED) and "stopped matching" (DELETED).
    old: Obj | None = None

    @property
    def namespace(self) -> str:
        return str(self.obj["metadata"].get("namespace", ""))


@dataclass(frozen=True)
class Page:
    """Objects of one resource in key order, as they were at version ``rv``."""

    items: list[Obj]
    rv: int
    more: bool  # whether objects (matching or not) follow the last one looked at
    remaining: int  # how many objects follow it


# Told every change as it is made, under the store's lock, and None when everything is forgotten.
Listener = Callable[[Change | None], None]


class Expired(Exception):
    """The requested resourceVersion is older than the kept history."""

    def __init__(self, requested: int, oldest: int):
        super().__init__(f"too old resource version: {requested} ({oldest})")


def key_of(group: str, plural: str, obj: Obj) -> Key:
    meta = obj["metadata"]
    return (group, plural, meta.get("namespace", ""), meta["name"])


class _Table:
    """The objects of one resource, with their positions kept sorted for ranges."""

    def __init__(self) -> None:
        self.positions: list[Position] = []
        self.objects: dict[Position, Obj] = {}

    def put(self, position: Position, obj: Obj) -> None:
        if position not in self.objects:
            bisect.insort(self.positions, position)
        self.objects[position] = obj

    def drop(self, position: Position) -> None:
        del self.objects[position]
        del self.positions[bisect.bisect_left(self.positions, position)]

    def walk(
        self, low: Position, high: Position | None, undone: dict[Position, Obj | None]
    ) -> Iterator[Obj]:
        """The objects from ``low`` (included) to ``high`` (excluded) in order, with the ones in
        ``undone`` as they were before (None: not there yet)."""
        positions = self.positions
        index = bisect.bisect_left(positions, low)
        end = len(positions) if high is None else bisect.bisect_left(positions, high)
        earlier = sorted(p for p in undone if p >= low and (high is None or p < high))
        pending = 0
        while index < end or pending < len(earlier):
            if pending < len(earlier) and (index == end or earlier[pending] <= positions[index]):
                position = earlier[pending]
                pending += 1
                if index < end and positions[index] == position:
                    index += 1
                obj = undone[position]
            else:
                obj = self.objects[positions[index]]
                index += 1
            if obj is not None:
                yield obj

    def count(
        self, low: Position, high: Position | None, undone: dict[Position, Obj | None]
    ) -> int:
        """How many objects ``walk`` yields for the same arguments."""
        end = len(self.positions) if high is None else bisect.bisect_left(self.positions, high)
        total = end - bisect.bisect_left(self.positions, low)
        for position, before in undone.items():
            if position >= low and (high is None or position < high):
                total += (before is not None) - (position in self.objects)
        return total


class Store:
    """Thread-safe; ``changed`` is notified after every write so waiters need not poll."""

    def __init__(self, history: int = 10000) -> None:
        self._lock = threading.RLock()
        self.changed = threading.Condition(self._lock)
        # Watches wait for changes to their own resource only: waking every watch on every
        # write cost each write a wake-up per open watch, paid on the writer's time.
        self._resource_changed: dict[tuple[str, str], threading.Condition] = {}
        self._latest: dict[tuple[str, str], int] = {}
        self._tables: dict[tuple[str, str], _Table] = {}
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
            self._tables.clear()
            self._uids.clear()
            self._log.clear()
            self._compacted = self._rv
            for listener in self._listeners:
                listener(None)
            self._notify_all()

    def subscribe(self, listener: Listener) -> None:
        """Keep ``listener`` informed, synchronously: a cache kept this way (RBAC's index) is
        never behind the store, unlike one fed by a watch."""
        with self.changed:
            self._listeners.append(listener)

    def get(self, group: str, plural: str, namespace: str, name: str) -> Obj | None:
        """The stored object (read-only) or None."""
        table = self._tables.get((group, plural))
        return None if table is None else table.objects.get((namespace, name))

    def by_uid(self, uid: str) -> Key | None:
        return self._uids.get(uid)

    def select(
        self, group: str, plural: str, namespace: str | None = None
    ) -> tuple[list[Obj], int]:
        """Objects of one resource (read-only), optionally in one namespace, with the current rv."""
        page = self.page(group, plural, namespace)
        return page.items, page.rv

    def page(
        self,
        group: str,
        plural: str,
        namespace: str | None = None,
        start: Position = ("", ""),
        rv: int | None = None,
        limit: int = 0,
        keep: Callable[[Obj], bool] | None = None,
    ) -> Page:
        """Up to ``limit`` (0: all) objects that ``keep`` accepts, from ``start`` on, as they were
        at version ``rv`` (None: now); raises Expired when the history no longer reaches back."""
        with self.changed:
            at = self._rv if rv is None else rv
            undone = self._undone(group, plural, at)
            table = self._tables.get((group, plural)) or _Table()
            low, high = start, None
            if namespace is not None:
                low, high = max(start, (namespace, "")), (namespace + "\x00", "")
            items: list[Obj] = []
            looked_at, more = 0, False
            for obj in table.walk(low, high, undone):
                if limit and len(items) >= limit:
                    more = True
                    break
                looked_at += 1
                if keep is None or keep(obj):
                    items.append(obj)
            remaining = table.count(low, high, undone) - looked_at if more else 0
            return Page(items, at, more, remaining)

    def snapshot(self) -> list[tuple[Key, Obj]]:
        """Every stored object with its key (read-only), at one instant."""
        with self.changed:
            return [
                ((group, plural, *position), obj)
                for (group, plural), table in self._tables.items()
                for position, obj in table.objects.items()
            ]

    def write(self, group: str, plural: str, obj: Obj) -> Obj:
        """Store a copy of ``obj`` under a new resourceVersion; returns the stored object."""
        with self.changed:
            key = key_of(group, plural, obj)
            stored = clone(obj)
            table = self._tables.setdefault((group, plural), _Table())
            previous = table.objects.get(key[2:])
            event = "ADDED" if previous is None else "MODIFIED"
            self._rv += 1
            stored["metadata"]["resourceVersion"] = str(self._rv)
            table.put(key[2:], stored)
            self._uids[stored["metadata"]["uid"]] = key
            self._record(Change(self._rv, event, group, plural, stored, previous))
            return stored

    def remove(self, group: str, plural: str, obj: Obj) -> Obj:
        """Delete the object; the DELETED event carries the object at the deletion's version."""
        with self.changed:
            key = key_of(group, plural, obj)
            table = self._tables[(group, plural)]
            current = table.objects[key[2:]]
            table.drop(key[2:])
            self._uids.pop(current["metadata"]["uid"], None)
            self._rv += 1
            final = clone(current)
            final["metadata"]["resourceVersion"] = str(self._rv)
            self._record(Change(self._rv, "DELETED", group, plural, final, current))
            return final

    def changes_after(self, rv: int) -> list[Change]:
        """Changes with a version above ``rv``; raises Expired when some were already dropped."""
        with self.changed:
            if rv < self._compacted:
                raise Expired(rv, self._compacted)
            newer = []
            for change in reversed(self._log):
                if change.rv <= rv:
                    break
                newer.append(change)
            newer.reverse()
            return newer

    def wait_for_change(self, rv: int, timeout: float) -> bool:
        """Block until the counter passes ``rv``, ``wake`` is called or the timeout ends; True if
        the counter passed."""
        with self.changed:
            if self._rv <= rv:
                self.changed.wait(timeout)
            return self._rv > rv

    def wait_for_resource_change(self, group: str, plural: str, rv: int, timeout: float) -> int:
        """Block until one resource changes after ``rv``, ``wake`` is called or the timeout
        ends; writes to other resources do not wake the waiter. Returns the version to read
        changes after: ``rv`` when the resource changed, else the counter, as nothing the
        waiter cares for happened up to it (so the other resources' writes never make it fall
        behind the history)."""
        resource = (group, plural)
        with self.changed:
            if self._latest.get(resource, 0) <= rv:
                condition = self._resource_changed.setdefault(
                    resource, threading.Condition(self._lock)
                )
                condition.wait(timeout)
            return rv if self._latest.get(resource, 0) > rv else self._rv

    def wake(self) -> None:
        """Wake all waiters without a change (used to make watches re-check their exits)."""
        with self.changed:
            self._notify_all()

    def _notify_all(self) -> None:
        self.changed.notify_all()
        for condition in self._resource_changed.values():
            condition.notify_all()

    def _undone(self, group: str, plural: str, rv: int) -> dict[Position, Obj | None]:
        """What the objects of one resource changed since ``rv`` were at ``rv``."""
        before: dict[Position, Obj | None] = {}
        for change in reversed(self.changes_after(rv)):
            if (change.group, change.plural) == (group, plural):
                before[key_of(group, plural, change.obj)[2:]] = change.old
        return before

    def _record(self, change: Change) -> None:
        if self._log.maxlen == 0:
            self._compacted = change.rv
        elif len(self._log) == self._log.maxlen:
            self._compacted = self._log.popleft().rv
        self._log.append(change)
        for listener in self._listeners:
            listener(change)
        resource = (change.group, change.plural)
        self._latest[resource] = change.rv
        self.changed.notify_all()
        condition = self._resource_changed.get(resource)
        if condition is not None:
            condition.notify_all()
