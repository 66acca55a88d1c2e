"""The end of a pass: from what became of its writes to the statuses and Events that tell of it.

A plan's statuses and events are promises that hold only if its writes happen, so they are
decided once those writes are done. Statuses say ``Ready=False`` where a namespace's writes
failed and wait for the next pass where writes were left for it. Events report what happened,
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
from libaccurate.planner import FINAL_STAGE, Finding, Happened, Plan

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


def close(plan: Plan, happened: Mapping[int, Happened]) -> Closing:
    """What to send at the end of a pass whose other steps came out as ``happened``."""
    settled: dict[int, Finding] = {}
    sends = [
        *_statuses(plan, happened, settled),
        *_planned_events(plan, happened, settled),
        *(Send(event) for event in _summaries(plan, happened)),
        *(Send(event) for event in _failures(plan, happened)),
    ]
    return Closing(tuple(sends), settled)


def _statuses(
    plan: Plan, happened: Mapping[int, Happened], settled: dict[int, Finding]
) -> list[Send]:
    """The planned statuses, with Ready=False where a namespace's writes failed; left for
    the next pass where they could not be done yet; none where nothing changes."""
    troubled, pending = _left_over(plan, happened)
    planned = {
        (step.action.namespace, step.action.name): step.index
        for step in plan.steps
        if isinstance(step.action, PatchSubNamespaceStatus)
    }
    sends = []
    for key, status in plan.statuses.items():
        step, name = planned.get(key), key[1]
        if name in troubled:
            status = _failed(status, troubled[name])
            if not status_differs(plan.subnamespaces[key], status):
                if step is not None:
                    settled[step] = Finding("done")
                continue
        elif step is None:
            continue
        elif name in pending:
            settled[step] = Finding("replan", f"writes to {name} are pending")
            continue
        sends.append(Send(PatchSubNamespaceStatus(key[0], key[1], status), step))
        ready = status.condition(CONDITION_READY)
        if ready is not None and _newly_stuck(plan.subnamespaces[key], ready):
            involved = _subnamespace_ref(plan, *key)
            sends.append(Send(EmitEvent(involved, "Warning", ready.reason, ready.message)))
    return sends


def _newly_stuck(sub: Mapping[str, Any], ready: Condition) -> bool:
    """Whether ``ready`` says only a person can mend the SubNamespace, and it did not before."""
    return ready.reason in NEEDS_A_PERSON and ready_reason(sub) != ready.reason


def _left_over(plan: Plan, happened: Mapping[int, Happened]) -> tuple[dict[str, str], set[str]]:
    """Namespaces with a failed or skipped write (with the first reason), and namespaces
    with writes left for the next pass."""
    troubled: dict[str, str] = {}
    pending: set[str] = set()
    for step in plan.steps:
        action = step.action
        outcome = happened.get(step.index)
        if outcome is None or isinstance(action, _SUBNAMESPACE_ACTIONS):
            continue
        if outcome.result in ("failed", "skipped"):
            reason = f"could not {action.describe()}: {outcome.error}"
            troubled.setdefault(action.namespace, reason)
        elif outcome.result in ("replan", "aborted"):
            pending.add(action.namespace)
    return troubled, pending


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
