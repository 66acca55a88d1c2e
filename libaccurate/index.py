"""The planner's indexes of a cluster: what one namespace holds, found without looking at the
others.

A scoped plan (libaccurate.planner) must cost what its namespaces hold, not what the cluster
holds, and indexing a snapshot's lists costs the whole cluster every time. So whoever keeps a
picture of the cluster (the controller's cache, from watch events) keeps these indexes too, one
object at a time (``Indexes``), and hands the planner a copy with each snapshot (an ``Index``).
An inner mapping is replaced when it changes, never altered, so a copy of the outer mappings is
a picture that later changes leave alone. Even that copy is put off: an ``Index`` gets the outer
mappings themselves, and the first change to one after that copies it (copy on write). Copying
all of them for every pass cost a scoped pass at 2,000 namespaces more than its planning (0.6 to
1.5 ms of the 14 ms reaction of bench scenario 14, bench/RESULTS.md); now a pass costs nothing
here, and an event copies only what it changes, once until the next pass.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from libaccurate.config import GroupVersionKind

Object = Mapping[str, Any]
ByNamespace = Mapping[str, Mapping[str, Object]]
# The kinds an ``Indexes`` keeps: namespaces, SubNamespaces, or a watched kind.
NAMESPACES = "namespaces"
SUBNAMESPACES = "subnamespaces"
Kind = str | GroupVersionKind


@dataclass(frozen=True)
class Index:
    """Namespaces by name; SubNamespaces by (namespace, name) and by the namespace they name,
    then the namespace they are in (``naming``); each watched kind's objects by namespace, then
    name."""

    namespaces: Mapping[str, Object]
    subnamespaces: Mapping[tuple[str, str], Object]
    naming: ByNamespace
    objects: Mapping[GroupVersionKind, ByNamespace]

    @classmethod
    def of(
        cls,
        namespaces: Iterable[Object],
        subnamespaces: Iterable[Object],
        objects: Mapping[GroupVersionKind, Iterable[Object]],
    ) -> Index:
        """The index of a snapshot's lists."""
        kept = Indexes()
        kept.reset(NAMESPACES, namespaces)
        kept.reset(SUBNAMESPACES, subnamespaces)
        for gvk, items in objects.items():
            kept.reset(gvk, items)
        return kept.index()


def _key(obj: Object) -> tuple[str, str]:
    metadata = obj.get("metadata") or {}
    return (metadata.get("namespace") or "", metadata.get("name") or "")


class Indexes:
    """The indexes of a changing cluster, kept current one object at a time."""

    def __init__(self) -> None:
        self._namespaces: dict[str, Object] = {}
        self._subnamespaces: dict[tuple[str, str], Object] = {}
        self._naming: dict[str, Mapping[str, Object]] = {}
        self._objects: dict[GroupVersionKind, dict[str, Mapping[str, Object]]] = {}
        # The kinds whose mappings an Index holds: copied before their next change.
        self._lent: set[Kind] = set()

    def index(self) -> Index:
        """A picture that later changes leave alone."""
        self._lent = {NAMESPACES, SUBNAMESPACES, *self._objects}
        return Index(self._namespaces, self._subnamespaces, self._naming, dict(self._objects))

    def _writable(self, kind: Kind) -> None:
        """Copy the mappings of ``kind`` if an Index holds them, before they change."""
        if kind not in self._lent:
            return
        self._lent.discard(kind)
        if kind == NAMESPACES:
            self._namespaces = dict(self._namespaces)
        elif kind == SUBNAMESPACES:
            self._subnamespaces = dict(self._subnamespaces)
            self._naming = dict(self._naming)
        elif isinstance(kind, GroupVersionKind):
            self._objects[kind] = dict(self._objects[kind])

    def reset(self, kind: Kind, objects: Iterable[Object]) -> None:
        """Every object of ``kind``, as a fresh list has them."""
        self._lent.discard(kind)  # fresh mappings replace the ones lent
        if kind == NAMESPACES:
            self._namespaces = {_key(obj)[1]: obj for obj in objects}
        elif kind == SUBNAMESPACES:
            self._subnamespaces = {_key(obj): obj for obj in objects}
            subs = self._subnamespaces.items()
            self._naming = _grouped((name, parent, obj) for (parent, name), obj in subs)
        elif isinstance(kind, GroupVersionKind):
            self._objects[kind] = _grouped((*_key(obj), obj) for obj in objects)

    def put(self, kind: Kind, obj: Object) -> None:
        """``obj`` was added or changed."""
        self._writable(kind)
        namespace, name = _key(obj)
        if kind == NAMESPACES:
            self._namespaces[name] = obj
        elif kind == SUBNAMESPACES:
            self._subnamespaces[(namespace, name)] = obj
            _put(self._naming, name, namespace, obj)
        elif isinstance(kind, GroupVersionKind):
            _put(self._objects.setdefault(kind, {}), namespace, name, obj)

    def forget(self, kind: Kind, namespace: str, name: str) -> None:
        """The object ``namespace``/``name`` of ``kind`` is gone."""
        self._writable(kind)
        if kind == NAMESPACES:
            self._namespaces.pop(name, None)
        elif kind == SUBNAMESPACES:
            self._subnamespaces.pop((namespace, name), None)
            _forget(self._naming, name, namespace)
        elif isinstance(kind, GroupVersionKind):
            _forget(self._objects.setdefault(kind, {}), namespace, name)


def _grouped(entries: Iterable[tuple[str, str, Object]]) -> dict[str, Mapping[str, Object]]:
    grouped: dict[str, dict[str, Object]] = {}
    for outer, inner, obj in entries:
        grouped.setdefault(outer, {})[inner] = obj
    found: dict[str, Mapping[str, Object]] = dict(grouped)
    return found


def _put(index: dict[str, Mapping[str, Object]], outer: str, inner: str, obj: Object) -> None:
    index[outer] = {**index.get(outer, {}), inner: obj}


def _forget(index: dict[str, Mapping[str, Object]], outer: str, inner: str) -> None:
    found = index.get(outer)
    if found is None or inner not in found:
        return
    rest = {key: value for key, value in found.items() if key != inner}
    if rest:
        index[outer] = rest
    else:
        del index[outer]
