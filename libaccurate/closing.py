"""The end of a pass: from what became of its writes to the statuses and Events that tell of it.

A plan's statuses and events are promises that hold only if its writes happen, so they are
decided once those writes are done. A SubNamespace's status tells of one namespace, the one it
names, so it is decided as soon as that namespace's own steps are (its ``Part``), while the
rest of the pass goes on: a status waiting for the whole pass kept the SubNamespaces' rate-limit
bucket idle while the copies' buckets worked, then the copies' idle while statuses drained.
Statuses say ``Ready=False`` where a namespace's writes failed and wait for the next pass where
writes were left for it. Events are decided at the end of the pass. They report what happened,
not every object it happened to: one per source for the copies a pass made or deleted
("copied to 37 namespaces: a, b, c, ... and 34 more"), one per new sub-namespace for what it
received, and one per object only for what a person must act on: a user's object replaced or
in the way, a SubNamespace in conflict or under a broken chain, a write that failed. Every event
is a write under the client-side rate limit, so routine work gets as few as telling it allows.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, get_args

from libaccurate import subnamespaces
from libaccurate.actions import (
    Action,
    AddFinalizer,
    AnnotateObject,
    Condition,
    CreateNamespace,
    CreateObject,
    DeleteObject,
    EmitEvent,
    ObjectRef,
    PatchSubNamespaceStatus,
    RemoveFinalizer,
    ReplaceObject,
    SubNamespaceStatus,
)
from libaccurate.constants import (
    CONDITION_READY,
    LABEL_PARENT,
    REASON_CONFLICT,
    SUBNAMESPACE_KIND,
)
from libaccurate.forest import ProblemReason
from libaccurate.lifecycle import ready_reason, status_differs
from libaccurate.planner import FINAL_STAGE, Finding, Happened, Plan, Step, about

REASON_APPLY_FAILED = "ApplyFailed"
REASON_NAMESPACE_CREATED = "NamespaceCreated"
REASON_PROPAGATED = "Propagated"
REASON_COPIES_DELETED = "CopiesDeleted"
# How many names an aggregated event spells out before "... and N more".
NAMED = 3
# Actions on a SubNamespace object itself rather than on its namespace or what is in it.
_SUBNAMESPACE_ACTIONS = (AddFinalizer, RemoveFinalizer, PatchSubNamespaceStatus)
_OBJECT_ACTIONS = (CreateObject, ReplaceObject, DeleteObject, AnnotateObject)
# Why a SubNamespace is not Ready that only a person can mend: told once, when it starts.
NEEDS_A_PERSON = frozenset({REASON_CONFLICT, *get_args(ProblemReason)})
Closer = PatchSubNamespaceStatus | EmitEvent


@dataclass(frozen=True)
class Send:
    """A final write to send; ``step`` is the planned step it carries out, if any."""

    action: Closer
    step: int | None = None


@dataclass(frozen=True)
class Closing:
    """The final writes of a pass, and the planned final steps settled without a request."""

    sends: tuple[Send, ...]
    settled: Mapping[int, Finding] = field(default_factory=dict)


def _subnamespace_ref(plan: Plan, namespace: str, name: str) -> ObjectRef:
    """What an event about SubNamespace ``namespace/name`` points at (with its uid)."""
    found: Mapping[str, Any] = plan.subnamespaces.get((namespace, name)) or {}
    uid = (found.get("metadata") or {}).get("uid")
    return ObjectRef(subnamespaces.api_version(), SUBNAMESPACE_KIND, namespace, name, uid)


@dataclass(frozen=True)
class Part:
    """A namespace's share of the end of a pass: the SubNamespaces naming it, whose statuses
    tell of it (each with its planned status step, if any), and the steps before the final
    stage it waits for: the writes about it, the SubNamespaces' finalizers among them (a
    status goes out at the version the pass's finalizer patch returned)."""

    name: str
    statuses: tuple[tuple[tuple[str, str], int | None], ...]
    steps: tuple[int, ...]


def parts(plan: Plan) -> dict[str, Part]:
    """The part of each namespace a SubNamespace names, by namespace, in one walk of the plan."""
    planned = {
        (step.action.namespace, step.action.name): step.index
        for step in plan.steps
        if isinstance(step.action, PatchSubNamespaceStatus)
    }
    statuses: dict[str, list[tuple[tuple[str, str], int | None]]] = {}
    for key in plan.statuses:
        statuses.setdefault(key[1], []).append((key, planned.get(key)))
    steps: dict[str, list[int]] = {name: [] for name in statuses}
    for step in plan.steps:
        if step.stage < FINAL_STAGE and (name := about(step.action)) in steps:
            steps[name].append(step.index)
    return {name: Part(name, tuple(statuses[name]), tuple(steps[name])) for name in statuses}


def close(plan: Plan, happened: Mapping[int, Happened]) -> Closing:
    """Everything the end of a pass sends, once all its other steps came out as ``happened``:
    every part's statuses, then the events."""
    closings = [close_part(plan, part, happened) for part in parts(plan).values()]
    closings.append(close_events(plan, happened))
    return Closing(
        tuple(send for closing in closings for send in closing.sends),
        {index: found for closing in closings for index, found in closing.settled.items()},
    )


def close_part(plan: Plan, part: Part, happened: Mapping[int, Happened]) -> Closing:
    """The statuses of ``part``, once its steps came out as ``happened``: the planned ones,
    with Ready=False where a write about the namespace failed; left for the next pass where
    writes were left for it; none where nothing changes."""
    trouble, pending = _left_over((plan.steps[index] for index in part.steps), happened)
    settled: dict[int, Finding] = {}
    sends = []
    for key, step in part.statuses:
        status = plan.statuses[key]
        if trouble is not None:
            status = _failed(status, trouble)
            if not status_differs(plan.subnamespaces[key], status):
                if step is not None:
                    settled[step] = Finding("done")
                continue
        elif step is None:
            continue
        elif pending:
            settled[step] = Finding("replan", f"writes to {part.name} are pending")
            continue
        sends.append(Send(PatchSubNamespaceStatus(key[0], key[1], status), step))
        ready = status.condition(CONDITION_READY)
        if ready is not None and _newly_stuck(plan.subnamespaces[key], ready):
            involved = _subnamespace_ref(plan, *key)
            sends.append(Send(EmitEvent(involved, "Warning", ready.reason, ready.message)))
    return Closing(tuple(sends), settled)


def close_events(plan: Plan, happened: Mapping[int, Happened]) -> Closing:
    """The events of a pass whose other steps all came out as ``happened``."""
    settled: dict[int, Finding] = {}
    sends = [
        *_planned_events(plan, happened, settled),
        *(Send(event) for event in _summaries(plan, happened)),
        *(Send(event) for event in _failures(plan, happened)),
    ]
    return Closing(tuple(sends), settled)


def _newly_stuck(sub: Mapping[str, Any], ready: Condition) -> bool:
    """Whether ``ready`` says only a person can mend the SubNamespace, and it did not before."""
    return ready.reason in NEEDS_A_PERSON and ready_reason(sub) != ready.reason


def _left_over(steps: Iterable[Step], happened: Mapping[int, Happened]) -> tuple[str | None, bool]:
    """Why the first of a namespace's ``steps`` that failed or was skipped did not happen
    (None when none did), and whether any was left for the next pass."""
    trouble: str | None = None
    pending = False
    for step in steps:
        action = step.action
        outcome = happened.get(step.index)
        if outcome is None or isinstance(action, _SUBNAMESPACE_ACTIONS):
            continue
        if outcome.result in ("failed", "skipped") and trouble is None:
            trouble = f"could not {action.describe()}: {outcome.error}"
        elif outcome.result in ("replan", "aborted"):
            pending = True
    return trouble, pending


def _failed(status: SubNamespaceStatus, why: str) -> SubNamespaceStatus:
    """``status`` with Ready=False for ``why``."""
    ready = Condition(CONDITION_READY, "False", REASON_APPLY_FAILED, why)
    others = tuple(c for c in status.conditions if c.type != CONDITION_READY)
    return SubNamespaceStatus(status.observed_generation, (*others, ready))


def _planned_events(
    plan: Plan, happened: Mapping[int, Happened], settled: dict[int, Finding]
) -> list[Send]:
    """The per-object events the planner foresaw, for the writes they tell of that happened."""
    sends = []
    for step in plan.steps:
        if step.stage != FINAL_STAGE or not isinstance(step.action, EmitEvent):
            continue
        hindrance = plan.hindrance(step, happened)
        if hindrance is not None:
            settled[step.index] = hindrance
        else:
            sends.append(Send(step.action, step.index))
    return sends


def _done(plan: Plan, happened: Mapping[int, Happened]) -> Iterable[Action]:
    for step in plan.steps:
        outcome = happened.get(step.index)
        if outcome is not None and outcome.result == "done":
            yield step.action


def _summaries(plan: Plan, happened: Mapping[int, Happened]) -> list[EmitEvent]:
    """One event per new namespace on its SubNamespace with the copies it received, and one
    per source for the copies made into, or deleted from, namespaces that existed before."""
    created: dict[str, str] = {}
    received: dict[str, list[str]] = {}
    copied: dict[ObjectRef, list[str]] = {}
    deleted: dict[ObjectRef, list[str]] = {}
    new = {s.action.name for s in plan.steps if isinstance(s.action, CreateNamespace)}
    for action in _done(plan, happened):
        if isinstance(action, CreateNamespace):
            created[action.name] = action.labels.get(LABEL_PARENT, "")
        elif isinstance(action, CreateObject) and action.namespace in new:
            received.setdefault(action.namespace, []).append(f"{action.ref.kind} {action.ref.name}")
        elif isinstance(action, CreateObject):
            copied.setdefault(action.origin or action.ref, []).append(action.namespace)
        elif isinstance(action, DeleteObject):
            deleted.setdefault(action.origin or action.ref, []).append(action.namespace)
    events = [
        EmitEvent(
            _subnamespace_ref(plan, parent, name),
            "Normal",
            REASON_NAMESPACE_CREATED,
            f"created namespace {name}"
            + (f"; copied into it: {_listing(received[name])}" if name in received else ""),
        )
        for name, parent in created.items()
    ]
    events.extend(
        EmitEvent(origin, "Normal", REASON_PROPAGATED, f"copied to {_namespaces(where)}")
        for origin, where in copied.items()
    )
    events.extend(
        EmitEvent(
            origin,
            "Normal",
            REASON_COPIES_DELETED,
            f"deleted the copies in {_namespaces(where)}: "
            "the source is gone or no longer propagates there",
        )
        for origin, where in deleted.items()
    )
    return events


def _namespaces(names: list[str]) -> str:
    noun = "namespace" if len(names) == 1 else "namespaces"
    return f"{len(names)} {noun}: {_listing(names)}"


def _listing(names: list[str]) -> str:
    """The first few names in order, and how many more: an event stays short however big
    the pass."""
    shown = ", ".join(sorted(names)[:NAMED])
    rest = len(names) - NAMED
    return f"{shown}, ... and {rest} more" if rest > 0 else shown


def _failures(plan: Plan, happened: Mapping[int, Happened]) -> list[EmitEvent]:
    """A Warning for every write that failed, on the object concerned; for a namespace, on
    the SubNamespaces for it. Warnings are never folded together."""
    events: list[EmitEvent] = []
    for step in plan.steps:
        outcome = happened.get(step.index)
        if outcome is None or outcome.result != "failed":
            continue
        action = step.action
        message = f"could not {action.describe()}: {outcome.error}"
        if isinstance(action, _OBJECT_ACTIONS):
            involved = [action.ref]
        elif isinstance(action, _SUBNAMESPACE_ACTIONS):
            involved = [_subnamespace_ref(plan, action.namespace, action.name)]
        else:
            involved = [
                _subnamespace_ref(plan, *key) for key in plan.statuses if key[1] == action.namespace
            ]
        events.extend(EmitEvent(ref, "Warning", REASON_APPLY_FAILED, message) for ref in involved)
    return events
