"""Who owns which label and annotation keys of a namespace, as its ``managedFields`` record it,
and handing that ownership from one entry to another.

Server-side apply removes a key the applier applied before and omits now only when no other
manager owns it. So a key that another writer set by update, and still co-owns, never goes when
the controller stops applying it: HNC's keys after an import, and the keys the Go Accurate
wrote before it switched to server-side apply.

The Go Accurate up to v1.2 wrote namespace metadata with plain updates (controller-runtime's
``Create`` and ``Update``), which the API server records as ``Update`` entries of a manager named
after the client's User-Agent, that is after the binary: ``accurate-controller``, the very name
the controller applies under. v1.3 switched to server-side apply; v1.4 to v1.8 move those
entries into the ``Apply`` entry before each apply (client-go's ``csaupgrade``, all fields at
once). ``upgraded_managed_fields`` does the same for the keys the controller keeps, so replacing
any Go release works directly. Pure functions over plain dicts; inputs are never mutated.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from libaccurate.constants import FIELD_MANAGER

Entry = Mapping[str, Any]


@dataclass(frozen=True)
class OwnedKeys:
    """Label and annotation keys, as some managedFields entries own them."""

    labels: frozenset[str] = frozenset()
    annotations: frozenset[str] = frozenset()

    def __bool__(self) -> bool:
        return bool(self.labels or self.annotations)

    def __or__(self, other: OwnedKeys) -> OwnedKeys:
        return OwnedKeys(self.labels | other.labels, self.annotations | other.annotations)

    def __and__(self, other: OwnedKeys) -> OwnedKeys:
        return OwnedKeys(self.labels & other.labels, self.annotations & other.annotations)

    def describe(self) -> str:
        return ", ".join(sorted({*self.labels, *self.annotations}))


def applied_by_controller(entry: Entry) -> bool:
    """The controller's own apply entry: the keys whose removal the server carries out."""
    return written_by(entry, FIELD_MANAGER, "Apply")


def updated_by_go_controller(entry: Entry) -> bool:
    """An entry of the Go Accurate's updates from before v1.3 (or of its namespace creations)."""
    return written_by(entry, FIELD_MANAGER, "Update")


def written_by(entry: Entry, manager: str, operation: str) -> bool:
    """Whether ``entry`` records ``manager``'s ``operation`` on the object itself (not on a
    subresource)."""
    return (
        entry.get("manager") == manager
        and entry.get("operation") == operation
        and not entry.get("subresource")
    )


def owned_keys(entries: Iterable[Entry], picked: Callable[[Entry], bool]) -> OwnedKeys:
    """The label and annotation keys the ``picked`` entries own."""
    labels: set[str] = set()
    annotations: set[str] = set()
    for entry in entries:
        if picked(entry):
            metadata = _fields_metadata(entry)
            labels.update(_keys(metadata.get("f:labels")))
            annotations.update(_keys(metadata.get("f:annotations")))
    return OwnedKeys(frozenset(labels), frozenset(annotations))


def _fields_metadata(entry: Entry) -> Mapping[str, Any]:
    return (entry.get("fieldsV1") or {}).get("f:metadata") or {}


def _keys(fields: Mapping[str, Any] | None) -> Iterable[str]:
    return (key[2:] for key in (fields or {}) if key.startswith("f:"))


def released(entry: Entry, keys: OwnedKeys) -> dict[str, Any]:
    """``entry`` owning none of ``keys``; maps left empty are dropped."""
    result = copy.deepcopy(dict(entry))
    fields = result.get("fieldsV1") or {}
    metadata = fields.get("f:metadata") or {}
    for section, names in (("f:labels", keys.labels), ("f:annotations", keys.annotations)):
        owned = metadata.get(section) or {}
        for name in names:
            owned.pop(f"f:{name}", None)
        if not owned:
            metadata.pop(section, None)
    if not metadata:
        fields.pop("f:metadata", None)
    return result


def _granted(entry: Entry, keys: OwnedKeys) -> dict[str, Any]:
    """``entry`` owning ``keys`` too."""
    result = copy.deepcopy(dict(entry))
    fields = result.setdefault("fieldsV1", {})
    metadata = fields.setdefault("f:metadata", {})
    for section, names in (("f:labels", keys.labels), ("f:annotations", keys.annotations)):
        if names:
            owned = metadata.setdefault(section, {})
            for name in sorted(names):
                owned.setdefault(f"f:{name}", {})
    return result


def upgraded_managed_fields(
    entries: Sequence[Entry], kept: OwnedKeys
) -> list[dict[str, Any]] | None:
    """``entries`` with the ``kept`` keys the Go controller's update entries own moved into the
    controller's apply entry (made from the first such entry's version and time when there is
    none); None when those entries own none of them.

    Unlike ``csaupgrade``, which moves every field, only the keys the controller keeps for the
    namespace move: the rest (``parent`` and ``created-by`` from the namespace's creation, keys
    of patterns no longer configured) stay with the update entries, so the controller never
    removes what it does not keep. An update entry left owning nothing goes.
    """
    result: list[dict[str, Any]] = []
    moved = OwnedKeys()
    first: Entry | None = None
    for entry in entries:
        taken = owned_keys((entry,), updated_by_go_controller) & kept
        if taken:
            moved |= taken
            first = first or entry
            entry = released(entry, taken)
            if not entry.get("fieldsV1"):
                continue
        result.append(copy.deepcopy(dict(entry)))
    if first is None:
        return None
    index = next((i for i, entry in enumerate(result) if applied_by_controller(entry)), None)
    if index is not None:
        result[index] = _granted(result[index], moved)
        return result
    apply_entry = {
        "manager": FIELD_MANAGER,
        "operation": "Apply",
        "apiVersion": first.get("apiVersion") or "v1",
        **({"time": first["time"]} if first.get("time") else {}),
        "fieldsType": "FieldsV1",
    }
    return [_granted(apply_entry, moved), *result]
