"""Owners annotated ``propagate-generated`` while the feature gate keeps the feature off are
announced: once in the log, and with a Warning Event on each, so that an upgrade from a Go
Accurate release that had the feature on does not stop copying generated objects in silence.

The Go Accurate had propagate-generated on in every release up to v1.2.1 (v1.2.x with the gate
``DisablePropagateGenerated`` defaulting to false) and off from v1.3.0, as here
(docs/install.md). Owners are looked for where the feature would look: the controllers
(``ownerReferences`` with ``controller: true``) of objects of watched kinds, at start-up and on
each resync. An owner of a watched kind is read from the cache, any other with one GET per
resync period (controller.owners); a cluster with no controlled object of a watched kind
costs nothing. Each owner is announced once in the life of the process.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from controller.cache import Cache, resource_name
from controller.events import Recorder
from controller.owners import Owners, controller_reference
from libaccurate.actions import ObjectRef
from libaccurate.config import WatchedResource
from libaccurate.constants import (
    ANNOTATION_PROPAGATE_GENERATED,
    FEATURE_DISABLE_PROPAGATE_GENERATED,
)

Obj = Mapping[str, Any]

FLAG = f"--feature-gates={FEATURE_DISABLE_PROPAGATE_GENERATED}=false"
CHART_VALUE = "controller.extraArgs"
REASON = "PropagateGeneratedOff"
MESSAGE = (
    f"the annotation {ANNOTATION_PROPAGATE_GENERATED} is ignored: propagate-generated is off "
    f"(feature gate {FEATURE_DISABLE_PROPAGATE_GENERATED}, on by default up to the Go Accurate "
    f"v1.2.1); objects this owner generates are not copied; to copy them, start the controller "
    f"with {FLAG} (Helm value {CHART_VALUE}), or remove the annotation"
)
# How often the notice looks whether the cache has been listed yet.
_SYNC_POLL = 0.5

log = logging.getLogger(__name__)


class GeneratedNotice:
    """Looks for annotated owners and announces the ones not announced yet."""

    def __init__(
        self,
        cache: Cache,
        watched: Iterable[WatchedResource],
        owners: Owners,
        recorder: Recorder,
        may_write: Callable[[], bool],
    ) -> None:
        self.cache = cache
        self.watched = tuple(watched)
        self.owners = owners
        self.recorder = recorder
        self.may_write = may_write
        self._announced: set[str] = set()
        self._logged = False

    def run(self, stop: threading.Event, period: float) -> None:
        """Check once the cache is listed, then once per ``period`` until ``stop``."""
        while not self.cache.synced:
            if stop.wait(_SYNC_POLL):
                return
        while True:
            if self.may_write():
                self.check()
            if stop.wait(period):
                return

    def check(self) -> list[ObjectRef]:
        """Announce the annotated owners found now that were not announced before."""
        found = self._annotated_owners()
        if found and not self._logged:
            log.warning(
                "owners ask for propagate-generated, which is off",
                extra={
                    "owners": [str(owner) for owner in found[:10]],
                    "count": len(found),
                    "flag": FLAG,
                    "chartValue": CHART_VALUE,
                },
            )
            self._logged = True
        for owner in found:
            self.recorder.record(owner, "Warning", REASON, MESSAGE)
            self._announced.add(owner.uid or "")
        return found

    def _annotated_owners(self) -> list[ObjectRef]:
        """The annotated owners not announced yet (those announced are not read again)."""
        objects = [
            obj
            for w in self.watched
            for obj in self.cache.items(resource_name(w.gvk.group, w.plural))
        ]
        cached = {(obj.get("metadata") or {}).get("uid"): obj for obj in objects}
        kinds = {(w.gvk.api_version, w.gvk.kind) for w in self.watched}
        found = []
        for uid, (reference, namespace) in controllers_of(objects).items():
            if uid in self._announced:
                continue
            watched_kind = (reference.get("apiVersion"), reference.get("kind")) in kinds
            owner = cached.get(uid) if watched_kind else self.owners.owner(reference, namespace)
            if owner is not None and _annotated(owner):
                found.append(_ref(reference, owner))
        return found


def controllers_of(objects: Iterable[Obj]) -> dict[str, tuple[Mapping[str, Any], str]]:
    """The distinct controller references of ``objects`` by owner uid, each with the namespace
    of an object it controls (where a namespaced owner lives)."""
    found: dict[str, tuple[Mapping[str, Any], str]] = {}
    for obj in objects:
        reference = controller_reference(obj)
        if reference is not None and reference.get("uid"):
            found.setdefault(reference["uid"], (reference, obj["metadata"].get("namespace", "")))
    return found


def _annotated(owner: Obj) -> bool:
    return ANNOTATION_PROPAGATE_GENERATED in (
        (owner.get("metadata") or {}).get("annotations") or {}
    )


def _ref(reference: Mapping[str, Any], owner: Obj) -> ObjectRef:
    """The owner as an Event names it: its kind from the reference (a cached owner of a watched
    kind is a stub without one), the rest from the owner itself."""
    kind = {key: reference.get(key, "") for key in ("apiVersion", "kind")}
    return ObjectRef.of({**kind, "metadata": owner.get("metadata") or {}})
