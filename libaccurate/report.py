"""Report rows: one per namespace of the trees, with the billing labels each carries and where
each value came from.

Billing metadata is ordinary inherited labels (the controller's ``labelKeys``): set on a root,
a value flows down to every sub-namespace, and a sub-namespace may have its own (when a key is
in ``subNamespaceLabelKeys``). A value's source is the highest namespace up the chain of
sources (parent, else template) that carries the same value without a break.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from libaccurate.forest import Forest
from libaccurate.globs import match_any

TYPE_ROOT_ROW = "root"
TYPE_SUB_ROW = "sub-namespace"
# The columns every row has, in order, before the billing keys.
COLUMNS = ("namespace", "root", "parent", "depth", "type", "created")


@dataclass(frozen=True)
class Value:
    """One billing label of a namespace: its value and the namespace it came from."""

    value: str
    source: str


@dataclass(frozen=True)
class Row:
    namespace: str
    root: str
    parent: str
    depth: int
    type: str
    created: str
    billing: Mapping[str, Value]

    def to_data(self) -> dict[str, Any]:
        """The row as JSON: billing values nested, each with its source."""
        fixed = {column: getattr(self, column) for column in COLUMNS}
        billing = {k: {"value": v.value, "from": v.source} for k, v in self.billing.items()}
        return {**fixed, "billing": billing}

    def flat(self, keys: Sequence[str]) -> list[str]:
        """The row as text cells: the fixed columns, then each key's value and its source."""
        cells = [str(getattr(self, column)) for column in COLUMNS]
        for key in keys:
            found = self.billing.get(key)
            cells += [found.value, found.source] if found else ["", ""]
        return cells


def flat_header(keys: Sequence[str]) -> list[str]:
    return [*COLUMNS, *(part for key in keys for part in (key, f"{key} from"))]


def billing_keys(patterns: Iterable[str], namespaces: Iterable[Mapping[str, Any]]) -> list[str]:
    """The label keys present on the namespaces that match the billing globs, sorted."""
    wanted = tuple(patterns)
    return sorted(
        {
            key
            for namespace in namespaces
            for key in (namespace.get("metadata") or {}).get("labels") or {}
            if match_any(wanted, key)
        }
    )


def rows(
    namespaces: Sequence[Mapping[str, Any]], keys: Sequence[str], top: str | None = None
) -> list[Row]:
    """A row for each namespace in a tree (under ``top`` only, when given), roots first and
    each tree depth first."""
    forest = Forest.build(namespaces)
    by_name = {n["metadata"]["name"]: n for n in namespaces}
    tops = (top,) if top is not None else forest.roots()
    return [
        _row(name, forest, by_name, keys)
        for root in tops
        for name in forest.subtree(root)
        if name in by_name
    ]


def _row(
    name: str, forest: Forest, by_name: Mapping[str, Mapping[str, Any]], keys: Sequence[str]
) -> Row:
    ancestors = forest.ancestors(name)
    meta = by_name[name]["metadata"]
    labels = meta.get("labels") or {}
    billing = {
        key: Value(labels[key], _source(name, key, labels[key], forest, by_name))
        for key in keys
        if key in labels
    }
    return Row(
        namespace=name,
        root=forest.root_of(name) or (ancestors or (name,))[-1],
        parent=ancestors[0] if ancestors else "",
        depth=len(ancestors),
        type=TYPE_SUB_ROW if ancestors else TYPE_ROOT_ROW,
        created=str(meta.get("creationTimestamp") or ""),
        billing=billing,
    )


def _source(
    name: str, key: str, value: str, forest: Forest, by_name: Mapping[str, Mapping[str, Any]]
) -> str:
    """Up the chain of sources while each carries the same value; the last one that does."""
    found, seen = name, {name}
    node = forest.get(name)
    while node is not None and node.source is not None and node.source not in seen:
        source = by_name.get(node.source)
        labels = ((source or {}).get("metadata") or {}).get("labels") or {}
        if labels.get(key) != value:
            break
        found = node.source
        seen.add(found)
        node = forest.get(found)
    return found
