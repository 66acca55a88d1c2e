"""Resource propagation for one watched kind: the object writes that make copies match sources.

The walk goes down the forest once, from sources to dependents, and carries what each
namespace *will* hold after the plan, so that copies chain down the tree in one pass, also
through namespaces that do not exist yet (DESIGN.md 4.3). A clone is made once per source and
level and retargeted for each sibling, which keeps a pass over thousands of namespaces cheap.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from libaccurate.actions import (
    Action,
    AnnotateObject,
    CreateObject,
    DeleteObject,
    EmitEvent,
    ObjectRef,
    ReplaceObject,
)
from libaccurate.cloning import clone, contains, copied_from, propagate_mode, retarget
from libaccurate.config import Config, GroupVersionKind
from libaccurate.constants import (
    ANNOTATION_GENERATED,
    ANNOTATION_PROPAGATE,
    ANNOTATION_PROPAGATE_GENERATED,
    PROPAGATE_CREATE,
    PROPAGATE_MODES,
    PROPAGATE_UPDATE,
)
from libaccurate.forest import Forest
from libaccurate.index import ByNamespace
from libaccurate.selection import EVERYWHERE, REASON_BAD_EXCEPTION, Selection, selection_of

Object = Mapping[str, Any]
Labels = Callable[[str], Mapping[str, str]]
NOT_GENERATED = "false"
REASON_ORIGINAL_REPLACED = "OriginalReplaced"
REASON_PROPAGATION_SKIPPED = "PropagationSkipped"


@dataclass
class _Walk:
    """State of one walk down the forest for one kind."""

    gvk: GroupVersionKind
    config: Config
    forest: Forest
    labels: Labels
    actions: list[Action] = field(default_factory=list)
    # namespace -> name -> the object that will be there and propagates further down
    outgoing: dict[str, dict[str, Object]] = field(default_factory=dict)
    # (source namespace, name) -> the clone for the first child; siblings get it retargeted
    clones: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    # (namespace, name) -> the top of the chain of copies the object there belongs to: for the
    # objects that will be there, and for the copies the walk deletes
    origins: dict[tuple[str, str], ObjectRef] = field(default_factory=dict)
    # origin -> where its copies may go, from the source's exception annotations
    selections: dict[ObjectRef, Selection] = field(default_factory=dict)


def _metadata(obj: Object) -> Mapping[str, Any]:
    return obj.get("metadata") or {}


def plan_kind(
    gvk: GroupVersionKind,
    objects: ByNamespace,
    forest: Forest,
    config: Config,
    owners: Mapping[str, Object] | None = None,
    labels: Labels | None = None,
    within: frozenset[str] | None = None,
) -> list[Action]:
    """Actions for one kind over a forest describing the namespaces after this pass.

    ``objects`` are the kind's objects by namespace, then name (libaccurate.index).
    ``owners`` (by uid) turns on propagate-generated: controlled objects are annotated with
    their owner's verdict and, in the same pass, propagated as sources. ``labels`` gives a
    namespace's labels as they will be after this pass, which propagate-select matches
    (the forest's labels when left out). ``within`` (closed upward) limits the walk to those
    namespaces.
    """
    walk = _Walk(gvk, config, forest, labels or (lambda name: forest.nodes[name].labels))
    by_namespace = _index(gvk, objects, forest, within)
    if owners is not None:
        _mark_generated(walk, by_namespace, owners)
    for name in forest.top_down(within):
        node = forest.nodes[name]
        existing = by_namespace.get(name, {})
        if node.terminating:
            walk.outgoing[name] = _sources(existing)
            walk.origins.update(
                ((name, n), ObjectRef.of(o)) for n, o in walk.outgoing[name].items()
            )
            continue
        incoming = walk.outgoing.get(node.source, {}) if node.source else {}
        walk.outgoing[name] = _plan_namespace(walk, name, existing, incoming)
    return walk.actions


def _index(
    gvk: GroupVersionKind, objects: ByNamespace, forest: Forest, within: frozenset[str] | None
) -> dict[str, dict[str, Object]]:
    """The objects of the namespaces the walk visits (``within``, else the forest's), in
    mappings of the walk's own, each with its apiVersion and kind filled in.

    List responses of the API do not always repeat them on items, and a clone needs them.
    """
    names = within if within is not None else [name for name in objects if name in forest]
    index: dict[str, dict[str, Object]] = {}
    for namespace in names:
        found = objects.get(namespace)
        if found:
            index[namespace] = {name: _typed(gvk, obj) for name, obj in found.items()}
    return index


def _typed(gvk: GroupVersionKind, obj: Object) -> Object:
    if obj.get("apiVersion") == gvk.api_version and obj.get("kind") == gvk.kind:
        return obj
    return {**obj, "apiVersion": gvk.api_version, "kind": gvk.kind}


def _sources(objects: Mapping[str, Object]) -> dict[str, Object]:
    return {name: obj for name, obj in objects.items() if propagate_mode(obj) in PROPAGATE_MODES}


def _mark_generated(
    walk: _Walk, by_namespace: dict[str, dict[str, Object]], owners: Mapping[str, Object]
) -> None:
    """Record the owner's propagate-generated verdict on controlled objects not yet checked.

    An object whose owner asks for propagation becomes a source in this very pass, so that
    planning again after the annotation lands finds nothing more to do.
    """
    for objects in by_namespace.values():
        for name, obj in objects.items():
            annotations = _metadata(obj).get("annotations") or {}
            if ANNOTATION_PROPAGATE in annotations:
                continue
            if annotations.get(ANNOTATION_GENERATED) == NOT_GENERATED:
                continue
            owner = _controller_owner(obj, owners)
            if owner is None:
                continue
            mode = (_metadata(owner).get("annotations") or {}).get(ANNOTATION_PROPAGATE_GENERATED)
            verdict = (
                {ANNOTATION_PROPAGATE: mode}
                if mode is not None
                else {ANNOTATION_GENERATED: NOT_GENERATED}
            )
            walk.actions.append(AnnotateObject(ObjectRef.of(obj), verdict))
            objects[name] = {
                **obj,
                "metadata": {**_metadata(obj), "annotations": {**annotations, **verdict}},
            }


def _controller_owner(obj: Object, owners: Mapping[str, Object]) -> Object | None:
    for ref in _metadata(obj).get("ownerReferences") or ():
        if ref.get("controller"):
            return owners.get(ref.get("uid", ""))
    return None


def _plan_namespace(
    walk: _Walk, namespace: str, existing: Mapping[str, Object], incoming: Mapping[str, Object]
) -> dict[str, Object]:
    """Actions for one namespace; returns the objects that will propagate out of it."""
    outgoing: dict[str, Object] = {}
    for name, obj in existing.items():
        if name in incoming:
            continue
        upstream = copied_from(obj)
        if upstream is not None and propagate_mode(obj) == PROPAGATE_UPDATE:
            # A copy in update mode with no source to follow any more: stale.
            ref = ObjectRef.of(obj)
            origin = walk.origins.get((upstream, name)) or ObjectRef(
                ref.api_version, ref.kind, upstream, name
            )
            walk.origins[(namespace, name)] = origin
            walk.actions.append(DeleteObject(ref, _metadata(obj).get("resourceVersion"), origin))
        elif propagate_mode(obj) in PROPAGATE_MODES:
            outgoing[name] = obj
            _add_source(walk, namespace, obj)
    for name, source in incoming.items():
        origin = walk.origins[(_metadata(source).get("namespace", ""), name)]
        selection = walk.selections.get(origin, EVERYWHERE)
        if selection.narrowed and not selection.allows(
            namespace, walk.labels(namespace), walk.forest
        ):
            outgoing[name] = _pass_by(walk, namespace, source, existing.get(name), selection)
            continue
        there = _plan_copy(walk, namespace, source, existing.get(name), origin)
        if propagate_mode(there) in PROPAGATE_MODES:
            outgoing[name] = there
            walk.origins[(namespace, name)] = (
                origin if copied_from(there) is not None else ObjectRef.of(there)
            )
    return outgoing


def _add_source(walk: _Walk, namespace: str, obj: Object) -> None:
    """Record an object that propagates on its own account, and where it may go; a bad
    exception annotation is told on the object itself."""
    ref = ObjectRef.of(obj)
    walk.origins[(namespace, ref.name)] = ref
    selection = walk.selections[ref] = selection_of(obj)
    if selection.error is not None:
        message = f"nothing is copied from {ref} until it is fixed: {selection.error}"
        walk.actions.append(EmitEvent(ref, "Warning", REASON_BAD_EXCEPTION, message))


def _pass_by(
    walk: _Walk, namespace: str, source: Object, actual: Object | None, selection: Selection
) -> Object:
    """A namespace the source's exceptions leave out: no copy goes there, an update-mode copy
    already there goes (unless the exceptions do not parse: a typo deletes nothing), and the
    source reaches on to the namespaces below; a user's own source there takes its place."""
    if actual is not None and copied_from(actual) is None:
        if propagate_mode(actual) in PROPAGATE_MODES:
            _add_source(walk, namespace, actual)
            return actual
        return source
    origin = walk.origins[(_metadata(source).get("namespace", ""), _metadata(source)["name"])]
    walk.origins[(namespace, origin.name)] = origin
    if (
        actual is not None
        and selection.error is None
        and propagate_mode(actual) == PROPAGATE_UPDATE
    ):
        metadata = _metadata(actual)
        walk.actions.append(
            DeleteObject(ObjectRef.of(actual), metadata.get("resourceVersion"), origin)
        )
    return source


def _clone_for(walk: _Walk, namespace: str, source: Object) -> dict[str, Any]:
    metadata = _metadata(source)
    key = (metadata.get("namespace", ""), metadata.get("name", ""))
    made = walk.clones.get(key)
    if made is None:
        made = walk.clones[key] = clone(source, namespace, walk.config)
        return made
    return retarget(made, namespace)


def _plan_copy(
    walk: _Walk, namespace: str, source: Object, actual: Object | None, origin: ObjectRef
) -> Object:
    """The write (if any) for one copy; returns the object that will be in its place."""
    mode = propagate_mode(source)
    if actual is None:
        wanted = _clone_for(walk, namespace, source)
        walk.actions.append(CreateObject(wanted, origin))
        return wanted
    is_copy = copied_from(actual) is not None
    if mode == PROPAGATE_CREATE:
        if not is_copy:
            walk.actions.append(_skipped_event(actual, source))
            return actual
        if propagate_mode(actual) != PROPAGATE_UPDATE:
            return actual
    wanted = _clone_for(walk, namespace, source)
    if is_copy and contains(wanted, actual):
        return wanted
    metadata = _metadata(actual)
    walk.actions.append(ReplaceObject(wanted, metadata.get("uid"), metadata.get("resourceVersion")))
    if not is_copy:
        walk.actions.append(_replaced_event(actual, source))
    return wanted


def _skipped_event(actual: Object, source: Object) -> EmitEvent:
    ref = ObjectRef.of(actual)
    origin = _metadata(source).get("namespace", "")
    return EmitEvent(
        ref,
        "Normal",
        REASON_PROPAGATION_SKIPPED,
        f"{ref} is not a copy, so {ref.kind} {origin}/{ref.name} (propagate=create) "
        "was not copied over it",
    )


def _replaced_event(actual: Object, source: Object) -> EmitEvent:
    ref = ObjectRef.of(actual)
    origin = _metadata(source).get("namespace", "")
    return EmitEvent(
        ref,
        "Warning",
        REASON_ORIGINAL_REPLACED,
        f"{ref} was not a copy; it was replaced by a copy of {ref.kind} {origin}/{ref.name}, "
        "whose propagate=update takes precedence",
    )
