"""Watch streams: which events a watch with a given resourceVersion, selector and options sees.

Semantics follow kube-apiserver: resourceVersion "" or "0" starts with ADDED events for the
current objects; a specific version replays the changes after it, or ends with an ERROR event
carrying 410 Expired when the history no longer reaches back that far. An object that stops
matching the selector is reported DELETED, one that starts matching ADDED. Bookmarks carry the
version a client may resume from.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from accurate_testbed.apiserver import errors
from accurate_testbed.apiserver.resources import Resource
from accurate_testbed.apiserver.selectors import Predicate
from accurate_testbed.apiserver.store import Change, Expired, Store

Event = dict[str, Any]


@dataclass(frozen=True)
class WatchOptions:
    resource_version: str = ""
    timeout: float = 1800.0
    bookmarks: bool = False
    send_initial_events: bool = False
    bookmark_interval: float = 1.0


def _expired(error: Expired) -> Event:
    return {"type": "ERROR", "object": errors.gone(str(error)).status}


def _bookmark(resource: Resource, rv: int, initial_end: bool = False) -> Event:
    meta: dict[str, Any] = {"resourceVersion": str(rv)}
    if initial_end:
        meta["annotations"] = {"k8s.io/initial-events-end": "true"}
    return {
        "type": "BOOKMARK",
        "object": {"kind": resource.kind, "apiVersion": resource.api_version, "metadata": meta},
    }


class _Matcher:
    """Turns store changes into the events this watch reports.

    As in kube-apiserver's watch cache, the event type comes from whether the object before
    and after the change matches the selector, so a watch resumed from a resourceVersion
    reports the same types as one that saw everything.
    """

    def __init__(self, resource: Resource, namespace: str | None, predicate: Predicate):
        self.resource = resource
        self.namespace = namespace
        self.predicate = predicate

    def initial(self, obj: dict[str, Any]) -> Event | None:
        if not self.predicate(obj):
            return None
        return {"type": "ADDED", "object": obj}

    def event(self, change: Change) -> Event | None:
        if (change.group, change.plural) != (self.resource.group, self.resource.plural):
            return None
        if self.namespace is not None and change.namespace != self.namespace:
            return None
        was = change.old is not None and self.predicate(change.old)
        if change.type == "DELETED":
            return {"type": "DELETED", "object": change.obj} if was else None
        now = self.predicate(change.obj)
        if now:
            return {"type": "MODIFIED" if was else "ADDED", "object": change.obj}
        return {"type": "DELETED", "object": change.obj} if was else None


def stream(
    store: Store,
    resource: Resource,
    namespace: str | None,
    predicate: Predicate,
    options: WatchOptions,
    stopped: Callable[[], bool],
) -> Iterator[Event]:
    """Yield events until the timeout, ``stopped()`` turns true, or the history runs out."""
    matcher = _Matcher(resource, namespace, predicate)
    deadline = time.monotonic() + options.timeout
    if options.resource_version in ("", "0") or options.send_initial_events:
        items, position = store.select(resource.group, resource.plural, namespace)
        for item in items:
            event = matcher.initial(item)
            if event is not None:
                yield event
        if options.send_initial_events:
            yield _bookmark(resource, position, initial_end=True)
    else:
        position = int(options.resource_version)
    last_sent = time.monotonic()
    while not stopped() and time.monotonic() < deadline:
        target = store.resource_version
        try:
            changes = [c for c in store.changes_after(position) if c.rv <= target]
        except Expired as error:
            yield _expired(error)
            return
        position = target
        for change in changes:
            event = matcher.event(change)
            if event is not None:
                last_sent = time.monotonic()
                yield event
        if options.bookmarks and time.monotonic() - last_sent >= options.bookmark_interval:
            last_sent = time.monotonic()
            yield _bookmark(resource, position)
        wait = min(deadline - time.monotonic(), options.bookmark_interval)
        position = store.wait_for_resource_change(
            resource.group, resource.plural, position, timeout=max(wait, 0.0)
        )
