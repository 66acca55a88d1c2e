"""Kubernetes Events the controller records on the objects it acts on or cannot act on.

Events are core/v1 Events in the involved object's namespace, as client-go's recorder writes
them, so ``kubectl describe`` and ``kubectl get events`` show them. The planner may plan the
same event in every pass (a create-mode object that stays skipped); like client-go's
recorder, a repeat is folded into the existing Event's ``count`` instead of a new Event, and,
like its spam filter, the count reaches the server at most once every few minutes, so that a
controller with nothing to do sends nothing.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Literal

from controller.throttle import Throttle
from libaccurate.actions import ObjectRef
from libaccurate.constants import EVENT_COMPONENT
from libaccurate.network.kube import ApiError, Kube, KubeError, resource_path

# client-go's correlator remembers this many distinct events.
REMEMBERED = 4096
# How often a repeated event's count is written back (client-go's spam filter refills one
# event every five minutes per object).
REPEAT_INTERVAL = 300.0
# The API server refuses longer messages on events.k8s.io; core events are cut the same way.
MESSAGE_LIMIT = 1024
DEFAULT_NAMESPACE = "default"
# The resource Events are, and the name of their rate-limit bucket.
EVENTS = "events"

log = logging.getLogger(__name__)

EventKey = tuple[tuple[str, str, str, str], str | None, str, str, str]


@dataclass
class _Recorded:
    namespace: str
    name: str
    count: int
    sent: float


def _timestamp() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


class Recorder:
    """Records events, one request at most per call; safe to use from several threads."""

    def __init__(self, kube: Kube, throttle: Throttle, instance: str, stop: threading.Event):
        self.kube = kube
        self.throttle = throttle
        self.instance = instance
        self.stop = stop
        self._seen: OrderedDict[EventKey, _Recorded] = OrderedDict()
        self._lock = threading.Lock()

    def record(
        self,
        involved: ObjectRef,
        type_: Literal["Normal", "Warning"],
        reason: str,
        message: str,
    ) -> None:
        """Post the event, or count a repeat of one already posted; never raises."""
        message = message[:MESSAGE_LIMIT]
        key: EventKey = (involved.key, involved.uid, type_, reason, message)
        with self._lock:
            known = self._seen.get(key)
            if known is not None:
                self._seen.move_to_end(key)
                known.count += 1
                due = time.monotonic() - known.sent >= REPEAT_INTERVAL
                if not due:
                    return
        try:
            if known is not None and self._bump(known):
                return
            self._post(key, involved, type_, reason, message)
        except KubeError as error:
            log.warning(
                "cannot record event",
                extra={"object": str(involved), "reason": reason, "error": str(error)},
            )

    def _bump(self, known: _Recorded) -> bool:
        """Write the new count onto the existing Event; False when that Event is gone."""
        path = resource_path("", "v1", EVENTS, known.namespace, known.name)
        body = {"count": known.count, "lastTimestamp": _timestamp()}
        if not self.throttle.wait(self.stop):
            return True
        try:
            self.kube.patch(path, body)
        except ApiError as error:
            if error.not_found:
                return False
            raise
        known.sent = time.monotonic()
        return True

    def _post(
        self,
        key: EventKey,
        involved: ObjectRef,
        type_: Literal["Normal", "Warning"],
        reason: str,
        message: str,
    ) -> None:
        namespace = involved.namespace or DEFAULT_NAMESPACE
        name = f"{involved.name}.{time.time_ns():x}"
        now = _timestamp()
        reference: dict[str, Any] = {
            "apiVersion": involved.api_version,
            "kind": involved.kind,
            "name": involved.name,
        }
        if involved.namespace:
            reference["namespace"] = involved.namespace
        if involved.uid:
            reference["uid"] = involved.uid
        body = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": name, "namespace": namespace},
            "involvedObject": reference,
            "type": type_,
            "reason": reason,
            "message": message,
            "source": {"component": EVENT_COMPONENT},
            "reportingComponent": EVENT_COMPONENT,
            "reportingInstance": self.instance,
            "firstTimestamp": now,
            "lastTimestamp": now,
            "count": 1,
        }
        if not self.throttle.wait(self.stop):
            return
        try:
            self.kube.create(resource_path("", "v1", EVENTS, namespace), body)
        except ApiError as error:
            if error.not_found or error.namespace_terminating:
                return
            raise
        with self._lock:
            self._seen[key] = _Recorded(namespace, name, 1, time.monotonic())
            while len(self._seen) > REMEMBERED:
                self._seen.popitem(last=False)
