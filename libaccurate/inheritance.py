"""Namespace metadata inheritance: the labels and annotations the controller keeps on namespaces.

The desired set is computed top-down on the state the cluster will have after this pass, so a
grandchild gets what its parent is about to get, not what it has now (DESIGN.md 4.2). What the
controller may remove is read from the server's ownership records: only keys it applied
itself, so a label set by hand is never taken away. Keys a Go Accurate older than v1.4 wrote
by update are first taken over from its entries (ownership.py), as that Go release would have.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from libaccurate import ownership
from libaccurate.cloning import annotations_of, labels_of
from libaccurate.config import Config
from libaccurate.constants import (
    CREATED_BY_VALUE,
    LABEL_CREATED_BY,
    LABEL_PARENT,
    RESERVED_PREFIX,
)
from libaccurate.forest import Forest
from libaccurate.globs import match_any
from libaccurate.ownership import OwnedKeys, applied_by_controller, updated_by_go_controller
from libaccurate.treelabels import owned_tree_labels, tree_labels, without_tree_labels

# Labels every sub-namespace carries that the controller never needs to take away: while a
# namespace is a sub-namespace they are wanted, and when it stops being one its labels stay
# (DESIGN.md 4.2). Owning them only matters for a removal, so ownership alone is no reason to
# write: a cluster taken over from a Go Accurate that set them by update, not by apply, would
# otherwise cost one apply per sub-namespace that changes nothing anybody sees (issue 19).
_KEPT_LABELS: frozenset[str] = frozenset({LABEL_PARENT, LABEL_CREATED_BY})


@dataclass(frozen=True)
class Metadata:
    """Labels and annotations of a namespace, or the controller's part of them.

    ``takeover`` names the keys to move from the Go controller's old update entries into the
    controller's apply entry before applying (ownership.py), so that the apply can remove
    them; None when there is nothing to move.
    """

    labels: Mapping[str, str]
    annotations: Mapping[str, str]
    takeover: OwnedKeys | None = None


def owned_keys(namespace: Mapping[str, Any]) -> OwnedKeys:
    """Keys recorded in ``managedFields`` for the controller's Apply operations.

    Only Apply entries count: the server removes omitted keys for those alone, and the Go
    Accurate records its keys the same way since v1.3, so a takeover keeps working.
    """
    entries = (namespace.get("metadata") or {}).get("managedFields") or ()
    return ownership.owned_keys(entries, applied_by_controller)


def _owned_after_takeover(namespace: Mapping[str, Any], desired: Metadata) -> OwnedKeys:
    """What the controller will own once ``desired``'s takeover is made."""
    return owned_keys(namespace) | (desired.takeover or OwnedKeys())


def _takeover(
    namespace: Mapping[str, Any], current: Metadata, config: Config, sub_namespace: bool
) -> OwnedKeys | None:
    """The keys the controller keeps for ``namespace`` (those its patterns match) that the Go
    controller's update entries still own: from a Go Accurate older than v1.4, which wrote
    them by update and never moved them to its apply entry. ``_KEPT_LABELS`` stay with them,
    as their removal is never needed."""
    entries = (namespace.get("metadata") or {}).get("managedFields") or ()
    held = ownership.owned_keys(entries, updated_by_go_controller)
    if not held:
        return None
    label_keys, annotation_keys = config.label_keys, config.annotation_keys
    if sub_namespace:
        label_keys += config.sub_namespace_label_keys
        annotation_keys += config.sub_namespace_annotation_keys
    suffix = config.tree_label_suffix
    kept = OwnedKeys(
        frozenset(_pick(current.labels, label_keys, suffix)) - _KEPT_LABELS,
        frozenset(_pick(current.annotations, annotation_keys, suffix)),
    )
    return (held & kept) or None


def _pick(
    values: Mapping[str, str], patterns: tuple[str, ...], suffix: str | None
) -> dict[str, str]:
    """Entries whose key matches a pattern; reserved keys and tree labels never flow (a
    ``*/*`` would match them)."""
    return {
        key: value
        for key, value in without_tree_labels(values, suffix).items()
        if not key.startswith(RESERVED_PREFIX) and match_any(patterns, key)
    }


def _after(current: Mapping[str, str], owned: frozenset[str], desired: Mapping[str, str]) -> dict:
    """What a map will hold after applying ``desired``: owned keys left out are removed."""
    kept = {key: value for key, value in current.items() if key in desired or key not in owned}
    kept.update(desired)
    return kept


def desired_metadata(
    forest: Forest,
    namespaces: Mapping[str, Mapping[str, Any]],
    subnamespaces: Mapping[tuple[str, str], Mapping[str, Any]],
    config: Config,
    within: frozenset[str] | None = None,
) -> dict[str, Metadata]:
    """The controller's labels and annotations for every namespace that inherits any
    (``within`` these, closed upward, when given).

    ``forest`` describes the namespaces as they will be after this pass (new sub-namespaces
    included, namespaces about to be deleted marked terminating); ``namespaces`` holds the
    current objects by name (a namespace still to be created has none); ``subnamespaces`` is
    keyed by (namespace, name). Namespaces without a sound source, and terminating ones, get
    no entry: the controller leaves their metadata alone.

    ``parent`` and ``created-by`` are part of every sub-namespace's set, also of a namespace
    grafted by hand without a SubNamespace. The Go Accurate applies both on every
    sub-namespace with the same field manager, so it owns them on a cluster we take over;
    leaving ``created-by`` out would make the first pass after a takeover remove it from
    every grafted namespace, a change to user-visible labels that nobody asked for.

    With tree labels on, every namespace of a tree gets its tree labels in the same set, and
    a namespace without a source gets an entry too when it has tree labels to gain or lose,
    also ones the controller wrote under an earlier suffix or before tree labels were turned
    off: its other controller-owned keys are kept at their values, as for any namespace that
    stopped inheriting (DESIGN.md 4.2). A namespace with a source loses such labels anyway,
    as they are not in its set.
    """
    suffix = config.tree_label_suffix
    desired: dict[str, Metadata] = {}
    after: dict[str, Metadata] = {}
    for name in forest.top_down(within):
        node = forest.nodes[name]
        current = namespaces.get(name) or {}
        current_meta = Metadata(labels_of(current), annotations_of(current))
        source = node.source
        after[name] = current_meta
        if node.terminating:
            continue
        owned = owned_keys(current)
        tree = tree_labels(forest, node, suffix).labels
        if source is None:
            owned_tree = owned_tree_labels(name, current_meta.labels, owned.labels, suffix)
            if tree or owned_tree:
                desired[name] = _kept_with(current_meta, owned, tree, owned_tree)
                after[name] = _after_apply(current_meta, owned, desired[name])
            continue
        takeover = _takeover(current, current_meta, config, node.parent is not None)
        owned |= takeover or OwnedKeys()
        upper = after[source]
        labels = _pick(upper.labels, config.label_keys, suffix)
        annotations = _pick(upper.annotations, config.annotation_keys, suffix)
        if node.parent is not None:
            spec = (subnamespaces.get((source, name)) or {}).get("spec") or {}
            labels.update(_pick(spec.get("labels") or {}, config.sub_namespace_label_keys, suffix))
            annotations.update(
                _pick(spec.get("annotations") or {}, config.sub_namespace_annotation_keys, suffix)
            )
            labels[LABEL_PARENT] = source
            labels[LABEL_CREATED_BY] = CREATED_BY_VALUE
        else:
            labels.update(_still_kept(current_meta.labels, owned.labels))
        labels.update(tree)
        desired[name] = Metadata(labels, annotations, takeover)
        after[name] = _after_apply(current_meta, owned, desired[name])
    return desired


def _still_kept(current: Mapping[str, str], owned: frozenset[str]) -> dict[str, str]:
    """The ``_KEPT_LABELS`` an instance holds from its time as a sub-namespace, whose
    controller-owned values its applies keep: left out, the server would remove them, and a
    former sub-namespace keeps its labels (DESIGN.md 4.2)."""
    return {key: current[key] for key in _KEPT_LABELS if key in owned and key in current}


def _after_apply(current: Metadata, owned: OwnedKeys, desired: Metadata) -> Metadata:
    """A namespace's metadata once ``desired`` is applied, as its children inherit it."""
    return Metadata(
        _after(current.labels, owned.labels, desired.labels),
        _after(current.annotations, owned.annotations, desired.annotations),
    )


def labels_after(namespace: Mapping[str, Any], desired: Metadata | None) -> dict[str, str]:
    """A namespace's labels once ``desired`` is applied (as they are, without an entry)."""
    current = labels_of(namespace)
    if desired is None:
        return dict(current)
    return _after(current, _owned_after_takeover(namespace, desired).labels, desired.labels)


def _kept_with(
    current: Metadata, owned: OwnedKeys, tree: Mapping[str, str], owned_tree: frozenset[str]
) -> Metadata:
    """The controller's keys of a namespace without a source as they are, tree labels as
    ``tree`` says: applying this changes tree labels only, and removes the ``owned_tree``
    labels (of this suffix or an earlier one) that ``tree`` does not hold."""
    labels = {
        key: value
        for key, value in current.labels.items()
        if key in owned.labels and key not in owned_tree
    }
    labels.update(tree)
    annotations = {k: v for k, v in current.annotations.items() if k in owned.annotations}
    return Metadata(labels, annotations)


def needs_write(namespace: Mapping[str, Any], desired: Metadata) -> bool:
    """Whether applying ``desired`` would change anything, so a settled cluster gets no write.

    A write is due when a desired value is missing or different, or when the controller owns
    a key it no longer wants (the apply removes it) or does not own one it wants (the apply
    takes it over, so that a later removal works), except ``_KEPT_LABELS``: no removal
    of theirs is ever needed, so they need not be owned; any later apply takes them over in
    passing. A takeover from the Go controller's update entries is due the first time the
    controller meets the namespace, whatever else is.
    """
    if desired.takeover:
        return True
    owned = owned_keys(namespace)
    return not (
        _settled(labels_of(namespace), owned.labels, desired.labels, _KEPT_LABELS)
        and _settled(annotations_of(namespace), owned.annotations, desired.annotations)
    )


def _settled(
    current: Mapping[str, str],
    owned: frozenset[str],
    desired: Mapping[str, str],
    unowned_ok: frozenset[str] = frozenset(),
) -> bool:
    """Whether an apply of ``desired`` would leave the map and its ownership as they are, as
    far as anybody relies on: values in place, no owned key to drop, no key left unowned that
    a later removal would need (``unowned_ok`` never does)."""
    wanted = set(desired)
    return wanted - unowned_ok <= owned <= wanted and all(
        current.get(k) == v for k, v in desired.items()
    )
