"""The controller's picture of the cluster, kept current by one list and then watches per kind.

Each kind is listed once (in pages) and then watched from the list's resourceVersion, with
bookmarks so that a resumed watch starts close to now. A ``410 Gone`` or a broken stream means
events may have been missed, so the kind is listed again; a watch that merely ended is resumed
where it stopped. Every resync period each kind is listed again anyway, as a safety net against
anything a watch could have lost. Only what the planner reads is kept: namespaces in full but
for other managers' ``managedFields`` (the controller's own say which keys it owns),
SubNamespaces and the sources and copies of watched kinds in full without ``managedFields``,
every other object of a watched kind as a stub of its identity, labels and annotations, so
memory stays bounded by what propagates. The namespace forest the admission webhooks judge on,
and the planner's indexes (libaccurate.index), are kept current with every event, so that
neither a review nor a pass about a few namespaces pays for the cluster's size.
What changed is handed to whoever follows it (a ``Feed``): each change goes to every feed that
follows its kind *beside* the others (to keep a picture of its own current), and to the one
other feed that follows its kind, so that the reconcile loop's lanes each see their own; but a
SubNamespace that changed only in its status goes to the feed of every other kind, the bulk
lane's. Statuses are written by the controller itself (a tenant cannot), a namespace's as soon
as its writes in a pass are done, so during a long pass they come by the thousand, and the
SubNamespace lane would plan each one's namespace only to leave it to the bulk pass writing
there.

A ResourceQuota kept for an HRQ whose ``status.used`` moved (kube-apiserver counted a write
there) may wait a moment for others to gather: it *settles*. Only the quota keeper reads it, to
write the HRQs' statuses, which the issue asks to follow usage within seconds, not at every
write: with a pod every few milliseconds, a pass and an HRQ status write each would compete for
the CPU with the next write's admission. A feed holding only settling changes is ready once
none came for ``SETTLE_QUIET`` or the first of them is ``SETTLE_LONGEST`` old; any other change
makes it ready at once, and a pass then takes them all. An HRQ changed in its status alone (the
keeper's own write echoed back) goes to no feed: the keeper reads that status only to compare
it with what it would write, in the passes other changes start, and a status edited by hand
(tenants cannot) is put right by the next pass that plans its HRQ, a whole one at the latest.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Literal

from controller.owners import awaits_verdict
from controller.throttle import Backoff
from libaccurate import index, quota, subnamespaces
from libaccurate.config import WatchedResource
from libaccurate.constants import (
    ANNOTATION_FROM,
    ANNOTATION_PROPAGATE,
    FIELD_MANAGER,
    GROUP,
    SUBNAMESPACE_PLURAL,
)
from libaccurate.forest import Forest, node_from_object
from libaccurate.index import Index, Indexes
from libaccurate.network import collector
from libaccurate.network.kube import ApiError, Kube, KubeError, resource_path

Obj = dict[str, Any]
Key = tuple[str, str]
# Which feed hears of a change (Cache._bump).
Route = Literal["kind", "others", "settling", "nobody"]
PAGE_SIZE = "500"
# How often a process looks whether its cache is filled, when no change wakes it sooner.
FILL_POLL = 1.0
# A feed holding only settling changes is ready after this long without another one...
SETTLE_QUIET = 0.2
# ... or once the first of them waited this long.
SETTLE_LONGEST = 1.0
# ownerReferences: propagate-generated's owners are found through them, also while it is off
# (controller.generated_notice).
_STUB_FIELDS = (
    "name",
    "namespace",
    "uid",
    "resourceVersion",
    "labels",
    "annotations",
    "ownerReferences",
)

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Resource:
    """One kind the cache mirrors: its name in logs and metrics, where it is listed, what of
    each object is kept, the label selector that limits it to some objects, and the kind it
    is in the planner's indexes (None: not indexed)."""

    name: str
    path: str
    keep: Callable[[Obj], Obj]
    selector: str = ""
    indexed: index.Kind | None = None

    @property
    def query(self) -> dict[str, str]:
        return {"labelSelector": self.selector} if self.selector else {}


@dataclass(frozen=True)
class Expectation:
    """How a write the controller just made will show in the cache once its event arrived.

    ``written``: the object is there at ``resource_version`` or a later one. ``terminating``:
    the incarnation ``uid`` is being deleted or is gone. ``gone``: it is gone. The loop waits
    for its own writes to show before planning again, so that it never acts twice on the same
    stale picture.
    """

    resource: str
    namespace: str
    name: str
    state: Literal["written", "terminating", "gone"] = "written"
    resource_version: str = ""
    uid: str | None = None


def resource_name(group: str, plural: str) -> str:
    """``roles.rbac.authorization.k8s.io``, or the bare plural for the core group."""
    return f"{plural}.{group}" if group else plural


NAMESPACES = "namespaces"
SUBNAMESPACES = resource_name(GROUP, SUBNAMESPACE_PLURAL)
HRQS = resource_name(quota.GROUP, quota.PLURAL)
# Only the ResourceQuotas the controller keeps for HRQs, under a name of their own: the config
# may watch ResourceQuotas for propagation too.
HRQ_QUOTAS = "resourcequotas (kept for hierarchical quotas)"


def _namespace_keeper(obj: Obj) -> Obj:
    """A namespace with only the controller's own ``managedFields`` entries, the ones that
    say which keys it owns: other managers' entries often outweigh the rest of the object,
    and a pass holds two versions of every namespace it writes (its snapshot's and the
    watch's)."""
    metadata = obj.get("metadata") or {}
    entries = metadata.get("managedFields")
    if not entries:
        return obj
    ours = [entry for entry in entries if entry.get("manager") == FIELD_MANAGER]
    return {**obj, "metadata": {**metadata, "managedFields": ours}}


def _without_managed_fields(obj: Obj) -> Obj:
    metadata = obj.get("metadata") or {}
    if "managedFields" not in metadata:
        return obj
    trimmed = {key: value for key, value in metadata.items() if key != "managedFields"}
    return {**obj, "metadata": trimmed}


def _watched_object_keeper(propagate_generated: bool) -> Callable[[Obj], Obj]:
    """What to keep of an object of a watched kind: all of a source or copy, else a stub.

    With propagate-generated on, an object controlled by another one and not yet marked may
    become a source in the very pass that marks it, so it is kept in full too, with its owner
    references.
    """

    def keep(obj: Obj) -> Obj:
        metadata = obj.get("metadata") or {}
        annotations = metadata.get("annotations") or {}
        if ANNOTATION_PROPAGATE in annotations or ANNOTATION_FROM in annotations:
            return _without_managed_fields(obj)
        if propagate_generated and awaits_verdict(obj):
            return _without_managed_fields(obj)
        return {"metadata": {key: metadata[key] for key in _STUB_FIELDS if key in metadata}}

    return keep


def namespaces_only() -> list[Resource]:
    """What the webhook process's cache holds: the namespaces its forest is made of."""
    return [
        Resource(
            NAMESPACES, resource_path("", "v1", NAMESPACES), _namespace_keeper, "", index.NAMESPACES
        )
    ]


def quota_resources() -> list[Resource]:
    """The HRQs and the ResourceQuotas kept for them, on a cluster that has the HRQ CRD."""
    return [
        Resource(
            HRQS, resource_path(quota.GROUP, quota.VERSION, quota.PLURAL), _without_managed_fields
        ),
        Resource(
            HRQ_QUOTAS,
            resource_path("", "v1", "resourcequotas"),
            _without_managed_fields,
            quota.LABEL_HRQ_NAMESPACE,
        ),
    ]


def mirrored(watched: Iterable[WatchedResource], propagate_generated: bool) -> list[Resource]:
    """What the controller's cache holds: namespaces, SubNamespaces and each watched kind."""
    keep = _watched_object_keeper(propagate_generated)
    resources = [
        *namespaces_only(),
        Resource(
            SUBNAMESPACES,
            subnamespaces.path(),
            _without_managed_fields,
            "",
            index.SUBNAMESPACES,
        ),
    ]
    for w in watched:
        name = resource_name(w.gvk.group, w.plural)
        path = resource_path(w.gvk.group, w.gvk.version, w.plural)
        resources.append(Resource(name, path, keep, "", w.gvk))
    return resources


def _key(obj: Mapping[str, Any]) -> Key:
    metadata = obj.get("metadata") or {}
    return (metadata.get("namespace") or "", metadata.get("name") or "")


def _status_only(before: Mapping[str, Any] | None, after: Mapping[str, Any]) -> bool:
    """Whether an object changed in its status alone: a write to the status subresource."""
    return before is not None and _sans_status(before) == _sans_status(after)


def _route(resource: str, before: Mapping[str, Any] | None, after: Mapping[str, Any]) -> Route:
    """Which feed hears of a change (see the module's docstring): the one following its kind,
    unless it is a SubNamespace's status (the bulk lane's), a kept ResourceQuota's usage
    (settling) or an HRQ's status (none). Whether a ResourceQuota counts (the keys of its
    ``status.hard`` and ``status.used``: libaccurate.quota.counting), which the copies into its
    namespace wait for, is no usage change."""
    if resource not in (SUBNAMESPACES, HRQS, HRQ_QUOTAS) or not _status_only(before, after):
        return "kind"
    if resource == SUBNAMESPACES:
        return "others"
    if resource == HRQS:
        return "nobody"
    old, new = (before or {}).get("status") or {}, after.get("status") or {}
    same_keys = (old.get("used") or {}).keys() == (new.get("used") or {}).keys()
    return "settling" if old.get("hard") == new.get("hard") and same_keys else "kind"


def _sans_status(obj: Mapping[str, Any]) -> dict[str, Any]:
    """``obj`` less its status and what every write changes (resourceVersion, managedFields)."""
    metadata = {
        key: value
        for key, value in (obj.get("metadata") or {}).items()
        if key not in ("resourceVersion", "managedFields")
    }
    return {**{key: value for key, value in obj.items() if key != "status"}, "metadata": metadata}


def _version(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("resourceVersion") or "")


def at_least(version: str, wanted: str) -> bool:
    """Whether ``version`` is ``wanted`` or newer.

    Resource versions are opaque to clients in principle; every API server in use hands out
    etcd revisions, which grow. When either is not a number, only equality is trusted.
    """
    if version.isdigit() and wanted.isdigit():
        return int(version) >= int(wanted)
    return version == wanted


class Feed:
    """The changes of some kinds not taken yet: keys of changed objects, by kind.

    Filled by the cache's watches (and by ``give``), emptied by ``take``; a consumer waits on
    it to start work as soon as anything changed.
    """

    def __init__(self, changed: threading.Condition, kinds: frozenset[str] | None) -> None:
        self.kinds = kinds
        self._changed = changed
        self._touched: dict[str, set[Key]] = {}
        self._stopping = False
        # Whether a change that does not settle is among them; when the first and the last
        # settling change came (monotonic seconds).
        self._urgent = False
        self._first_settling = self._last_settling = 0.0

    def take(self) -> dict[str, set[Key]]:
        """The objects changed since the last call, by kind, settled or not.

        Take them before reading the objects: a change that lands in between is then both in
        what is read and in the next call's answer, never in neither.
        """
        with self._changed:
            taken, self._touched, self._urgent = self._touched, {}, False
            return taken

    def give(self, resource: str, keys: Iterable[Key]) -> None:
        """Count ``keys`` of ``resource`` as changed: work another consumer hands over."""
        with self._changed:
            self._add(resource, keys)

    def wait(self, timeout: float) -> bool:
        """Block until the changes are ready to take (any change but a settling one at once,
        settling ones once settled) or ``timeout`` passed; whether they are."""
        deadline = time.monotonic() + max(timeout, 0.0)
        with self._changed:
            while not self._stopping:
                now = time.monotonic()
                ready = self._ready_at()
                if ready <= now:
                    return True
                if now >= deadline:
                    return False
                self._changed.wait(min(ready, deadline) - now)
            return bool(self._touched)

    def _ready_at(self) -> float:
        """When the changes held are ready to take (infinity: there are none)."""
        if self._urgent:
            return 0.0
        if not self._touched:
            return math.inf
        return min(self._first_settling + SETTLE_LONGEST, self._last_settling + SETTLE_QUIET)

    def _add(self, resource: str, keys: Iterable[Key], settles: bool = False) -> None:
        """Under the cache's lock."""
        if settles:
            now = time.monotonic()
            if not self._touched or self._urgent:
                self._first_settling = now
            self._last_settling = now
        else:
            self._urgent = True
        self._touched.setdefault(resource, set()).update(keys)
        self._changed.notify_all()


class Cache:
    """Objects by kind and (namespace, name); ``version`` grows with every change seen."""

    def __init__(self, kube: Kube, resources: Sequence[Resource], resync_period: float) -> None:
        self.kube = kube
        self.resources = tuple(resources)
        self.resync_period = resync_period
        self._objects: dict[str, dict[Key, Obj]] = {r.name: {} for r in self.resources}
        self._listed: set[str] = set()
        # The resourceVersion each kind's list or watch has reached.
        self._positions: dict[str, str] = {}
        self._version = 0
        self._stopping = False
        self._changed = threading.Condition()
        self._forest = Forest()
        self._indexes = Indexes()
        self._indexed = {r.name: r.indexed for r in self.resources if r.indexed is not None}
        # Who is told what changed: each change goes to one of ``_feeds`` (``_bump``), and to
        # each of ``_beside`` that follows its kind.
        self._feeds: list[Feed] = []
        self._beside: list[Feed] = []

    def start(self, stop: threading.Event) -> None:
        """Start one thread per kind; they run until ``stop`` is set (daemon threads). Waits
        on the cache end when ``stop`` is set."""
        for resource in self.resources:
            reflector = _Reflector(self, resource, stop)
            thread = threading.Thread(target=reflector.run, name=f"cache-{resource.name}")
            thread.daemon = True
            thread.start()
        threading.Thread(target=self._wake_on, args=(stop,), name="cache-stop", daemon=True).start()

    def _wake_on(self, stop: threading.Event) -> None:
        stop.wait()
        with self._changed:
            self._stopping = True
            for feed in self._feeds + self._beside:
                feed._stopping = True
            self._changed.notify_all()

    def follow(self, kinds: Iterable[str] | None = None) -> Feed:
        """A feed of the changes from now on to ``kinds``, or (None) to every kind that no
        feed made before it follows."""
        with self._changed:
            feed = Feed(self._changed, None if kinds is None else frozenset(kinds))
            self._feeds.append(feed)
            return feed

    def follow_beside(self, kinds: Iterable[str]) -> Feed:
        """A feed of every change from now on to ``kinds``, whichever feed (if any) also hears
        of it: for what keeps a picture of its own current, rather than work to do."""
        with self._changed:
            feed = Feed(self._changed, frozenset(kinds))
            self._beside.append(feed)
            return feed

    @property
    def synced(self) -> bool:
        """Whether every kind has been listed at least once (what /readyz reports)."""
        with self._changed:
            return len(self._listed) == len(self.resources)

    @property
    def version(self) -> int:
        with self._changed:
            return self._version

    def items(self, resource: str) -> list[Obj]:
        with self._changed:
            return list(self._objects[resource].values())

    def get(self, resource: str, namespace: str, name: str) -> Obj | None:
        """One object as cached, or None; may be called while ``reading`` holds the cache."""
        with self._changed:
            return self._objects[resource].get((namespace, name))

    def namespaces(self) -> tuple[list[Obj], Forest, Index]:
        """The namespaces, a copy of their forest and of the planner's indexes, taken together
        so that they agree."""
        with self._changed:
            namespaces = list(self._objects[NAMESPACES].values())
            return namespaces, self._forest.copy(), self._indexes.index()

    @contextmanager
    def reading(self) -> Iterator[Forest]:
        """The namespace forest as cached, held still while the caller reads it.

        Watch events wait meanwhile, so the caller must only read it (or undo what it changed)
        and must not wait on anything, the API least of all: the forest is shared.
        """
        with self._changed:
            yield self._forest

    def sizes(self) -> dict[str, int]:
        with self._changed:
            return {name: len(objects) for name, objects in self._objects.items()}

    def wait_for_change(self, since: int, timeout: float) -> int:
        """Block until the version differs from ``since`` or ``timeout`` passes; the version."""
        with self._changed:
            self._changed.wait_for(
                lambda: self._version != since or self._stopping, timeout=max(timeout, 0.0)
            )
            return self._version

    def wait_for_expectations(
        self, expectations: Iterable[Expectation], timeout: float, stop: threading.Event
    ) -> list[Expectation]:
        """Block until the cache shows every expected write, or ``timeout`` passed; returns
        the expectations still not met."""
        pending = list(expectations)
        deadline = time.monotonic() + timeout
        with self._changed:
            while pending and not stop.is_set():
                pending = [e for e in pending if not self._shows(e)]
                remaining = deadline - time.monotonic()
                if not pending or remaining <= 0:
                    break
                self._changed.wait(min(remaining, 0.5))
        return pending

    def _shows(self, expected: Expectation) -> bool:
        found = self._objects.get(expected.resource, {}).get((expected.namespace, expected.name))
        if expected.state == "written":
            # Caught up when the object is there at that version or later, or when the kind's
            # watch has gone past it (the object may have been changed or deleted since).
            position = self._positions.get(expected.resource, "")
            if found is not None and at_least(_version(found), expected.resource_version):
                return True
            return position.isdigit() and at_least(position, expected.resource_version)
        if found is None:
            return True
        metadata = found.get("metadata") or {}
        if metadata.get("uid") != expected.uid:
            return True
        return expected.state == "terminating" and bool(metadata.get("deletionTimestamp"))

    def _replace(self, resource: str, objects: dict[Key, Obj], version: str) -> None:
        """A fresh list: signal a change only if any object differs from what was held."""
        with self._changed:
            old = self._objects[resource]
            self._objects[resource] = objects
            if resource == NAMESPACES:
                self._forest = Forest.build(objects.values())
            if resource in self._indexed:
                self._indexes.reset(self._indexed[resource], objects.values())
            self._positions[resource] = version
            first = resource not in self._listed
            self._listed.add(resource)
            before = {key: _version(obj) for key, obj in old.items()}
            after = {key: _version(obj) for key, obj in objects.items()}
            differing = {
                key for key in before.keys() | after.keys() if before.get(key) != after.get(key)
            }
            if first or differing:
                self._bump(resource, differing)
            else:
                self._changed.notify_all()

    def _observe(self, resource: str, event: Mapping[str, Any], keep: Callable[[Obj], Obj]) -> str:
        """Take in one watch event; returns the version the watch has reached."""
        kind = event.get("type")
        obj = event.get("object") or {}
        version = _version(obj)
        with self._changed:
            if version:
                self._positions[resource] = version
            objects = self._objects[resource]
            if kind in ("ADDED", "MODIFIED"):
                found = objects.get(_key(obj))
                if found is None or _version(found) != version:
                    kept = keep(obj)
                    objects[_key(kept)] = kept
                    if resource == NAMESPACES:
                        self._forest.upsert(node_from_object(kept))
                    if resource in self._indexed:
                        self._indexes.put(self._indexed[resource], kept)
                    self._bump(resource, {_key(kept)}, _route(resource, found, kept))
                    return version
            elif kind == "DELETED" and objects.pop(_key(obj), None) is not None:
                if resource == NAMESPACES:
                    self._forest.remove(_key(obj)[1])
                if resource in self._indexed:
                    self._indexes.forget(self._indexed[resource], *_key(obj))
                self._bump(resource, {_key(obj)})
                return version
            self._changed.notify_all()
        return version

    def _bump(self, resource: str, keys: Iterable[Key], route: Route = "kind") -> None:
        """Count a change of ``keys`` and hand it to the feed ``route`` says (``_route``): the
        one following ``resource`` (else the one following every kind no other feed follows),
        that one too but to settle, the latter alone (``others``), or none."""
        feed = None
        if route in ("kind", "settling"):
            feed = next(
                (f for f in self._feeds if f.kinds is not None and resource in f.kinds), None
            )
        if feed is None and route != "nobody":
            feed = next((f for f in self._feeds if f.kinds is None), None)
        if feed is not None:
            feed._add(resource, keys, settles=route == "settling")
        for beside in self._beside:
            if beside.kinds is not None and resource in beside.kinds:
                beside._add(resource, keys)
        self._version += 1
        self._changed.notify_all()


class _Reflector:
    """Keeps one kind of the cache current: list, watch, and list again when needed."""

    def __init__(self, cache: Cache, resource: Resource, stop: threading.Event) -> None:
        self.cache = cache
        self.resource = resource
        self.stop = stop
        self.pause = Backoff(first=0.5, limit=30.0)

    def run(self) -> None:
        while not self.stop.is_set():
            try:
                version = self._list()
                self.pause.reset()
                self._watch(version)
            except ApiError as error:
                if error.code == 410:
                    log.info("watch expired, listing again", extra={"resource": self.resource.name})
                    continue
                self._trouble(error)
            except KubeError as error:
                self._trouble(error)
            except Exception:
                # A reflector that died would freeze the picture for good; log and start over.
                log.exception("cache update failed", extra={"resource": self.resource.name})
                self.stop.wait(self.pause.next())

    def _trouble(self, error: KubeError) -> None:
        log.warning(
            "cannot list or watch, retrying",
            extra={"resource": self.resource.name, "error": str(error)},
        )
        self.stop.wait(self.pause.next())

    def _list(self) -> str:
        """List every object in pages; returns the version to watch from."""
        objects: dict[Key, Obj] = {}
        query = {"limit": PAGE_SIZE, **self.resource.query}
        while True:
            page = self.cache.kube.list_objects(self.resource.path, **query)
            for item in page.get("items") or ():
                kept = self.resource.keep(item)
                objects[_key(kept)] = kept
            metadata = page.get("metadata") or {}
            token = metadata.get("continue")
            if not token:
                break
            query = {"limit": PAGE_SIZE, "continue": token, **self.resource.query}
        version = str(metadata.get("resourceVersion") or "")
        self.cache._replace(self.resource.name, objects, version)
        return version

    def _watch(self, version: str) -> None:
        """Follow changes from ``version`` until the next resync is due or ``stop`` is set."""
        deadline = time.monotonic() + self.cache.resync_period
        while not self.stop.is_set() and (remaining := deadline - time.monotonic()) > 0:
            events = self.cache.kube.watch(
                self.resource.path,
                version,
                timeout_seconds=max(1, math.ceil(remaining)),
                **self.resource.query,
            )
            for event in events:
                if self.stop.is_set():
                    return
                reached = self.cache._observe(self.resource.name, event, self.resource.keep)
                version = reached or version


def hold_once_filled(cache: Cache, stop: threading.Event) -> None:
    """On a thread of its own, once ``cache`` is first filled, keep what it holds out of every
    later pass of the collector (libaccurate.network.collector): both of the controller's
    processes hold a whole cluster's answers, and neither should pay for walking them again."""
    threading.Thread(
        target=_hold_when_filled, args=(cache, stop), name="collector-hold", daemon=True
    ).start()


def _hold_when_filled(cache: Cache, stop: threading.Event) -> None:
    while not cache.synced:
        if stop.is_set():
            return
        cache.wait_for_change(cache.version, FILL_POLL)
    collector.hold()
