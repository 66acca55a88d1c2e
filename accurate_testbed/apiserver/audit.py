"""The audit log (``--audit-log-path``): one JSON line per request, as kube-apiserver's log
backend writes it under a policy of ``level: Metadata`` for every request with
``omitStages: [RequestReceived, ResponseStarted]``: one ResponseComplete event each (a watch's
when it ends).

Each line is an audit.k8s.io/v1 Event (k8s.io/apiserver/pkg/apis/audit/v1/types.go) with its
fields in the order Go writes them, filled as k8s.io/apiserver/pkg/audit/request.go fills them
at level Metadata: the request's attributes (verb, objectRef as RequestInfo reads the URL), the
name and namespace of a created or updated object from its body, and the response's code (with
the bounded fields of a Status it carried, as context.go's LogResponseObject copies them).
Timestamps are metav1.MicroTime: RFC 3339 in UTC, six decimals. ``requestReceivedTimestamp`` is
taken as the request is received, before any of its work, so that the time between two
requests reads off the log as it does off a real server's.

Auditing is off unless a path is given. On, it costs a request a dict and a ``json.dumps``:
lines are buffered and written out once a second by a thread of the log's own, and at close.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from accurate_testbed.apiserver.rbac import Attributes
from accurate_testbed.apiserver.routing import ResourcePath
from accurate_testbed.apiserver.uids import new_uid

FLUSH_INTERVAL = 1.0
BUFFER_BYTES = 1 << 20
# authentication/v1 UserInfo's fields, in the order Go writes them; all omitempty.
_USER_FIELDS = ("username", "uid", "groups", "extra")
# What an objectRef takes from the object sent, when the URL leaves it out.
_SENT_FIELDS = ("namespace", "name", "uid", "resourceVersion")
_STATUS_FIELDS = ("status", "message", "reason", "details")


@dataclass
class Seen:
    """What the server learnt of one request while serving it, as far as it got: what its
    audit event says. ``user`` is the authenticated user, ``acting`` whom it impersonates."""

    user: Mapping[str, Any] | None = None
    acting: Mapping[str, Any] | None = None
    where: ResourcePath | None = None
    attributes: Attributes | None = None
    sent_metadata: Mapping[str, str] | None = None
    code: int = 0
    status: Mapping[str, Any] | None = None  # the response's body, when it was a Status


class AuditLog:
    """The file the events go to, appended to as kube-apiserver's log backend does."""

    def __init__(self, path: Path) -> None:
        self._file = path.open("a", encoding="utf-8", buffering=BUFFER_BYTES)
        self._lock = threading.Lock()
        self._closed = threading.Event()
        self._flusher = threading.Thread(target=self._flush_each_second, name="audit log")
        self._flusher.daemon = True
        self._flusher.start()

    def write(self, event: Mapping[str, Any]) -> None:
        """One event; dropped once the log is closed (a watch ending as the server stops)."""
        line = json.dumps(event, separators=(",", ":")) + "\n"
        with self._lock:
            if not self._closed.is_set():
                self._file.write(line)

    def close(self) -> None:
        with self._lock:
            self._closed.set()
            self._file.close()
        self._flusher.join()

    def _flush_each_second(self) -> None:
        while not self._closed.wait(FLUSH_INTERVAL):
            with self._lock:
                if not self._closed.is_set():
                    self._file.flush()


def event(
    seen: Seen,
    headers: Any,
    uri: str,
    method: str,
    source_ip: str,
    received_ns: int,
    completed_ns: int,
) -> dict[str, Any]:
    """The ResponseComplete event of one request. A request refused before its user was
    known (401) has no attributes: its verb is then the lower-cased method."""
    attributes = seen.attributes
    found: dict[str, Any] = {
        "kind": "Event",
        "apiVersion": "audit.k8s.io/v1",
        "level": "Metadata",
        "auditID": headers.get("Audit-ID") or new_uid(),
        "stage": "ResponseComplete",
        "requestURI": uri,
        "verb": attributes.verb if attributes is not None else method.lower(),
        "user": _user_info(seen.user),
    }
    if seen.acting is not None and seen.acting is not seen.user:
        found["impersonatedUser"] = _user_info(seen.acting)
    found["sourceIPs"] = [source_ip]
    if agent := headers.get("User-Agent"):
        found["userAgent"] = agent
    if attributes is not None and attributes.resource_request and seen.where is not None:
        found["objectRef"] = _object_ref(attributes, seen.where, seen.sent_metadata)
    found["responseStatus"] = _response_status(seen)
    found["requestReceivedTimestamp"] = micro_time(received_ns)
    found["stageTimestamp"] = micro_time(completed_ns)
    return found


def micro_time(ns: int) -> str:
    """metav1.MicroTime's JSON: RFC 3339 in UTC with exactly six decimals."""
    seconds, nanoseconds = divmod(ns, 1_000_000_000)
    whole = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds))
    return f"{whole}.{nanoseconds // 1000:06d}Z"


def seconds_of(micro_time: str) -> float:
    """A MicroTime read back: seconds since the epoch, to the microsecond."""
    return datetime.strptime(micro_time, "%Y-%m-%dT%H:%M:%S.%f%z").timestamp()


def sent_metadata(body: Any) -> Mapping[str, str] | None:
    """What an object's metadata said as it was sent, before the server filled any of it in."""
    metadata = body.get("metadata") if isinstance(body, dict) else None
    if not isinstance(metadata, dict):
        return None
    return {key: str(metadata.get(key) or "") for key in _SENT_FIELDS}


def _user_info(user: Mapping[str, Any] | None) -> dict[str, Any]:
    known = user or {}
    return {key: known[key] for key in _USER_FIELDS if known.get(key)}


def _object_ref(
    attributes: Attributes, where: ResourcePath, sent: Mapping[str, str] | None
) -> dict[str, Any]:
    """From the URL as RequestInfo reads it (a namespace's request is "in" that namespace);
    what the URL leaves out (a create's name) from the object sent (request.go's
    LogRequestObject, at Metadata level too, for a create or an update)."""
    ref = {
        "resource": attributes.resource,
        "namespace": attributes.namespace,
        "name": attributes.name,
        "uid": "",
        "apiGroup": attributes.group,
        "apiVersion": where.version,
        "resourceVersion": "",
        "subresource": attributes.subresource,
    }
    if sent is not None and attributes.verb in ("create", "update"):
        for key in _SENT_FIELDS:
            ref[key] = ref[key] or sent[key]
    return {key: value for key, value in ref.items() if value}


def _response_status(seen: Seen) -> dict[str, Any]:
    """The code, and the bounded fields of the Status the response carried, if it was one
    (an error's, or a delete's Success)."""
    status: dict[str, Any] = {"metadata": {}}
    sent = seen.status or {}
    status.update((key, sent[key]) for key in _STATUS_FIELDS if key in sent)
    status["code"] = seen.code
    return status
