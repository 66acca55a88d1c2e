"""What the controller would do after a command, for ``--dry-run``: the planner, asked twice.

The planner runs on the namespaces, SubNamespaces and watched objects the user can read, once
as they are and once as the command would leave them; what the second plan does in the
namespaces the command touches, and the first does not, is the command's consequence. Work the
controller has pending anyway is therefore not blamed on the command.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kubectl_accurate.changes import Change, CreateSubNamespace, DeleteSubNamespace, LabelPatch
from kubectl_accurate.namespaces import Namespaces
from kubectl_accurate.output import Printer, metadata_text
from kubectl_accurate.watched import Watched
from libaccurate.actions import (
    Action,
    ApplyNamespaceMetadata,
    CreateNamespace,
    CreateObject,
    DeleteNamespace,
    DeleteObject,
    ReplaceObject,
)
from libaccurate.config import GroupVersionKind
from libaccurate.constants import FINALIZER
from libaccurate.forest import Forest
from libaccurate.network.kube import ApiError, Kube, resource_path
from libaccurate.planner import Snapshot, plan

Obj = Mapping[str, Any]
# The moment a dry run pretends the SubNamespace deletion happened; the planner only asks
# whether a deletion timestamp is set.
_DELETED_AT = "1970-01-01T00:00:00Z"
_SHOWN = (
    CreateNamespace,
    DeleteNamespace,
    ApplyNamespaceMetadata,
    CreateObject,
    ReplaceObject,
    DeleteObject,
)


@dataclass(frozen=True)
class Preview:
    """The controller's follow-up actions, and what the preview could not see."""

    actions: tuple[str, ...]
    notes: tuple[str, ...]


@dataclass(frozen=True)
class _State:
    namespaces: tuple[Obj, ...]
    subnamespaces: tuple[Obj, ...]

    @property
    def forest(self) -> Forest:
        return Forest.build(self.namespaces)


def consequences(kube: Kube, change: Change, namespaces: Namespaces, watched: Watched) -> Preview:
    before, after = _states(change, namespaces)
    touched = _touched(change)
    relevant = _relevant(touched, before.forest) | _relevant(touched, after.forest)
    objects, notes = _read_objects(kube, watched, sorted(relevant & set(namespaces.by_name)))
    if not watched.from_config:
        notes.append("label inheritance is not shown: the controller's config is not readable")
    was = _actions(before, watched, objects, relevant)
    now = _actions(after, watched, objects, relevant)
    return Preview(tuple(_describe(a) for a in now if a not in was), tuple(notes))


def _describe(action: Action) -> str:
    """One line per action; inherited metadata with its values, which is what changes."""
    if not isinstance(action, ApplyNamespaceMetadata):
        return action.describe()
    metadata = metadata_text(action.labels, action.annotations)
    return f"apply inherited {metadata} to namespace {action.name}"


def _states(change: Change, namespaces: Namespaces) -> tuple[_State, _State]:
    """The touched SubNamespaces and all namespaces, as they are and as they would be."""
    patched = {w.name: w.after() for w in change.writes if isinstance(w, LabelPatch)}
    deleted = [w.subnamespace for w in change.writes if isinstance(w, DeleteSubNamespace)]
    created = [_created(w) for w in change.writes if isinstance(w, CreateSubNamespace)]
    before = _State(tuple(namespaces.items), tuple(deleted))
    after = _State(
        tuple(patched.get(name, item) for name, item in namespaces.by_name.items()),
        (*(_deleting(sub) for sub in deleted), *created),
    )
    return before, after


def _created(write: CreateSubNamespace) -> Obj:
    """The SubNamespace as the API would store it: with the finalizer the webhook adds."""
    obj = write.object()
    obj["metadata"]["finalizers"] = [FINALIZER]
    return obj


def _deleting(sub: Obj) -> Obj:
    """A deleted SubNamespace as the controller sees it: held by its finalizer."""
    obj = copy.deepcopy(dict(sub))
    metadata = obj.setdefault("metadata", {})
    metadata["deletionTimestamp"] = _DELETED_AT
    metadata["finalizers"] = sorted({*(metadata.get("finalizers") or ()), FINALIZER})
    return obj


def _touched(change: Change) -> set[str]:
    touched: set[str] = set()
    for write in change.writes:
        if isinstance(write, LabelPatch):
            touched.add(write.name)
        else:
            touched.update((write.namespace, write.name))
    return touched


def _relevant(touched: Iterable[str], forest: Forest) -> set[str]:
    """The touched namespaces, everything that inherits from them, and where they inherit from:
    the planner needs the sources above to judge the copies below."""
    names: set[str] = set()
    for name in touched:
        names.update(forest.downstream(name))
        names.update(forest.walk_sources(name).names)
    return names


def _read_objects(
    kube: Kube, watched: Watched, namespaces: Sequence[str]
) -> tuple[dict[GroupVersionKind, list[Obj]], list[str]]:
    """The watched objects in the namespaces that matter; kinds the user may not list are
    skipped and named, as their copies cannot be predicted."""
    objects: dict[GroupVersionKind, list[Obj]] = {}
    notes = []
    for resource in watched.resources:
        gvk = resource.gvk
        for namespace in namespaces:
            path = resource_path(gvk.group, gvk.version, resource.plural, namespace)
            try:
                items = kube.list_objects(path).get("items") or []
            except ApiError as error:
                notes.append(f"{resource.plural} in {namespace} not shown: {error.message}")
                continue
            objects.setdefault(gvk, []).extend(items)
    return objects, notes


def _actions(
    state: _State,
    watched: Watched,
    objects: Mapping[GroupVersionKind, Sequence[Obj]],
    where: set[str],
) -> list[Action]:
    snapshot = Snapshot(
        config=watched.config,
        namespaces=state.namespaces,
        subnamespaces=state.subnamespaces,
        objects={resource.gvk: objects.get(resource.gvk, ()) for resource in watched.resources},
    )
    shown = _SHOWN if watched.from_config else tuple(set(_SHOWN) - {ApplyNamespaceMetadata})
    return [
        action
        for action in plan(snapshot).changes()
        if isinstance(action, shown) and action.namespace in where
    ]


def show(printer: Printer, preview: Preview, watched: Watched) -> None:
    if preview.actions:
        printer.line("then the controller would:")
        for action in preview.actions:
            printer.line(f"  {action}")
    else:
        printer.line("then the controller would have nothing to do")
    printer.line(("  watched kinds: ", "dim"), watched.source)
    for note in preview.notes:
        printer.line(("  note: ", "yellow"), note)
