"""The API server's audit log, read as the Go controller's figure of issue 31 was read off
kube-apiserver's: from the moment a client's change was received to the moment the controller's
first write for it was received, both stamped by the server as the requests arrived
(``requestReceivedTimestamp``). Neither client nor watch takes part in that figure, so it
times the controller alone: the change's event reaching it, its pass and its request.

The in-memory server writes the log with ``--audit-log-path`` (accurate_testbed/apiserver/
audit.py) and writes it out once a second, so ``measure`` waits for every answer to be in it.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from accurate_testbed.apiserver.audit import seconds_of

# How often to look again while the server has not written the log out yet (once a second).
FLUSH_WAIT = 0.2
# An object as the audit log's objectRef names it: resource, namespace, name, subresource
# (a namespace is "in" itself).
Object = tuple[str, str, str, str]


@dataclass(frozen=True)
class Request:
    """One audit event: who asked what of which object, and when it was received."""

    received: float
    agent: str
    verb: str
    object: Object


@dataclass(frozen=True)
class Wanted:
    """The requests of a user agent (its prefix) with one of ``verbs`` on one object."""

    agent: str
    verbs: frozenset[str]
    object: Object

    def first(self, log: AuditLog, after: float) -> Request | None:
        """The first such request received at or after ``after``."""
        return min(
            (
                request
                for request in log.about(self.object)
                if request.received >= after
                and request.agent.startswith(self.agent)
                and request.verb in self.verbs
            ),
            key=lambda request: request.received,
            default=None,
        )


@dataclass(frozen=True)
class Reaction:
    """A client's ``change`` and the controller's ``write`` answering it, timed as ``figure``."""

    figure: str
    change: Wanted
    write: Wanted

    def seconds(self, log: AuditLog) -> float | None:
        """From the change received to the first such write received after it; None while
        either is not in the log."""
        asked = self.change.first(log, float("-inf"))
        answered = None if asked is None else self.write.first(log, asked.received)
        return None if asked is None or answered is None else answered.received - asked.received


class AuditLog:
    """A log file read as it grows (``read``: whole lines only, each once), its requests by
    the object they name."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._offset = 0
        self._by_object: dict[Object, list[Request]] = {}

    def read(self) -> None:
        with self.path.open("rb") as log:
            log.seek(self._offset)
            data = log.read()
        whole = data[: data.rfind(b"\n") + 1]
        self._offset += len(whole)
        for line in whole.splitlines():
            request = _request(json.loads(line))
            self._by_object.setdefault(request.object, []).append(request)

    def about(self, key: Object) -> list[Request]:
        return self._by_object.get(key, [])


def measure(path: Path, reactions: Sequence[Reaction], timeout: float) -> dict[str, list[float]]:
    """The times of ``reactions`` by figure (in the order of their first reaction), once the
    log holds the change and the answer of every one; TimeoutError naming those it lacks
    after ``timeout``."""
    log = AuditLog(path)
    deadline = time.monotonic() + timeout
    while True:
        log.read()
        times = [reaction.seconds(log) for reaction in reactions]
        lacking = [
            reaction for reaction, took in zip(reactions, times, strict=True) if took is None
        ]
        if not lacking:
            break
        if time.monotonic() > deadline:
            raise TimeoutError(f"{path}: {len(lacking)} answers not in the log, first {lacking[0]}")
        time.sleep(FLUSH_WAIT)
    by_figure: dict[str, list[float]] = {}
    for reaction, took in zip(reactions, times, strict=True):
        assert took is not None
        by_figure.setdefault(reaction.figure, []).append(took)
    return by_figure


def _request(event: Mapping[str, Any]) -> Request:
    """A namespace's requests are "in" that namespace (RequestInfo's reading of the URL), but
    for a POST, whose URL names none: here all of them are, to be found together."""
    ref = event.get("objectRef") or {}
    resource, name = ref.get("resource", ""), ref.get("name", "")
    in_itself = resource == "namespaces" and not ref.get("apiGroup")
    namespace = name if in_itself else ref.get("namespace", "")
    return Request(
        received=seconds_of(event["requestReceivedTimestamp"]),
        agent=event.get("userAgent", ""),
        verb=event["verb"],
        object=(resource, namespace, name, ref.get("subresource", "")),
    )
