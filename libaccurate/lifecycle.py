"""The SubNamespace lifecycle: which namespaces to create or delete, and what each status says.

A SubNamespace ``P/N`` asks for a namespace ``N`` with parent ``P``. This module decides, for
all SubNamespaces of a snapshot at once, which of them get their namespace, which are in
conflict (a namespace of that name belongs elsewhere, or another SubNamespace claims it
first), how deletions are finalised, and the status each reports (DESIGN.md 4.1). Another
namespace is never modified: conflicts are only reported.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from libaccurate.actions import (
    Action,
    AddFinalizer,
    Condition,
    DeleteNamespace,
    RemoveFinalizer,
    SubNamespaceStatus,
)
from libaccurate.constants import (
    ANNOTATION_ALLOW_CASCADING_DELETION,
    CONDITION_READY,
    CONDITION_STALLED,
    FINALIZER,
    REASON_CONFLICT,
)
from libaccurate.forest import Forest, Problem

# The Go Accurate's message for the Stalled condition, kept so that tools matching it work.
CONFLICT_MESSAGE = "Conflicting namespace already exists"
REASON_SYNCED = "Synced"
REASON_NAMESPACE_TERMINATING = "NamespaceTerminating"
REASON_DELETING_SUBTREE = "DeletingSubtree"
REASON_WAITING_FOR_QUOTA = "WaitingForQuota"
OWNED_CONDITIONS = (CONDITION_STALLED, CONDITION_READY)

State = Literal["create", "exists", "conflict", "terminating", "deleting"]


@dataclass(frozen=True)
class Verdict:
    """What the lifecycle found for one live SubNamespace; ``detail`` explains a bad state."""

    namespace: str
    name: str
    state: State
    detail: str = ""


@dataclass
class Lifecycle:
    """The lifecycle part of a plan, before statuses (which need the namespaces' problems)."""

    actions: list[Action] = field(default_factory=list)
    created: dict[str, str] = field(default_factory=dict)
    deleted: set[str] = field(default_factory=set)
    verdicts: list[Verdict] = field(default_factory=list)


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return obj.get("metadata") or {}


def _key(obj: Mapping[str, Any]) -> tuple[str, str]:
    return (_meta(obj).get("namespace", ""), _meta(obj).get("name", ""))


def plan_lifecycle(
    forest: Forest,
    namespaces: Mapping[str, Mapping[str, Any]],
    subnamespaces: Iterable[Mapping[str, Any]],
) -> Lifecycle:
    """Finaliser, create and delete decisions for every SubNamespace of a snapshot.

    When several live SubNamespaces ask for the same missing namespace, the oldest (by
    creation time, then namespace) gets it and the others are in conflict, exactly as they
    will be once the namespace exists.
    """
    result = Lifecycle()
    live: list[Mapping[str, Any]] = []
    going: set[str] = set()
    for sub in subnamespaces:
        if _meta(sub).get("deletionTimestamp"):
            going.update(_finalize(sub, forest, namespaces, result))
        else:
            live.append(sub)
    live.sort(key=lambda s: (_meta(s).get("creationTimestamp") or "", *_key(s)))
    for sub in live:
        parent, name = _key(sub)
        if FINALIZER not in (_meta(sub).get("finalizers") or ()):
            result.actions.append(AddFinalizer(parent, name, _meta(sub).get("resourceVersion")))
        if parent in going:
            detail = f"namespace {parent} is being deleted with its subtree"
            result.verdicts.append(Verdict(parent, name, "terminating", detail))
        else:
            result.verdicts.append(_judge(parent, name, forest, result))
    return result


def cascades(sub: Mapping[str, Any]) -> bool:
    """Whether deleting this SubNamespace deletes its namespace's whole subtree."""
    annotations = _meta(sub).get("annotations") or {}
    return annotations.get(ANNOTATION_ALLOW_CASCADING_DELETION) == "true"


def _finalize(
    sub: Mapping[str, Any],
    forest: Forest,
    namespaces: Mapping[str, Mapping[str, Any]],
    result: Lifecycle,
) -> tuple[str, ...]:
    """Delete the namespace if it is ours and alive, then let the SubNamespace go.

    With cascading deletion the subtree goes first, leaves first: each pass deletes the
    namespaces whose children are all gone, and the SubNamespace keeps its finaliser, with
    its progress in its status, until its own namespace can go. Returns the namespaces of a
    subtree being deleted, whose SubNamespaces must not bring them back.
    """
    if FINALIZER not in (_meta(sub).get("finalizers") or ()):
        return ()
    parent, name = _key(sub)
    node = forest.get(name)
    ours = node is not None and not node.terminating and node.parent == parent
    cascading = ours and (cascades(sub) or _cascade_started(sub))
    subtree = forest.subtree(name) if cascading else (name,)
    left = [n for n in subtree if n != name]
    for member in left:
        upper = forest.nodes[member]
        if not upper.terminating and not forest.children(member):
            result.actions.append(DeleteNamespace(member, _meta(namespaces[member]).get("uid")))
            result.deleted.add(member)
    if left:
        shown = ", ".join(left[:3]) + (f", ... and {len(left) - 3} more" if len(left) > 3 else "")
        detail = f"deleting the subtree of {name}, leaves first: {len(left)} left ({shown})"
        if not cascades(sub):
            detail += (
                f"; {ANNOTATION_ALLOW_CASCADING_DELETION} was removed after the deletion was "
                "admitted, and an admitted deletion is carried out to the end"
            )
        result.verdicts.append(Verdict(parent, name, "deleting", detail))
        return subtree
    if ours:
        result.actions.append(DeleteNamespace(name, _meta(namespaces[name]).get("uid")))
        result.deleted.add(name)
    result.actions.append(RemoveFinalizer(parent, name, _meta(sub).get("resourceVersion")))
    return subtree if cascading else ()


def _cascade_started(sub: Mapping[str, Any]) -> bool:
    """Whether the controller already reported this SubNamespace deleting its subtree.

    The webhook admitted the deletion because the annotation was there; Kubernetes never
    takes an admitted deletion back, so neither does removing the annotation afterwards: the
    status, written by the pass that started the cascade, is the record that it began.
    """
    return ready_reason(sub) == REASON_DELETING_SUBTREE


def ready_reason(sub: Mapping[str, Any]) -> str | None:
    """The reason of the SubNamespace's Ready condition as it stands on the object."""
    conditions = (sub.get("status") or {}).get("conditions") or ()
    return next((c.get("reason") for c in conditions if c.get("type") == CONDITION_READY), None)


def _judge(parent: str, name: str, forest: Forest, result: Lifecycle) -> Verdict:
    upper = forest.get(parent)
    if upper is None or upper.terminating:
        return Verdict(parent, name, "terminating", f"namespace {parent} is terminating")
    node = forest.get(name)
    claimed = result.created.get(name)
    if node is None and claimed is None:
        result.created[name] = parent
        return Verdict(parent, name, "create")
    owner = node.parent if node is not None else claimed
    if owner != parent:
        detail = (
            f"namespace {name} belongs to {owner}"
            if owner is not None
            else f"namespace {name} exists and is not a sub-namespace"
        )
        return Verdict(parent, name, "conflict", detail)
    if node is not None and node.terminating:
        return Verdict(parent, name, "terminating", f"namespace {name} is terminating")
    return Verdict(parent, name, "exists")


def status_for(
    verdict: Verdict, generation: int, problem: Problem | None, waiting: str | None = None
) -> SubNamespaceStatus:
    """The status of a live SubNamespace, assuming this plan's actions succeed; ``waiting``
    says why copies into its namespace are held back (hierarchical quotas not counting there
    yet), a state that ends by itself within a pass or two."""
    if verdict.state == "conflict":
        conditions: tuple[Condition, ...] = (
            Condition(CONDITION_STALLED, "True", REASON_CONFLICT, CONFLICT_MESSAGE),
            Condition(CONDITION_READY, "False", REASON_CONFLICT, verdict.detail),
        )
    elif verdict.state == "deleting":
        conditions = (Condition(CONDITION_READY, "False", REASON_DELETING_SUBTREE, verdict.detail),)
    elif verdict.state == "terminating":
        conditions = (
            Condition(CONDITION_READY, "False", REASON_NAMESPACE_TERMINATING, verdict.detail),
        )
    elif problem is not None:
        conditions = (Condition(CONDITION_READY, "False", problem.reason, problem.message),)
    elif waiting is not None:
        conditions = (Condition(CONDITION_READY, "False", REASON_WAITING_FOR_QUOTA, waiting),)
    else:
        message = f"namespace {verdict.name} is in place with its metadata and objects"
        conditions = (Condition(CONDITION_READY, "True", REASON_SYNCED, message),)
    return SubNamespaceStatus(generation, conditions)


def status_differs(sub: Mapping[str, Any], status: SubNamespaceStatus) -> bool:
    """Whether the SubNamespace's current status differs from ``status`` in what we own."""
    current = sub.get("status") or {}
    if current.get("observedGeneration") != status.observed_generation:
        return True
    found = {
        c.get("type"): (c.get("status"), c.get("reason"), c.get("message"))
        for c in current.get("conditions") or ()
        if c.get("type") in OWNED_CONDITIONS
    }
    wanted = {c.type: (c.status, c.reason, c.message) for c in status.conditions}
    return found != wanted
