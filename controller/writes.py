"""How each planned action is carried out: the API requests it stands for.

Every request waits for the client-side rate limit of its kind and for the right to write (the
lease), and a refusal for a passing reason (429, 5xx, a timeout) is tried again after a growing
pause. A 409 Conflict is never retried blindly: the plan was made from a picture that is out of
date, so the action is left to the next pass (``Replan``), which plans from fresher data.
Preconditions (uid, resourceVersion) ride along on every write that could otherwise hit an
object changed since the snapshot. A status is the last word of a pass about a SubNamespace, so
it is checked against the cache as it is when it goes out: one the pass planned for a
SubNamespace since deleted or changed is not sent (the change brings a pass of its own), so that
no status is ever written onto a SubNamespace being deleted.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping
from datetime import datetime, timezone
from typing import Any, NoReturn, TypeVar

from controller.cache import NAMESPACES, SUBNAMESPACES, Expectation, at_least, resource_name
from controller.events import EVENTS, Recorder
from controller.metrics import Metrics
from controller.throttle import Backoff, Throttles
from libaccurate import subnamespaces
from libaccurate.actions import (
    Action,
    AddFinalizer,
    AnnotateObject,
    ApplyNamespaceMetadata,
    CreateNamespace,
    CreateObject,
    DeleteNamespace,
    DeleteObject,
    EmitEvent,
    ObjectRef,
    PatchSubNamespaceStatus,
    RemoveFinalizer,
    ReplaceObject,
)
from libaccurate.config import WatchedResource
from libaccurate.constants import (
    FIELD_MANAGER,
    FINALIZER,
    LABEL_PARENT,
)
from libaccurate.lifecycle import OWNED_CONDITIONS
from libaccurate.network.kube import ApiError, Kube, KubeError, resource_path
from libaccurate.ownership import OwnedKeys, upgraded_managed_fields

Obj = dict[str, Any]
T = TypeVar("T")

DELETE_OPTIONS = {"apiVersion": "v1", "kind": "DeleteOptions"}
RETRY_AFTER_LIMIT = 30.0


class Replan(Exception):
    """The server's answer shows the plan was made from stale data: leave it to the next pass."""


class Aborted(Exception):
    """The controller is stopping or lost the lease: no more writes."""


# How the writes of an action will show in the cache once their watch events arrived.
Written = tuple[Expectation, ...]
# The cache's object of a kind, namespace and name as it is now.
Lookup = Callable[[str, str, str], Mapping[str, Any] | None]


def unreachable(value: NoReturn) -> NoReturn:
    """Where a ``match`` over a closed set of types ends: mypy flags a forgotten case."""
    raise AssertionError(f"unhandled {type(value).__name__}")


def _metadata(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return obj.get("metadata") or {}


def _now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _expect(resource: str, obj: Mapping[str, Any]) -> Expectation:
    metadata = _metadata(obj)
    namespace, name = metadata.get("namespace") or "", metadata.get("name") or ""
    version = str(metadata.get("resourceVersion") or "")
    return Expectation(resource, namespace, name, resource_version=version)


def _retry_after(error: ApiError) -> float | None:
    seconds = (error.status.get("details") or {}).get("retryAfterSeconds")
    return float(seconds) if isinstance(seconds, (int, float)) and seconds > 0 else None


def _immutable(error: ApiError) -> bool:
    """A 422 saying a field cannot change (a RoleBinding's roleRef, an immutable Secret)."""
    text = error.message.lower()
    return error.code == 422 and ("immutable" in text or "cannot change roleref" in text)


class Known:
    """The namespaces and SubNamespaces of one pass: as the snapshot had them, then as the pass
    wrote them.

    A status written after the finalizer was added in the same pass must be sent at the
    version the finalizer patch returned, not the snapshot's; a namespace's metadata is
    applied only to the incarnation the plan was made for.
    """

    def __init__(
        self,
        namespaces: Mapping[str, Mapping[str, Any]],
        subnamespaces: Mapping[tuple[str, str], Mapping[str, Any]],
    ) -> None:
        """``namespaces`` by name, ``subnamespaces`` by (namespace, name), as a plan has them."""
        self._namespaces = dict(namespaces)
        self._subnamespaces = dict(subnamespaces)
        self._lock = threading.Lock()

    def namespace(self, name: str) -> Mapping[str, Any] | None:
        with self._lock:
            return self._namespaces.get(name)

    def put_namespace(self, obj: Mapping[str, Any]) -> None:
        """Keep what later writes of the pass need, the incarnation and its version: a first
        pass writes every namespace, and their full answers would outweigh the cache."""
        metadata = _metadata(obj)
        kept = {key: metadata[key] for key in ("name", "uid", "resourceVersion") if key in metadata}
        with self._lock:
            self._namespaces[kept.get("name", "")] = {"metadata": kept}

    def subnamespace(self, namespace: str, name: str) -> Mapping[str, Any] | None:
        with self._lock:
            return self._subnamespaces.get((namespace, name))

    def put_subnamespace(self, obj: Mapping[str, Any]) -> None:
        metadata = _metadata(obj)
        with self._lock:
            self._subnamespaces[(metadata.get("namespace", ""), metadata.get("name", ""))] = obj


class Writer:
    """Sends the requests of one action at a time; shared by the applier's workers."""

    def __init__(
        self,
        kube: Kube,
        watched: Iterable[WatchedResource],
        recorder: Recorder,
        throttles: Throttles,
        metrics: Metrics,
        may_write: Callable[[], bool],
        stop: threading.Event,
        lookup: Lookup,
        attempts: int = 5,
        urgent: bool = False,
    ) -> None:
        self.kube = kube
        self.kinds = {(w.gvk.api_version, w.gvk.kind): w for w in watched}
        self.recorder = recorder
        self.throttles = throttles
        self.lookup = lookup
        # The SubNamespace lane's writer: its requests go before others of their kind.
        self.urgent = urgent
        self.metrics = metrics
        self.may_write = may_write
        self.stop = stop
        self.attempts = attempts

    def write(self, action: Action, known: Known) -> Written:
        """Carry out ``action``; raises Replan, Aborted or KubeError when it did not happen."""
        match action:
            case CreateNamespace():
                return self._create_namespace(action, known)
            case ApplyNamespaceMetadata():
                return self._update_namespace(action, known)
            case DeleteNamespace():
                return self._delete_namespace(action)
            case AddFinalizer() | RemoveFinalizer():
                return self._set_finalizer(action, known)
            case PatchSubNamespaceStatus():
                return self._patch_status(action, known)
            case CreateObject():
                return self._create_object(action.object)
            case ReplaceObject():
                return self._replace_object(action)
            case DeleteObject():
                return self._delete_object(action)
            case AnnotateObject():
                return self._annotate_object(action)
            case EmitEvent():
                if not self.may_write():
                    raise Aborted
                self.recorder.record(action.involved, action.type, action.reason, action.message)
                return ()
            case _:
                unreachable(action)

    def kind(self, action: Action) -> str:
        """The resource kind whose rate limit the requests of ``action`` wait for."""
        match action:
            case CreateNamespace() | ApplyNamespaceMetadata() | DeleteNamespace():
                return NAMESPACES
            case AddFinalizer() | RemoveFinalizer() | PatchSubNamespaceStatus():
                return SUBNAMESPACES
            case CreateObject() | ReplaceObject() | DeleteObject() | AnnotateObject():
                return self._object_path(action.ref)[1]
            case EmitEvent():
                return EVENTS
            case _:
                unreachable(action)

    def _call(self, resource: str, send: Callable[[], T]) -> T:
        """Send one request about ``resource`` (a kind), trying again on 429, 5xx and
        timeouts; 409 Conflict is Replan."""
        pause = Backoff(first=0.2, limit=5.0)
        throttle = self.throttles.of(resource)
        for attempt in range(1, self.attempts + 1):
            if not self.may_write() or not throttle.wait(self.stop, self.urgent):
                raise Aborted
            try:
                return send()
            except ApiError as error:
                self.metrics.count_api_error(error.code)
                if error.conflict:
                    raise Replan(error.message) from error
                if not error.retriable or attempt == self.attempts:
                    raise
                wait = min(_retry_after(error) or pause.next(), RETRY_AFTER_LIMIT)
            except KubeError:
                if attempt == self.attempts:
                    raise
                wait = pause.next()
            if self.stop.wait(wait):
                raise Aborted
        raise AssertionError("unreachable: the last attempt returns or raises")

    def _found(self, resource: str, send: Callable[[], T]) -> T | None:
        """``_call``, but None when the server answers 404 Not Found."""
        try:
            return self._call(resource, send)
        except ApiError as error:
            if error.not_found:
                return None
            raise

    def _delete(self, resource: str, path: str, preconditions: Mapping[str, str | None]) -> bool:
        """DELETE with the given preconditions; False when there was nothing to delete."""
        wanted = {key: value for key, value in preconditions.items() if value}
        body = {**DELETE_OPTIONS, "preconditions": wanted}
        # A successful DELETE may answer with an empty body; only a 404 means "not there".
        return self._found(resource, lambda: self.kube.delete(path, body) or {}) is not None

    def _object_path(self, ref: ObjectRef, *, collection: bool = False) -> tuple[str, str]:
        """The REST path of a watched object (or of its collection) and the cache's name for
        its kind."""
        watched = self.kinds[(ref.api_version, ref.kind)]
        group, version = watched.gvk.group, watched.gvk.version
        name = None if collection else ref.name
        path = resource_path(group, version, watched.plural, ref.namespace, name)
        return path, resource_name(group, watched.plural)

    # -- namespaces ---------------------------------------------------------------------------

    def _create_namespace(self, action: CreateNamespace, known: Known) -> Written:
        """Create the namespace with its metadata in one server-side apply, so the controller
        owns every key it set (as Apply: a later apply that omits one removes it).

        An apply creates a missing object, but would change an existing one; the
        resourceVersion of the SubNamespace asking for it rides along as a precondition no
        namespace can meet (each write gets a revision of its own, so no other object ever
        has that version), so a namespace someone created in the meantime is never touched:
        the apply is refused with a conflict (a Replan) instead, as a POST would be with
        AlreadyExists.
        On creation the server ignores a resourceVersion (kube-apiserver's create-on-update
        path returns before comparing versions; the pattern of kubernetes/kubernetes#106745;
        accurate_testbed/tests/test_apply.py).
        """
        parent = action.labels.get(LABEL_PARENT, "")
        sub = known.subnamespace(parent, action.name) or {}
        version = _metadata(sub).get("resourceVersion")
        if not version:
            raise Replan(f"SubNamespace {parent}/{action.name} is not known to this pass")
        return self._apply_namespace(action, known, {"resourceVersion": version})

    def _update_namespace(self, action: ApplyNamespaceMetadata, known: Known) -> Written:
        """Apply to the namespace the plan was made for.

        Its uid and resourceVersion ride along as preconditions: an apply would otherwise
        create a namespace deleted in the meantime, or put back a parent label someone just
        removed.
        """
        current = _metadata(known.namespace(action.name) or {})
        if action.takeover:
            current = _metadata(self._take_over(action.name, action.takeover, current, known))
        preconditions = {
            key: current[key] for key in ("uid", "resourceVersion") if current.get(key)
        }
        return self._apply_namespace(action, known, preconditions)

    def _take_over(
        self, name: str, keys: OwnedKeys, planned: Mapping[str, Any], known: Known
    ) -> Mapping[str, Any]:
        """Move ``keys`` from the Go controller's old update entries into the controller's
        apply entry: one merge patch of ``managedFields`` at the version the plan was made
        from, nothing else changed; the namespace as it then is.

        The cache keeps only the controller's own entries, so the whole list is read afresh
        (a merge patch replaces it); a namespace changed since the plan is left to the next
        pass.
        """
        path = resource_path("", "v1", NAMESPACES, name=name)
        fresh = self._found(NAMESPACES, lambda: self.kube.get(path))
        version = planned.get("resourceVersion")
        if fresh is None or _metadata(fresh).get("resourceVersion") != version:
            raise Replan(f"namespace {name} changed since the plan")
        entries = upgraded_managed_fields(_metadata(fresh).get("managedFields") or (), keys)
        if entries is None:
            return fresh
        body = {"metadata": {"resourceVersion": version, "managedFields": entries}}
        patched = self._found(NAMESPACES, lambda: self.kube.patch(path, body))
        if patched is None:
            raise Replan(f"namespace {name} is gone")
        known.put_namespace(patched)
        return patched

    def _apply_namespace(
        self,
        action: CreateNamespace | ApplyNamespaceMetadata,
        known: Known,
        preconditions: Mapping[str, str],
    ) -> Written:
        """Server-side apply, with force, of the action's metadata under ``preconditions``."""
        metadata: Obj = {"name": action.name, **preconditions}
        if action.labels:
            metadata["labels"] = dict(action.labels)
        if action.annotations:
            metadata["annotations"] = dict(action.annotations)
        body = {"apiVersion": "v1", "kind": "Namespace", "metadata": metadata}
        path = resource_path("", "v1", NAMESPACES, name=action.name)
        applied = self._found(
            NAMESPACES, lambda: self.kube.apply(path, body, FIELD_MANAGER, force=True)
        )
        if applied is None:
            raise Replan(f"namespace {action.name} is gone")
        known.put_namespace(applied)
        return (_expect(NAMESPACES, applied),)

    def _delete_namespace(self, action: DeleteNamespace) -> Written:
        path = resource_path("", "v1", NAMESPACES, name=action.name)
        if not self._delete(NAMESPACES, path, {"uid": action.uid}):
            return ()
        return (Expectation(NAMESPACES, "", action.name, "terminating", uid=action.uid),)

    # -- SubNamespaces ------------------------------------------------------------------------

    def _patch_subnamespace(
        self, known: Known, key: tuple[str, str], body: Obj, subresource: str | None = None
    ) -> Written:
        namespace, name = key
        path = subnamespaces.path(namespace, name)
        if subresource:
            path = f"{path}/{subresource}"
        patched = self._found(SUBNAMESPACES, lambda: self.kube.patch(path, body))
        if patched is None:
            raise Replan(f"SubNamespace {namespace}/{name} is gone")
        known.put_subnamespace(patched)
        return (_expect(SUBNAMESPACES, patched),)

    def _known(self, known: Known, namespace: str, name: str) -> Mapping[str, Any]:
        sub = known.subnamespace(namespace, name)
        if sub is None:
            raise Replan(f"SubNamespace {namespace}/{name} is not in the cache")
        return sub

    def _set_finalizer(self, action: AddFinalizer | RemoveFinalizer, known: Known) -> Written:
        """A merge patch of the whole finalizer list, at the version it was read at."""
        sub = self._known(known, action.namespace, action.name)
        current = list(_metadata(sub).get("finalizers") or ())
        if isinstance(action, AddFinalizer):
            wanted = current if FINALIZER in current else [*current, FINALIZER]
        else:
            wanted = [f for f in current if f != FINALIZER]
        version = _metadata(sub).get("resourceVersion") or action.resource_version
        body = {"metadata": {"resourceVersion": version, "finalizers": wanted}}
        written = self._patch_subnamespace(known, (action.namespace, action.name), body)
        if wanted or not _metadata(sub).get("deletionTimestamp"):
            return written
        # The last finalizer of an object being deleted: it goes away.
        uid = _metadata(sub).get("uid")
        return (Expectation(SUBNAMESPACES, action.namespace, action.name, "gone", uid=uid),)

    def _patch_status(self, action: PatchSubNamespaceStatus, known: Known) -> Written:
        """Write the conditions the controller owns, keeping the others, and keeping the
        transition time of each condition whose status did not change."""
        sub = self._known(known, action.namespace, action.name)
        self._still_current(sub)
        current = list((sub.get("status") or {}).get("conditions") or ())
        before = {c.get("type"): c for c in current}
        now = _now()
        conditions = [c for c in current if c.get("type") not in OWNED_CONDITIONS]
        generation = action.status.observed_generation
        for condition in action.status.conditions:
            old = before.get(condition.type) or {}
            kept = old.get("lastTransitionTime") if old.get("status") == condition.status else None
            conditions.append(
                {
                    "type": condition.type,
                    "status": condition.status,
                    "observedGeneration": generation,
                    "lastTransitionTime": kept or now,
                    "reason": condition.reason,
                    "message": condition.message,
                }
            )
        body = {
            "metadata": {"resourceVersion": _metadata(sub).get("resourceVersion")},
            "status": {"observedGeneration": generation, "conditions": conditions},
        }
        return self._patch_subnamespace(known, (action.namespace, action.name), body, "status")

    def _still_current(self, planned: Mapping[str, Any]) -> None:
        """Raise Replan when the cache shows the SubNamespace deleted, being deleted, or
        changed since the pass read it at ``planned``: its status would speak of a picture
        that no longer holds, and the change that made it stale brings a pass of its own."""
        metadata = _metadata(planned)
        key = f"{metadata.get('namespace')}/{metadata.get('name')}"
        now = self.lookup(SUBNAMESPACES, metadata.get("namespace", ""), metadata.get("name", ""))
        if now is None or _metadata(now).get("uid") != metadata.get("uid"):
            raise Replan(f"SubNamespace {key} is gone: no status for it")
        if _metadata(now).get("deletionTimestamp") and not metadata.get("deletionTimestamp"):
            raise Replan(f"SubNamespace {key} is being deleted: no status for it")
        version = str(_metadata(now).get("resourceVersion") or "")
        planned_at = str(metadata.get("resourceVersion") or "")
        if version != planned_at and at_least(version, planned_at):
            raise Replan(f"SubNamespace {key} changed since the pass read it")

    # -- copies -------------------------------------------------------------------------------

    def _create_object(self, obj: Mapping[str, Any]) -> Written:
        ref = ObjectRef.of(obj)
        path, resource = self._object_path(ref, collection=True)
        try:
            created = self._call(resource, lambda: self.kube.create(path, obj))
        except ApiError as error:
            if error.namespace_terminating:
                return ()
            if error.already_exists or error.not_found:
                raise Replan(f"cannot create {ref}: {error.message}") from error
            raise
        return (_expect(resource, created),)

    def _replace_object(self, action: ReplaceObject) -> Written:
        ref = action.ref
        path, resource = self._object_path(ref)
        metadata = {**_metadata(action.object), "resourceVersion": action.resource_version}
        if action.uid:
            metadata["uid"] = action.uid
        body = {**action.object, "metadata": metadata}
        try:
            replaced = self._call(resource, lambda: self.kube.replace(path, body))
        except ApiError as error:
            if error.not_found:
                raise Replan(f"{ref} is gone") from error
            if _immutable(error):
                return self._recreate(action)
            raise
        return (_expect(resource, replaced),)

    def _recreate(self, action: ReplaceObject) -> Written:
        """Delete the object (that incarnation only) and create the copy in its place."""
        path, resource = self._object_path(action.ref)
        self._delete(resource, path, {"uid": action.uid})
        return self._create_object(action.object)

    def _delete_object(self, action: DeleteObject) -> Written:
        ref = action.ref
        path, resource = self._object_path(ref)
        preconditions = {"uid": ref.uid, "resourceVersion": action.resource_version}
        if not self._delete(resource, path, preconditions):
            return ()
        return (Expectation(resource, ref.namespace, ref.name, "terminating", uid=ref.uid),)

    def _annotate_object(self, action: AnnotateObject) -> Written:
        path, resource = self._object_path(action.ref)
        body = {"metadata": {"annotations": dict(action.annotations)}}
        patched = self._found(resource, lambda: self.kube.patch(path, body))
        if patched is None:
            raise Replan(f"{action.ref} is gone")
        return (_expect(resource, patched),)
