"""What each write command changes, as pure values: the writes, in order, and the line to print.

The commands do what the Go plugin's do (same label edits, same SubNamespace moves), but every
precondition is decided here from what was read, before anything is written, so that a command
that cannot finish does not start. A precondition about a namespace the user may not read is
left to the API server. Nothing here does I/O.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from kubectl_accurate.namespaces import Namespaces
from kubectl_accurate.output import metadata_text
from libaccurate import subnamespaces
from libaccurate.constants import LABEL_PARENT, LABEL_TEMPLATE, LABEL_TYPE, TYPE_ROOT, TYPE_TEMPLATE

Obj = Mapping[str, Any]
NO_TYPE = "none"
TYPES = (TYPE_ROOT, TYPE_TEMPLATE, NO_TYPE)


class Refused(Exception):
    """A precondition of a command does not hold; nothing was written."""


@dataclass(frozen=True)
class LabelPatch:
    """A JSON merge patch of only the namespace labels that change (None removes one)."""

    before: Obj = field(repr=False)
    labels: Mapping[str, str | None]

    @property
    def name(self) -> str:
        return str(self.before["metadata"]["name"])

    def after(self) -> dict[str, Any]:
        """The namespace as it will be once the patch is applied."""
        result = copy.deepcopy(dict(self.before))
        labels = result["metadata"].setdefault("labels", {})
        for key, value in self.labels.items():
            if value is None:
                labels.pop(key, None)
            else:
                labels[key] = value
        return result

    def describe(self) -> str:
        parts = [
            f"remove {key}" if value is None else f"set {key}={value}"
            for key, value in self.labels.items()
        ]
        return f"label namespace {self.name}: {', '.join(parts)}"


@dataclass(frozen=True)
class CreateSubNamespace:
    namespace: str
    name: str
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)

    def object(self) -> dict[str, Any]:
        return subnamespaces.build(self.namespace, self.name, self.labels, self.annotations)

    def describe(self) -> str:
        spec = metadata_text(self.labels, self.annotations)
        return f"create SubNamespace {self.namespace}/{self.name}" + (
            f" with {spec}" if spec else ""
        )


@dataclass(frozen=True)
class DeleteSubNamespace:
    """Delete a SubNamespace as read (the uid precondition spares a newer one of that name).

    ``preflight`` is False when an earlier write of the same command changes what the API
    server would say about this one, so asking it beforehand (dry run) would mislead.
    """

    subnamespace: Obj = field(repr=False)
    preflight: bool = True

    @property
    def namespace(self) -> str:
        return str(self.subnamespace["metadata"]["namespace"])

    @property
    def name(self) -> str:
        return str(self.subnamespace["metadata"]["name"])

    def describe(self) -> str:
        return f"delete SubNamespace {self.namespace}/{self.name}"


Write = LabelPatch | CreateSubNamespace | DeleteSubNamespace


@dataclass(frozen=True)
class Change:
    """The writes of one command, in order, and the line that tells the user what happened."""

    writes: tuple[Write, ...]
    summary: str


def _labels(namespace: Obj) -> Mapping[str, str]:
    return (namespace.get("metadata") or {}).get("labels") or {}


def _existing(namespaces: Namespaces, name: str) -> Obj:
    found = namespaces.get(name)
    if found is None:
        raise Refused(namespaces.missing(name))
    return found


def parent_label(namespace: Obj) -> str | None:
    """The parent a namespace names, if it is a sub-namespace."""
    return _labels(namespace).get(LABEL_PARENT) or None


def _parent_of(namespace: Obj) -> str:
    parent = parent_label(namespace)
    if parent is None:
        raise Refused(f"{namespace['metadata']['name']} is not a sub-namespace")
    return parent


def _nothing(reason: str) -> Change:
    return Change((), f"nothing to do: {reason}")


def set_type(namespaces: Namespaces, name: str, wanted: str) -> Change:
    """``ns set-type``: label the namespace a root or a template, or remove its type."""
    namespace = _existing(namespaces, name)
    current = _labels(namespace).get(LABEL_TYPE)
    if wanted == NO_TYPE:
        if current is None:
            return _nothing(f"namespace {name} has no type")
        return Change(
            (LabelPatch(namespace, {LABEL_TYPE: None}),), f"namespace {name} no longer has a type"
        )
    if current == wanted:
        return _nothing(f"namespace {name} is already a {wanted}")
    return Change(
        (LabelPatch(namespace, {LABEL_TYPE: wanted}),), f"namespace {name} is now a {wanted}"
    )


def set_template(namespaces: Namespaces, name: str, template: str) -> Change:
    namespace = _existing(namespaces, name)
    if _labels(namespace).get(LABEL_TEMPLATE) == template:
        return _nothing(f"namespace {name} already uses template {template}")
    return Change(
        (LabelPatch(namespace, {LABEL_TEMPLATE: template}),),
        f"namespace {name} now uses template {template}",
    )


def unset_template(namespaces: Namespaces, name: str) -> Change:
    namespace = _existing(namespaces, name)
    template = _labels(namespace).get(LABEL_TEMPLATE)
    if template is None:
        return _nothing(f"namespace {name} has no template")
    return Change(
        (LabelPatch(namespace, {LABEL_TEMPLATE: None}),),
        f"namespace {name} no longer uses template {template}",
    )


def create_sub(
    namespaces: Namespaces,
    name: str,
    parent: str,
    labels: Mapping[str, str],
    annotations: Mapping[str, str],
) -> Change:
    """``sub create``: a SubNamespace, after making sure its namespace is not taken."""
    if namespaces.get(name) is not None:
        raise Refused(f"namespace {name} already exists")
    create = CreateSubNamespace(parent, name, labels, annotations)
    return Change(
        (create,),
        f"created SubNamespace {parent}/{name}; the controller will create namespace {name}",
    )


def delete_sub(namespaces: Namespaces, name: str, subnamespace: Obj | None) -> Change:
    """``sub delete``: the SubNamespace in the namespace's parent (which deletes the namespace)."""
    parent = _parent_of(_existing(namespaces, name))
    if subnamespace is None:
        raise Refused(f"SubNamespace {parent}/{name} not found")
    return Change(
        (DeleteSubNamespace(subnamespace),),
        f"deleted SubNamespace {parent}/{name}; the controller will delete namespace {name}",
    )


def move(
    namespaces: Namespaces,
    name: str,
    new_parent: str,
    original: Obj | None,
    taken: bool,
    leave_original: bool,
) -> Change:
    """``sub move``: re-parent the namespace, then move its SubNamespace along.

    The label changes first, as in the Go plugin: from then on the original SubNamespace no
    longer owns the namespace, so deleting it cannot delete the namespace. ``original`` is the
    SubNamespace in the old parent (its spec moves along); ``taken`` says one already exists
    in the new parent.
    """
    namespace = _existing(namespaces, name)
    old_parent = _parent_of(namespace)
    if old_parent == new_parent:
        return _nothing(f"{name} is already a sub-namespace of {new_parent}")
    if taken:
        raise Refused(f"SubNamespace {new_parent}/{name} already exists")
    writes: list[Write] = [LabelPatch(namespace, {LABEL_PARENT: new_parent})]
    if original is not None and not leave_original:
        writes.append(DeleteSubNamespace(original, preflight=False))
    spec = (original or {}).get("spec") or {}
    writes.append(
        CreateSubNamespace(
            new_parent, name, spec.get("labels") or {}, spec.get("annotations") or {}
        )
    )
    summary = f"moved {name} from {old_parent} to {new_parent}"
    if original is not None and leave_original:
        summary += f"; SubNamespace {old_parent}/{name} was left in place"
    return Change(tuple(writes), summary)


def graft(namespaces: Namespaces, name: str, parent: str, taken: bool) -> Change:
    """``sub graft``: make a namespace that is not a sub-namespace one, clearing its type and
    template as the Go plugin does, and give it a SubNamespace in the parent."""
    namespace = _existing(namespaces, name)
    current = parent_label(namespace)
    if current:
        raise Refused(f"{name} is already a sub-namespace of {current}; use 'sub move' instead")
    if taken:
        raise Refused(f"SubNamespace {parent}/{name} already exists")
    labels: dict[str, str | None] = {
        key: None for key in (LABEL_TYPE, LABEL_TEMPLATE) if key in _labels(namespace)
    }
    labels[LABEL_PARENT] = parent
    writes = (LabelPatch(namespace, labels), CreateSubNamespace(parent, name))
    return Change(writes, f"grafted {name} under {parent}")


def cut(namespaces: Namespaces, name: str, subnamespace: Obj | None) -> Change:
    """``sub cut``: make a sub-namespace a root (its children stay with it) and delete the
    SubNamespace that made it, which no longer owns it once the label is gone."""
    namespace = _existing(namespaces, name)
    parent = _parent_of(namespace)
    writes: list[Write] = [LabelPatch(namespace, {LABEL_PARENT: None, LABEL_TYPE: TYPE_ROOT})]
    if subnamespace is not None:
        writes.append(DeleteSubNamespace(subnamespace, preflight=False))
    return Change(tuple(writes), f"namespace {name} is now a root (cut from {parent})")
