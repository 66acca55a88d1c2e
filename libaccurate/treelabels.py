"""Tree labels: ``<ancestor>.<suffix>/depth`` on every namespace of a tree (issue 14, item 1).

They let a NetworkPolicy or any namespaceSelector pick a whole subtree with one label, the way
HNC's ``tree.hnc.x-k8s.io/depth`` labels do. The labels follow parent links only (templates are
not trees) and exist only in trees, that is below a root. A key the API server would refuse
(an ancestor name so long that ``<ancestor>.<suffix>`` exceeds a DNS subdomain) is never
written, nor shortened into something that could clash: it is reported on the namespace.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from libaccurate.forest import Forest, Node
from libaccurate.validation import validate_qualified_name

LABEL_NAME = "depth"


@dataclass(frozen=True)
class TreeLabels:
    """A namespace's tree labels, and the keys that are too long to be labels, with why."""

    labels: Mapping[str, str]
    too_long: Mapping[str, str]

    @property
    def problems(self) -> tuple[str, ...]:
        """One line per key that could not be written, for logs and ``ns describe``."""
        return tuple(
            f"tree label {key} is not a valid label key, so it is not set: {reason}"
            for key, reason in sorted(self.too_long.items())
        )


NO_TREE_LABELS = TreeLabels({}, {})


def tree_label_key(ancestor: str, suffix: str) -> str:
    """The label that says how far below ``ancestor`` a namespace is."""
    return f"{ancestor}.{suffix}/{LABEL_NAME}"


def is_tree_label(key: str, suffix: str) -> bool:
    """Whether ``key`` is a tree label for ``suffix`` (of any ancestor)."""
    return key.endswith(f".{suffix}/{LABEL_NAME}")


def tree_labels_from(lineage: tuple[str, ...], suffix: str) -> TreeLabels:
    """The tree labels of the first namespace of ``lineage`` (itself, parent, ... root)."""
    labels: dict[str, str] = {}
    too_long: dict[str, str] = {}
    for distance, ancestor in enumerate(lineage):
        key = tree_label_key(ancestor, suffix)
        errors = validate_qualified_name(key, "metadata.labels")
        if errors:
            too_long[key] = "; ".join(str(error) for error in errors)
        else:
            labels[key] = str(distance)
    return TreeLabels(labels, too_long)


def lineage(forest: Forest, node: Node) -> tuple[str, ...] | None:
    """``node`` and its ancestors up to the root, or None when ``node`` is in no tree.

    ``node`` need not be the forest's own: admission asks about a namespace as a request would
    leave it. A chain that loops or stops at a missing or non-root namespace is no tree.
    """
    parent = node.parent
    if parent is None:
        return (node.name,) if node.is_root else None
    above = forest.ancestors(parent)
    if node.name in (parent, *above) or forest.root_of(parent) is None:
        return None
    return (node.name, parent, *above)


def tree_labels(forest: Forest, node: Node, suffix: str | None) -> TreeLabels:
    """What the controller keeps on ``node``'s namespace; none outside trees or when off."""
    chain = None if suffix is None else lineage(forest, node)
    return NO_TREE_LABELS if chain is None or suffix is None else tree_labels_from(chain, suffix)


def tree_label_suffix(name: str, labels: Mapping[str, str]) -> str | None:
    """The suffix a namespace's own tree label (``<name>.<suffix>/depth: "0"``) shows, so that
    the plugin can read tree labels without the controller's config; None without one."""
    return next(iter(_shown_suffixes(name, labels)), None)


def _shown_suffixes(name: str, labels: Mapping[str, str]) -> list[str]:
    """Every suffix of which the namespace carries its own tree label, in label order."""
    shown = []
    for key, value in labels.items():
        prefix, _, label = key.rpartition("/")
        if value == "0" and label == LABEL_NAME and prefix.startswith(f"{name}."):
            shown.append(prefix[len(name) + 1 :])
    return shown


def owned_tree_labels(
    name: str, labels: Mapping[str, str], owned: frozenset[str], suffix: str | None
) -> frozenset[str]:
    """The tree labels among the keys the controller owns on a namespace: of ``suffix``, and of
    any earlier suffix, or of tree labels since turned off, that the namespace's own tree label
    shows. These are the ones the controller takes away when it no longer wants them; a key it
    does not own, or that only looks like a tree label, is never touched."""
    suffixes = {*_shown_suffixes(name, labels), *([] if suffix is None else [suffix])}
    return frozenset(key for key in owned if any(is_tree_label(key, s) for s in suffixes))


def without_tree_labels(labels: Mapping[str, str], suffix: str | None) -> dict[str, str]:
    """``labels`` less any tree label: they are the controller's alone and never inherited."""
    if suffix is None:
        return dict(labels)
    return {key: value for key, value in labels.items() if not is_tree_label(key, suffix)}
