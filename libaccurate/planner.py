"""The reconcile planner: from a snapshot of the cluster to the ordered actions that settle it.

``plan`` is the pure heart of the controller (DESIGN.md 4.4): the controller feeds it its
cache and applies what it returns, the CLI prints it for ``--dry-run``. It joins the
SubNamespace lifecycle, metadata inheritance and resource propagation on one picture of the
namespaces as they will be after the pass, and orders the result into stages whose actions
may run concurrently.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

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
    PatchSubNamespaceStatus,
    RemoveFinalizer,
    ReplaceObject,
    SubNamespaceStatus,
)
from libaccurate.cloning import copied_from
from libaccurate.config import Config, GroupVersionKind
from libaccurate.constants import CREATED_BY_VALUE, LABEL_CREATED_BY, LABEL_PARENT
from libaccurate.forest import Forest, Node, Problem
from libaccurate.index import ByNamespace, Index
from libaccurate.inheritance import Metadata, desired_metadata, labels_after, needs_write
from libaccurate.lifecycle import plan_lifecycle, status_differs, status_for
from libaccurate.propagation import plan_kind
from libaccurate.quota import HrqIndex, Lookup, awaiting, held_quotas, read_hrqs
from libaccurate.treelabels import tree_labels

Object = Mapping[str, Any]
RBAC_GROUP = "rbac.authorization.k8s.io"
# Statuses and events run last, when it is known what the other writes did (see closing.py).
FINAL_STAGE = 6

Result = Literal["done", "replan", "failed", "skipped", "aborted"]


class Happened(Protocol):
    """What became of a step: ``error`` says why it did not happen."""

    @property
    def result(self) -> Result: ...

    @property
    def error(self) -> str: ...


@dataclass(frozen=True)
class Finding:
    """A step's fate decided without sending it: a prerequisite did not happen."""

    result: Result
    error: str = ""


@dataclass(frozen=True)
class Snapshot:
    """What the planner looks at: the cluster as the controller's cache holds it.

    Namespaces and SubNamespaces are full objects (namespaces with ``managedFields``).
    ``objects`` holds every object of each watched kind; sources and copies must be full, the
    others may be stubs with metadata name, namespace, uid, resourceVersion, labels and
    annotations. ``owners`` (by uid) are the controllers of watched objects, needed only when
    ``propagate_generated`` is on.

    ``forest`` is the forest of ``namespaces`` and ``index`` the index of the lists when the
    caller keeps them current (they are built otherwise; the plan never changes them): with
    an index, the planner reads it rather than the lists. ``scope`` asks for the part of the
    plan about these namespaces only (see ``affected``), at a cost that follows their number
    rather than the cluster's: a controller that knows what changed since its last pass plans
    just that.

    ``hrqs`` are the HierarchicalResourceQuotas and ``hrq_quotas`` the ResourceQuotas kept for
    them (full, with status): a namespace below an HRQ gets no copy until its ResourceQuota
    for each HRQ above counts (libaccurate.quota.awaiting), since a copied RoleBinding would let
    a tenant write there uncharged. A caller that keeps them parsed gives ``parsed_hrqs`` (the
    usable HRQs) and ``kept_quotas`` (those ResourceQuotas by namespace and name) instead, so
    that the check costs the chains of the namespaces planned rather than every HRQ and
    ResourceQuota of the cluster; they are built from the lists otherwise.
    """

    config: Config
    namespaces: Sequence[Object]
    subnamespaces: Sequence[Object] = ()
    objects: Mapping[GroupVersionKind, Sequence[Object]] = field(default_factory=dict)
    owners: Mapping[str, Object] = field(default_factory=dict)
    propagate_generated: bool = False
    forest: Forest | None = None
    index: Index | None = None
    scope: frozenset[str] | None = None
    hrqs: Sequence[Object] = ()
    hrq_quotas: Sequence[Object] = ()
    parsed_hrqs: HrqIndex | None = None
    kept_quotas: Lookup | None = None


@dataclass(frozen=True)
class Step:
    """One action of a plan: it runs in ``stage`` and only if the steps in ``after`` succeeded.

    ``after`` names steps (by index) whose failure makes this one wrong, not merely early: the
    objects of a namespace whose creation failed, the finaliser of a SubNamespace whose
    namespace could not be deleted, the event announcing a write that did not happen.
    """

    index: int
    stage: int
    action: Action
    after: tuple[int, ...] = ()


@dataclass(frozen=True)
class Plan:
    """The ordered steps of a pass, the status of each live SubNamespace, and broken chains.

    ``statuses`` (keyed by SubNamespace namespace and name) assume every step succeeds; when
    a step for a namespace fails, the pass reports Ready=False instead (closing.py).
    ``problems`` lists the namespaces in a cycle or under a missing reference, which get
    nothing until an operator fixes them. ``subnamespaces`` are the snapshot's, by key.
    ``namespaces`` are the snapshot's namespaces, by name. ``label_problems`` says, by
    namespace, which of its tree labels cannot be written and why.
    ``scope`` is the snapshot's: when set, the steps, statuses and problems are those about
    these namespaces (a SubNamespace is about the namespace it names), exactly as the whole
    plan has them, and ``beyond_scope`` says whether planning them met writes due elsewhere
    (on the chains they inherit through), which only a whole plan makes. ``waiting`` names
    the namespaces whose copies are held back until their hierarchical quotas count there, with
    why; ``forest`` is the namespaces as they will be after the pass.
    """

    steps: tuple[Step, ...]
    statuses: Mapping[tuple[str, str], SubNamespaceStatus]
    problems: Mapping[str, Problem]
    subnamespaces: Mapping[tuple[str, str], Object] = field(default_factory=dict)
    label_problems: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    scope: frozenset[str] | None = None
    beyond_scope: bool = False
    waiting: Mapping[str, str] = field(default_factory=dict)
    forest: Forest | None = None
    namespaces: Mapping[str, Object] = field(default_factory=dict)

    @property
    def actions(self) -> tuple[Action, ...]:
        return tuple(step.action for step in self.steps)

    def changes(self) -> tuple[Action, ...]:
        """Actions that write cluster state; events only tell, and may repeat every pass."""
        return tuple(a for a in self.actions if not isinstance(a, EmitEvent))

    def stages(self) -> tuple[tuple[Step, ...], ...]:
        """The steps before the final stage, grouped so that each group may run concurrently,
        after the previous group; what the final stage sends is decided by closing.py."""
        grouped: dict[int, list[Step]] = {}
        for step in self.steps:
            if step.stage < FINAL_STAGE:
                grouped.setdefault(step.stage, []).append(step)
        return tuple(tuple(grouped[stage]) for stage in sorted(grouped))

    def hindrance(self, step: Step, happened: Mapping[int, Happened]) -> Finding | None:
        """Why ``step`` must not run, if a step it needs did not happen: a failure there
        makes it skipped, a stale picture leaves it to the next pass."""
        missing = [i for i in step.after if happened[i].result != "done"]
        if not missing:
            return None
        results = {happened[i].result for i in missing}
        result: Result = "skipped" if results & {"failed", "skipped"} else "replan"
        return Finding(result, f"{self.steps[missing[0]].action.describe()} did not happen")


def plan(snapshot: Snapshot) -> Plan:
    """Everything that must change for the cluster to match what Accurate keeps true."""
    config = snapshot.config
    scope = snapshot.scope
    index = snapshot.index
    if index is None:
        index = Index.of(snapshot.namespaces, snapshot.subnamespaces, snapshot.objects)
    namespaces, subnamespaces = index.namespaces, index.subnamespaces
    current = snapshot.forest
    if current is None:
        current = Forest.build(namespaces.values())
    within = None
    judged: Iterable[Object] = subnamespaces.values()
    if scope is not None:
        seeds = scope | _upstreams(index.objects, scope)
        within = _relevant(current, index.naming, seeds)
        judged = [sub for name in within for sub in index.naming.get(name, {}).values()]
    lifecycle = plan_lifecycle(current, namespaces, judged)
    forest = _future_forest(current, lifecycle.created, lifecycle.deleted)
    metadata = desired_metadata(forest, namespaces, subnamespaces, config, within)
    actions: list[Action] = list(lifecycle.actions)
    actions.extend(_namespace_writes(namespaces, metadata, lifecycle.created))
    owners = snapshot.owners if snapshot.propagate_generated else None
    labels = _future_labels(forest, namespaces, metadata)
    copies: list[Action] = []
    for gvk in config.watches:
        objects = index.objects.get(gvk, {})
        copies.extend(plan_kind(gvk, objects, forest, config, owners, labels, within))
    targets = {a.namespace for a in copies} | {v.name for v in lifecycle.verdicts}
    waiting = awaiting(forest, *_quota_picture(snapshot), targets)
    actions.extend(_unless_waiting(copies, waiting))
    statuses = {}
    for verdict in lifecycle.verdicts:
        sub = subnamespaces[(verdict.namespace, verdict.name)]
        generation = int((sub.get("metadata") or {}).get("generation") or 0)
        problem = forest.problem(verdict.name)
        status = status_for(verdict, generation, problem, waiting.get(verdict.name))
        statuses[(verdict.namespace, verdict.name)] = status
        if status_differs(sub, status):
            actions.append(PatchSubNamespaceStatus(verdict.namespace, verdict.name, status))
    beyond_scope = False
    if scope is not None:
        beyond_scope = any(
            about(action) not in scope for action in actions if not isinstance(action, EmitEvent)
        )
        actions = [action for action in actions if about(action) in scope]
        statuses = {key: status for key, status in statuses.items() if key[1] in scope}
        waiting = {name: why for name, why in waiting.items() if name in scope}
    return Plan(
        _order(actions, forest),
        statuses,
        _problems(forest, scope),
        subnamespaces,
        _label_problems(forest, config.tree_label_suffix, within, scope),
        scope,
        beyond_scope,
        waiting,
        forest,
        namespaces,
    )


def _quota_picture(snapshot: Snapshot) -> tuple[HrqIndex, Lookup]:
    """The usable HRQs and the ResourceQuotas kept for them, as the caller keeps them or
    built from the snapshot's lists."""
    hrqs = snapshot.parsed_hrqs
    if hrqs is None:
        hrqs = HrqIndex(read_hrqs(snapshot.hrqs)[0])
    kept = snapshot.kept_quotas
    if kept is None:
        kept = held_quotas(snapshot.hrq_quotas)
    return hrqs, kept


def _unless_waiting(actions: list[Action], waiting: Mapping[str, str]) -> list[Action]:
    """The propagation actions less the writes into namespaces waiting for their quotas to
    count (and the events about those writes); deleting a copy there still goes ahead, since
    it can only take rights away."""
    if not waiting:
        return actions
    held = {
        action.ref.key
        for action in actions
        if isinstance(action, (CreateObject, ReplaceObject)) and action.namespace in waiting
    }
    return [action for action in actions if _object_key(action) not in held]


def affected(forest: Forest, changed: Iterable[str]) -> frozenset[str]:
    """The namespaces whose part of the plan a change in ``changed`` may alter: each of them
    and everything downstream of it (what flows in comes from above)."""
    found: set[str] = set()
    for name in changed:
        if name not in found:
            found.update(forest.downstream(name))
    return frozenset(found)


def about(action: Action) -> str:
    """The namespace an action belongs to in a scoped plan: a SubNamespace's actions belong
    to the namespace it names, every other action to the namespace it targets."""
    if isinstance(action, (AddFinalizer, RemoveFinalizer, PatchSubNamespaceStatus)):
        return action.name
    return action.namespace


def _upstreams(
    objects: Mapping[GroupVersionKind, ByNamespace], scope: frozenset[str]
) -> frozenset[str]:
    """The namespaces the copies in ``scope`` say they were copied from: a stale copy is
    deleted in the name of the top of its chain, which the walk finds from there."""
    found = set()
    for by_namespace in objects.values():
        for namespace in scope:
            for obj in by_namespace.get(namespace, {}).values():
                upstream = copied_from(obj)
                if upstream is not None:
                    found.add(upstream)
    return frozenset(found)


def _relevant(forest: Forest, naming: ByNamespace, seeds: frozenset[str]) -> frozenset[str]:
    """What the plan for ``seeds`` must look at: the chains they inherit through, and the
    SubNamespaces naming any of those (``naming``, by the namespace named) with their
    parents' chains, since whether such a namespace gets created or is being deleted decides
    what flows down."""
    found: frozenset[str] = frozenset()
    pending: set[str] = set(seeds)
    while pending:
        added = forest.upward(pending) - found
        found |= added
        pending = {parent for name in added for parent in naming.get(name, ())} - found
    return found


def _problems(forest: Forest, scope: frozenset[str] | None) -> dict[str, Problem]:
    """Broken chains, among ``scope`` when given."""
    if scope is None:
        return forest.problems()
    return {name: problem for name in scope if (problem := forest.problem(name)) is not None}


def _label_problems(
    forest: Forest,
    suffix: str | None,
    within: frozenset[str] | None,
    scope: frozenset[str] | None,
) -> dict[str, tuple[str, ...]]:
    """Tree labels too long to be written, by namespace; none at all when they are off."""
    if suffix is None:
        return {}
    found = {}
    for name in forest.top_down(within):
        if scope is not None and name not in scope:
            continue
        problems = tree_labels(forest, forest.nodes[name], suffix).problems
        if problems:
            found[name] = problems
    return found


def _future_labels(
    forest: Forest, namespaces: Mapping[str, Object], metadata: Mapping[str, Metadata]
) -> Callable[[str], Mapping[str, str]]:
    """A namespace's labels after this pass, worked out only for the namespaces a
    propagate-select asks about, once each."""

    @functools.cache
    def labels(name: str) -> Mapping[str, str]:
        current = namespaces.get(name) or {"metadata": {"labels": forest.nodes[name].labels}}
        return labels_after(current, metadata.get(name))

    return labels


def _future_forest(current: Forest, created: Mapping[str, str], deleted: set[str]) -> Forest:
    """The namespaces as they will be after the pass: new ones in, deleted ones terminating."""
    if not created and not deleted:
        return current
    forest = current.copy()
    for name in deleted:
        forest.upsert(Node(name, current.nodes[name].labels, terminating=True))
    for name, parent in created.items():
        forest.upsert(Node(name, {LABEL_PARENT: parent, LABEL_CREATED_BY: CREATED_BY_VALUE}))
    return forest


def _namespace_writes(
    namespaces: Mapping[str, Object],
    metadata: Mapping[str, Metadata],
    created: Mapping[str, str],
) -> list[Action]:
    writes: list[Action] = []
    for name, parent in created.items():
        wanted = metadata.get(name) or Metadata(
            {LABEL_PARENT: parent, LABEL_CREATED_BY: CREATED_BY_VALUE}, {}
        )
        writes.append(CreateNamespace(name, wanted.labels, wanted.annotations))
    for name, wanted in metadata.items():
        if name not in created and needs_write(namespaces[name], wanted):
            writes.append(
                ApplyNamespaceMetadata(name, wanted.labels, wanted.annotations, wanted.takeover)
            )
    return writes


def _stage(action: Action) -> int:
    """The phase an action belongs to; phases run in this order.

    A deleted SubNamespace is let go first (its namespace deleted, then its finalizer
    removed), before the rest of the work the change brings: a script that deletes or moves
    one (``sub move``) checks at once that it is gone, while the copies into the moved
    namespace may take long. Namespaces exist before anything goes into them; Roles are
    written before the RoleBindings that reference them (the API checks a binding against its
    role); copies are deleted only after all creations, so that a name moving between
    namespaces never leaves a gap; statuses and events come last, when it is known what
    failed.
    """
    if isinstance(action, DeleteNamespace):
        return 0
    if isinstance(action, RemoveFinalizer):
        return 1
    if isinstance(action, (AddFinalizer, CreateNamespace, ApplyNamespaceMetadata, AnnotateObject)):
        return 2
    if isinstance(action, (CreateObject, ReplaceObject)):
        ref = action.ref
        return 4 if ref.kind == "RoleBinding" and ref.api_version.startswith(RBAC_GROUP) else 3
    if isinstance(action, DeleteObject):
        return 5
    return FINAL_STAGE


def _object_key(action: Action) -> tuple[str, str, str, str] | None:
    if isinstance(action, (CreateObject, ReplaceObject)):
        return action.ref.key
    if isinstance(action, EmitEvent):
        return action.involved.key
    return None


def _order(actions: list[Action], forest: Forest) -> tuple[Step, ...]:
    """Sort actions into stages, parents before children, and link each to what it needs."""

    @functools.cache
    def place(namespace: str) -> tuple[int, tuple[str, ...]]:
        """Sources before dependents: a sound namespace by its chain from the top, then the
        rest."""
        chain = forest.walk_sources(namespace)
        if namespace in forest and chain.end == "top":
            return (0, chain.names[::-1])
        return (1, ())

    def sort_key(action: Action) -> tuple[int, tuple[int, tuple[str, ...]], str, str]:
        return (_stage(action), place(action.namespace), action.namespace, action.describe())

    ordered = sorted(actions, key=sort_key)
    created: dict[str, int] = {}
    deleted: dict[str, int] = {}
    written: dict[tuple[str, str, str, str], int] = {}
    steps: list[Step] = []
    for index, action in enumerate(ordered):
        after: list[int] = []
        if action.namespace in created and not isinstance(action, CreateNamespace):
            after.append(created[action.namespace])
        if isinstance(action, RemoveFinalizer) and action.name in deleted:
            after.append(deleted[action.name])
        key = _object_key(action)
        if isinstance(action, EmitEvent) and key in written:
            after.append(written[key])
        if isinstance(action, CreateNamespace):
            created[action.name] = index
        elif isinstance(action, DeleteNamespace):
            deleted[action.name] = index
        elif key is not None and not isinstance(action, EmitEvent):
            written[key] = index
        steps.append(Step(index, _stage(action), action, tuple(after)))
    return tuple(steps)
