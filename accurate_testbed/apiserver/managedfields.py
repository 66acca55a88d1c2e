"""Field ownership (`metadata.managedFields`) and server-side apply, as kube-apiserver keeps them.

The product depends on this: the controller applies namespace labels with force and relies on
the server to remove the keys it applied before and omits now, while keys another manager set
by hand stay. The rules follow sigs.k8s.io/structured-merge-diff as the real server uses it,
with one simplification the design allows: without the OpenAPI schemas every list is atomic
(owned and replaced as a whole), so field sets hold only `f:` paths; `k:`/`v:`/`i:` items found
in entries written by a real server count as ownership of their whole list.

Pure functions over plain dicts; inputs are never mutated, and results may share the parts a
write left alone with them. Field sets are translated to and from fieldsV1 through memos: most
writes (every quota status update) leave most entries as they were, so the same few tries are
read and written over and over.
"""

from __future__ import annotations

import functools
import marshal
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from accurate_testbed.apiserver.cloning import clone
from accurate_testbed.apiserver.patching import PatchError

Path = tuple[str, ...]
Obj = dict[str, Any]

# Never part of anyone's field set (apimachinery's stripMetaManager).
_STRIPPED: frozenset[Path] = frozenset(
    {("apiVersion",), ("kind",), ("metadata",)}
    | {
        ("metadata", name)
        for name in (
            "name",
            "namespace",
            "creationTimestamp",
            "selfLink",
            "uid",
            "clusterName",
            "generation",
            "managedFields",
            "resourceVersion",
        )
    }
)
# Set by the server; an applied object's values for them are preconditions, not content.
_SERVER_METADATA = ("creationTimestamp", "selfLink", "uid", "generation", "resourceVersion")

# The struct-valued fields a built-in kind's empty object already has. The real server compares
# a create against that empty object, so these maps are not "added" (no "." in fieldsV1) while a
# custom resource's spec is.
_ZERO_OBJECTS: dict[tuple[str, str], Obj] = {
    ("", "Namespace"): {"spec": {}, "status": {}},
    ("", "Service"): {"spec": {}, "status": {"loadBalancer": {}}},
    ("", "ResourceQuota"): {"spec": {}, "status": {}},
    ("", "LimitRange"): {"spec": {}},
    ("", "Event"): {"involvedObject": {}, "source": {}},
    ("apps", "Deployment"): {
        "spec": {"template": {"metadata": {}, "spec": {}}, "strategy": {}},
        "status": {},
    },
    ("networking.k8s.io", "NetworkPolicy"): {"spec": {"podSelector": {}}},
    ("coordination.k8s.io", "Lease"): {"spec": {}},
    ("rbac.authorization.k8s.io", "RoleBinding"): {"roleRef": {}},
    ("rbac.authorization.k8s.io", "ClusterRoleBinding"): {"roleRef": {}},
    ("apiextensions.k8s.io", "CustomResourceDefinition"): {
        "spec": {"names": {}},
        "status": {"acceptedNames": {}},
    },
}


class ApplyConflict(Exception):
    """An apply without force would change fields other managers own (HTTP 409).

    `conflicts` lists (manager, field path) pairs; `causes` are the Status causes the real
    server sends; str() is its message.
    """

    def __init__(self, found: list[tuple[_Entry, Path]]) -> None:
        self.conflicts = [(entry.manager, _path_string(path)) for entry, path in found]
        self.causes = [
            {
                "reason": "FieldManagerConflict",
                "message": f"conflict with {entry.described()}",
                "field": _path_string(path),
            }
            for entry, path in found
        ]
        super().__init__(_conflict_message(found))


def _conflict_message(found: list[tuple[_Entry, Path]]) -> str:
    if len(found) == 1:
        entry, path = found[0]
        return (
            f"Apply failed with 1 conflict: conflict with {entry.described()}: {_path_string(path)}"
        )
    lines = []
    for described in sorted({entry.described() for entry, _ in found}):
        lines.append(f"conflicts with {described}:")
        lines.extend(f"- {_path_string(p)}" for e, p in found if e.described() == described)
    return f"Apply failed with {len(found)} conflicts: " + "\n".join(lines)


def _path_string(path: Path) -> str:
    return "".join(f".{name}" for name in path)


@dataclass
class _Entry:
    """One managedFields entry; the real server keys Update entries by API version too."""

    manager: str
    operation: str
    api_version: str
    subresource: str | None
    time: str | None
    fields: set[Path]

    def key(self) -> tuple[str, str, str, str]:
        version = self.api_version if self.operation == "Update" else ""
        return (self.manager, self.operation, version, self.subresource or "")

    def described(self) -> str:
        """The manager as kube-apiserver names it in conflict messages."""
        text = f'"{self.manager}"'
        if self.subresource:
            text += f' with subresource "{self.subresource}"'
        if self.operation == "Update":
            text += f" using {self.api_version}"
        return text

    def encoded(self) -> Obj:
        entry: Obj = {
            "manager": self.manager,
            "operation": self.operation,
            "apiVersion": self.api_version,
        }
        if self.time is not None:
            entry["time"] = self.time
        entry["fieldsType"] = "FieldsV1"
        entry["fieldsV1"] = marshal.loads(_encoded(frozenset(self.fields)))
        if self.subresource:
            entry["subresource"] = self.subresource
        return entry


def server_side_apply(
    live: Obj | None, applied: Obj, manager: str, force: bool, api_version: str, now: str
) -> Obj:
    """Apply `applied` for `manager` to `live` (None creates), returning the new object.

    Maps merge key by key and the applied value wins; a field the manager applied last time
    and omits now is removed unless some manager still owns it; changing a field another
    manager owns raises ApplyConflict unless `force`, which moves the field to the applier.
    The caller checks preconditions (uid, resourceVersion) and name/namespace.
    """
    _check_applied(applied)
    entries = _decode_entries(live) if live is not None else {}
    base = _without_managed_fields(live) if live is not None else {}
    config = _without_managed_fields(applied)
    for name in _SERVER_METADATA:
        config["metadata"].pop(name, None)
    merged = _merge_applied(clone(base), config)

    applier = _Entry(manager, "Apply", api_version, None, None, _strip(_leaf_paths(config)))
    previous = entries.get(applier.key())
    last = previous.fields if previous is not None else set()
    if previous is not None:
        applier.time = previous.time
    entries[applier.key()] = applier
    _prune(merged, last, set().union(*(entry.fields for entry in entries.values())))

    added, modified, removed = _compare(base, merged)
    changed = added | modified
    others = [entry for entry in entries.values() if entry is not applier]
    found = [(entry, path) for entry in others for path in sorted(entry.fields & changed)]
    if found and not force:
        raise ApplyConflict(sorted(found, key=lambda item: (item[0].described(), item[1])))
    for entry in others:
        entry.fields -= changed | removed
    if merged != base or previous is None:
        applier.time = now
    return _with_entries(merged, entries)


def record_update(
    old: Obj | None,
    new: Obj,
    manager: str,
    api_version: str,
    now: str,
    subresource: str | None = None,
) -> Obj:
    """Record a create (old None), update or non-apply patch by `manager` in `new`'s managedFields.

    The manager comes to own every field the write added or changed, which no other manager
    owns any more; fields the write removed leave every manager's set. A write that changes
    nothing leaves the entries (and their times) alone.
    """
    entries = _entries_for_update(old, new, subresource)
    before = _without_managed_fields(old) if old is not None else _zero_object(new, api_version)
    added, modified, removed = _compare(before, _without_managed_fields(new))
    changed = _strip(added | modified)
    for entry in entries.values():
        entry.fields -= changed | removed
    if changed:
        updater = _Entry(manager, "Update", api_version, subresource, now, changed)
        previous = entries.get(updater.key())
        if previous is not None:
            updater.fields |= previous.fields
        entries[updater.key()] = updater
    return _with_entries(new, entries)


# --- which entries a write starts from ----------------------------------------------------


def _entries_for_update(old: Obj | None, new: Obj, subresource: str | None) -> dict[Any, _Entry]:
    """The real server lets a main-resource write replace managedFields: a non-empty list is
    taken as sent, `[]` or `[{}]` clears them, and leaving them out keeps the live ones."""
    kept = _decode_entries(old) if old is not None else {}
    if subresource:
        return kept
    sent = new.get("metadata", {}).get("managedFields")
    if sent == [] or sent == [{}]:
        return {}
    if not sent:
        return kept
    try:
        return _decode_entries(new)
    except ValueError:
        return kept


def _decode_entries(obj: Obj) -> dict[Any, _Entry]:
    entries: dict[Any, _Entry] = {}
    for raw in obj.get("metadata", {}).get("managedFields") or []:
        if not isinstance(raw, dict) or raw.get("operation") not in ("Apply", "Update"):
            raise ValueError(f"invalid managedFields entry: {raw!r}")
        fields = raw.get("fieldsV1") or {}
        if not isinstance(fields, dict):
            raise ValueError(f"invalid fieldsV1: {fields!r}")
        entry = _Entry(
            str(raw.get("manager", "")),
            raw["operation"],
            str(raw.get("apiVersion", "")),
            raw.get("subresource") or None,
            raw.get("time"),
            set(_decoded(fields)),
        )
        known = entries.setdefault(entry.key(), entry)
        known.fields |= entry.fields
    return entries


def _with_entries(obj: Obj, entries: dict[Any, _Entry]) -> Obj:
    """`obj` carrying the non-empty entries in the real server's order; it shares all but its
    top level and metadata with `obj`, which callers build afresh for each write."""
    kept = [entry for entry in entries.values() if entry.fields]
    kept.sort(
        key=lambda e: (e.operation, e.time or "", e.manager, e.api_version, e.subresource or "")
    )
    metadata = dict(obj.get("metadata") or {})
    if kept:
        metadata["managedFields"] = [entry.encoded() for entry in kept]
    else:
        metadata.pop("managedFields", None)
    return {**obj, "metadata": metadata}


# --- fieldsV1 -------------------------------------------------------------------------------

_MEMO_SIZE = 4096  # distinct field sets remembered: a few per kind and manager in a test bed


def _decoded(fields: Obj) -> frozenset[Path]:
    """The paths a fieldsV1 trie owns, remembered by the trie's marshalled form (equal bytes
    are an equal trie; an equal trie marshalled otherwise only misses the memo)."""
    try:
        key = marshal.dumps(fields, 2)  # version 2: no back-references, so no refcount in it
    except ValueError:  # not plain data
        return frozenset(_decode_fields(fields, ()))
    return _decoded_memo(key)


@functools.lru_cache(maxsize=_MEMO_SIZE)
def _decoded_memo(key: bytes) -> frozenset[Path]:
    return frozenset(_decode_fields(marshal.loads(key), ()))


@functools.lru_cache(maxsize=_MEMO_SIZE)
def _encoded(paths: frozenset[Path]) -> bytes:
    """The fieldsV1 trie of a field set, marshalled: each use loads its own copy."""
    return marshal.dumps(_encode_fields(paths))


def _decode_fields(fields: Obj, prefix: Path) -> set[Path]:
    paths: set[Path] = set()
    for key, child in fields.items():
        if key == "." or not key.startswith("f:"):
            paths.add(prefix)
        elif isinstance(child, dict) and child:
            paths |= _decode_fields(child, (*prefix, key[2:]))
        else:
            paths.add((*prefix, key[2:]))
    paths.discard(())
    return paths


def _encode_fields(paths: Iterable[Path]) -> Obj:
    """The FieldsV1 trie: "f:<name>" per map key, "." when a node with children is itself owned."""
    children: dict[str, list[Path]] = {}
    owned = False
    for path in paths:
        if path:
            children.setdefault(path[0], []).append(path[1:])
        else:
            owned = True
    encoded: Obj = {".": {}} if owned and children else {}
    for name in sorted(children):
        encoded[f"f:{name}"] = _encode_fields(children[name])
    return encoded


# --- field sets and comparison ------------------------------------------------------------


def _leaf_paths(obj: Obj, prefix: Path = ()) -> set[Path]:
    """What an applied object claims: every scalar, list, null and empty map, not the maps
    that merely hold them (structured-merge-diff's ToFieldSet for struct fields)."""
    paths: set[Path] = set()
    for key, value in obj.items():
        path = (*prefix, key)
        if isinstance(value, dict) and value:
            paths |= _leaf_paths(value, path)
        else:
            paths.add(path)
    return paths


def _all_paths(value: Any, path: Path) -> set[Path]:
    """A node and everything below it: what appears or disappears with it."""
    paths = {path}
    if isinstance(value, dict):
        for key, child in value.items():
            paths |= _all_paths(child, (*path, key))
    return paths


def _compare(old: Obj, new: Obj) -> tuple[set[Path], set[Path], set[Path]]:
    """(added, modified, removed) paths from `old` to `new`; a map present on only one side is
    added or removed together with its contents, two maps are compared key by key."""
    added: set[Path] = set()
    modified: set[Path] = set()
    removed: set[Path] = set()
    pending: list[tuple[Obj, Obj, Path]] = [(old, new, ())]
    while pending:
        left, right, prefix = pending.pop()
        for key in left.keys() | right.keys():
            path = (*prefix, key)
            if key not in right:
                removed |= _all_paths(left[key], path)
            elif key not in left:
                added |= _all_paths(right[key], path)
            elif isinstance(left[key], dict) and isinstance(right[key], dict):
                pending.append((left[key], right[key], path))
            elif left[key] != right[key] or type(left[key]) is not type(right[key]):
                modified.add(path)
    return added, modified, removed


def _strip(paths: set[Path]) -> set[Path]:
    return paths - _STRIPPED


# --- apply ----------------------------------------------------------------------------------


def _check_applied(applied: Any) -> None:
    if not isinstance(applied, dict):
        raise PatchError("the applied configuration must be an object")
    if not applied.get("apiVersion") or not applied.get("kind"):
        raise PatchError("Object 'Kind' and 'apiVersion' are missing in the applied configuration")
    metadata = applied.get("metadata")
    if not isinstance(metadata, dict) or not metadata.get("name"):
        raise PatchError("metadata.name: Required value: name is required")
    if metadata.get("managedFields"):
        raise PatchError("metadata.managedFields must be nil")


def _merge_applied(live: Obj, config: Obj) -> Obj:
    """Maps merge key by key, anything else is replaced; an applied null removes the key."""
    for key, value in config.items():
        if value is None:
            live.pop(key, None)
        elif isinstance(value, dict) and isinstance(live.get(key), dict):
            live[key] = _merge_applied(live[key], value)
        else:
            live[key] = clone(value)
    return live


def _prune(merged: Obj, last: set[Path], owned: set[Path]) -> None:
    """Remove what the applier applied last time and nobody owns now (nor anything below it).

    Maps left empty by a removal go too, unless someone owns them as such.
    """
    for path in sorted(last - owned, key=len, reverse=True):
        if any(other[: len(path)] == path for other in owned):
            continue
        parents = [merged]
        for name in path[:-1]:
            child = parents[-1].get(name)
            if not isinstance(child, dict):
                break
            parents.append(child)
        else:
            parents[-1].pop(path[-1], None)
            for depth in range(len(parents) - 1, 0, -1):
                if parents[depth] or path[:depth] in owned:
                    break
                del parents[depth - 1][path[depth - 1]]


def _without_managed_fields(obj: Obj) -> Obj:
    """`obj` without its entries, to be read or given a new metadata: it shares everything but
    its top level and its metadata with `obj`, which a copy of the whole would only slow."""
    metadata = dict(obj.get("metadata") or {})
    metadata.pop("managedFields", None)
    return {**obj, "metadata": metadata}


def _zero_object(new: Obj, api_version: str) -> Obj:
    group = api_version.split("/")[0] if "/" in api_version else ""
    zero = clone(_ZERO_OBJECTS.get((group, str(new.get("kind"))), {}))
    zero["metadata"] = {}
    return zero
