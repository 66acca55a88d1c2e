"""Moving from HNC: what the Hierarchical Namespace Controller left in a cluster, as Accurate.

HNC keeps its trees in ``HierarchyConfiguration`` objects and ``SubnamespaceAnchor`` objects and
copies every object of its propagated kinds down the tree, marking copies with a label. Accurate
keeps trees in namespace labels and copies only objects that opt in. This module reads a snapshot
of HNC's objects and says which writes make Accurate hold the same trees and keep the same copies
current, which controller config that needs, and what cannot be carried over, with the reason.

Managed labels and annotations keep HNC's precedence (an ancestor's value wins over a
namespace's own), and HNC's field manager gives up the namespace keys Accurate keeps, so that
the controller's server-side applies can remove them.

HNC's HierarchicalResourceQuotas become Accurate's (the same spec under Accurate's apiVersion).
The one thing the import deletes is what HNC made for them: the ResourceQuota (label
``hnc.x-k8s.io/hrq``) in each namespace under an HRQ, and only once the ResourceQuotas Accurate's
controller keeps there are counted, so that no namespace is ever without a limit.

Otherwise the writes never delete anything and never re-create a copy: HNC's copies are marked with
Accurate's ``from`` annotation (and nothing else), so Accurate's controller adopts them and
replaces them in place in update mode. A copy marked that way but never adopted is left alone by
Accurate (only copies in update mode are ever deleted), so an import that stops half way is safe.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from libaccurate.cloning import annotations_of, copied_from, labels_of, propagate_mode
from libaccurate.config import Config, GroupVersionKind, TreeLabelSettings, config_to_dict
from libaccurate.constants import (
    ANNOTATION_FROM,
    ANNOTATION_PROPAGATE,
    ANNOTATION_PROPAGATE_NONE,
    ANNOTATION_PROPAGATE_SELECT,
    ANNOTATION_PROPAGATE_TREE_SELECT,
    LABEL_PARENT,
    LABEL_TEMPLATE,
    LABEL_TYPE,
    PROPAGATE_UPDATE,
    RESERVED_PREFIX,
    TYPE_ROOT,
    TYPE_TEMPLATE,
)
from libaccurate.ownership import OwnedKeys, owned_keys, released, written_by
from libaccurate.quota import API_VERSION as QUOTA_API_VERSION
from libaccurate.quota import KIND as QUOTA_KIND
from libaccurate.quota import QuotaError, hrq_of_quota, read_hrq
from libaccurate.selection import selection_of

Obj = Mapping[str, Any]

HNC_GROUP = "hnc.x-k8s.io"
HNC_VERSION = "v1alpha2"
HIERARCHY_NAME = "hierarchy"
HNC_CONFIG_NAME = "config"
LABEL_INHERITED_FROM = "hnc.x-k8s.io/inherited-from"
ANNOTATION_SUBNAMESPACE_OF = "hnc.x-k8s.io/subnamespace-of"
HNC_TREE_SUFFIX = "tree.hnc.x-k8s.io"
TREE_LABEL_SUFFIX = f".{HNC_TREE_SUFFIX}/depth"
EXCEPTION_SELECT = "propagate.hnc.x-k8s.io/select"
EXCEPTION_TREE_SELECT = "propagate.hnc.x-k8s.io/treeSelect"
EXCEPTION_NONE = "propagate.hnc.x-k8s.io/none"
EXCEPTION_ALL = "propagate.hnc.x-k8s.io/all"
WEBHOOK_SUFFIX = ".hnc.x-k8s.io"
# HNC's controller writes namespaces by update; controller-runtime names the field manager after
# its binary, /manager.
HNC_FIELD_MANAGERS = frozenset({"manager"})

# The ResourceQuota HNC keeps in each namespace under an HRQ (its ResourceQuotaSingleton), and
# the label it puts on it so that it can be found and cleaned up (api.HRQLabelCleanup).
HNC_QUOTA_NAME = "hrq.hnc.x-k8s.io"
HNC_QUOTA_LABEL = "hnc.x-k8s.io/hrq"

MODE_PROPAGATE = "Propagate"
MODE_ALLOW_PROPAGATE = "AllowPropagate"
RBAC_GROUP = "rbac.authorization.k8s.io"
# HNC always propagates these, whatever its config says (its "enforced types").
ENFORCED_RESOURCES = ((RBAC_GROUP, "roles"), (RBAC_GROUP, "rolebindings"))

# HNC's exceptions and Accurate's with the same meaning (HNC's treeSelect names one subtree at
# most, which Accurate's tree-select reads alike).
EXCEPTIONS = {
    EXCEPTION_SELECT: ANNOTATION_PROPAGATE_SELECT,
    EXCEPTION_TREE_SELECT: ANNOTATION_PROPAGATE_TREE_SELECT,
    EXCEPTION_NONE: ANNOTATION_PROPAGATE_NONE,
}
# The strings Go's strconv.ParseBool reads, which is how HNC reads its none annotation.
GO_TRUE = frozenset({"1", "t", "T", "TRUE", "true", "True"})
GO_FALSE = frozenset({"0", "f", "F", "FALSE", "false", "False"})


@dataclass(frozen=True)
class PropagatedKind:
    """A kind HNC copies down its trees, as the API server serves it."""

    gvk: GroupVersionKind
    plural: str
    mode: str


@dataclass(frozen=True)
class NotCarried:
    """Something HNC did that the import does not carry over, and why."""

    what: str
    reason: str


@dataclass(frozen=True)
class Kinds:
    """The kinds to carry over, and the configured ones that cannot be."""

    propagated: tuple[PropagatedKind, ...]
    not_carried: tuple[NotCarried, ...]


@dataclass(frozen=True)
class HncSnapshot:
    """What the import reads: HNC's objects, Accurate's SubNamespaces, and every object of
    the propagated kinds (by kind)."""

    namespaces: Sequence[Obj]
    hierarchies: Sequence[Obj]
    anchors: Sequence[Obj]
    quotas: Sequence[Obj] = ()
    subnamespaces: Sequence[Obj] = ()
    objects: Mapping[PropagatedKind, Sequence[Obj]] = field(default_factory=dict)
    # Accurate's HRQs, None when the cluster does not serve them; the ResourceQuotas HNC made
    # for its HRQs and those Accurate's controller keeps for its own.
    accurate_quotas: Sequence[Obj] | None = None
    resource_quotas: Sequence[Obj] = ()


@dataclass(frozen=True)
class MarkObject:
    """A merge patch of annotations on one object of a propagated kind."""

    kind: PropagatedKind
    obj: Obj = field(repr=False, compare=False)
    namespace: str
    name: str
    annotations: Mapping[str, str]

    def describe(self) -> str:
        pairs = ", ".join(f"{key}={value}" for key, value in self.annotations.items())
        return f"annotate {self.kind.gvk.kind} {self.namespace}/{self.name}: {pairs}"


@dataclass(frozen=True)
class NewSubNamespace:
    """A SubNamespace standing for one of HNC's anchors."""

    parent: str
    name: str
    labels: Mapping[str, str]
    annotations: Mapping[str, str]


@dataclass(frozen=True)
class CreateQuota:
    """One of HNC's HierarchicalResourceQuotas as Accurate's: same namespace, name and spec."""

    namespace: str
    name: str
    spec: Mapping[str, Any]

    def body(self) -> dict[str, Any]:
        return {
            "apiVersion": QUOTA_API_VERSION,
            "kind": QUOTA_KIND,
            "metadata": {"namespace": self.namespace, "name": self.name},
            "spec": dict(self.spec),
        }

    def describe(self) -> str:
        hard = ", ".join(f"{k}={v}" for k, v in sorted((self.spec.get("hard") or {}).items()))
        return f"create HierarchicalResourceQuota {self.namespace}/{self.name} ({hard})"


@dataclass(frozen=True)
class DeleteHncQuota:
    """A ResourceQuota HNC made for its HRQs, once Accurate's ResourceQuotas count every
    resource it limits in its namespace: nothing updates it any more."""

    obj: Obj = field(repr=False, compare=False)
    namespace: str
    name: str

    def describe(self) -> str:
        return (
            f"delete ResourceQuota {self.namespace}/{self.name} (HNC's, for its HRQs: Accurate's "
            "hierarchical quotas count there now)"
        )


@dataclass(frozen=True)
class TakeOwnership:
    """Take the metadata keys Accurate keeps on a namespace away from HNC's field managers.

    Server-side apply removes a key the controller stops applying only when no other manager
    owns it, so a key HNC's controller wrote (and still co-owns) would never go: a stale tree
    label after a move, a managed annotation removed from an ancestor. Once HNC's ownership is
    gone, the controller's first apply of such a key makes it the key's only owner.
    """

    namespace: Obj = field(repr=False, compare=False)
    name: str
    labels: tuple[str, ...]
    annotations: tuple[str, ...]

    def managed_fields(self, current: Obj) -> list[dict[str, Any]]:
        """``current``'s managedFields with the keys taken from HNC's entries and nothing else
        changed; ``[{}]`` (which clears them) when no entry is left, as ``[]`` would keep them."""
        entries = []
        keys = OwnedKeys(frozenset(self.labels), frozenset(self.annotations))
        for entry in _metadata(current).get("managedFields") or ():
            if _hnc_entry(entry):
                entry = released(entry, keys)
            if entry.get("fieldsV1"):
                entries.append(entry)
        return entries or [{}]

    def describe(self) -> str:
        keys = [
            f"{noun if len(keys) == 1 else noun + 's'} {', '.join(keys)}"
            for noun, keys in (("label", self.labels), ("annotation", self.annotations))
            if keys
        ]
        return f"take over namespace {self.name}'s {' and '.join(keys)} from HNC's field manager"


@dataclass(frozen=True)
class Plan:
    """The import's writes, in the order they are safe to make, and what it cannot do.

    Copies are marked first (a marked copy is inert until its tree exists in Accurate), then
    sources opt in, then HNC's field managers lose the namespace keys Accurate keeps (before
    the namespaces join a tree, so that an Accurate controller already running writes none of
    them in between), then roots and parents are labelled top-down (so each parent is a root or
    sub-namespace before its children name it), then SubNamespaces, then Accurate's HRQs (over
    the trees as they will be), and HNC's ResourceQuotas go last, once Accurate's count.
    """

    copies: tuple[MarkObject, ...]
    sources: tuple[MarkObject, ...]
    roots: tuple[str, ...]
    parents: tuple[tuple[str, str], ...]
    subnamespaces: tuple[NewSubNamespace, ...]
    config: Config
    not_carried: tuple[NotCarried, ...]
    # Why the config holds what is not plain key lists and watches.
    config_notes: tuple[str, ...] = ()
    takeovers: tuple[TakeOwnership, ...] = ()
    quotas: tuple[CreateQuota, ...] = ()
    quota_removals: tuple[DeleteHncQuota, ...] = ()
    # Namespaces whose ResourceQuota from HNC stays until Accurate's count there.
    quotas_waiting: tuple[str, ...] = ()

    @property
    def empty(self) -> bool:
        return not (
            self.copies
            or self.sources
            or self.roots
            or self.parents
            or self.subnamespaces
            or self.takeovers
            or self.quotas
            or self.quota_removals
        )

    def config_document(self) -> dict[str, Any]:
        return config_to_dict(self.config)


def _metadata(obj: Obj) -> Mapping[str, Any]:
    return obj.get("metadata") or {}


def _name(obj: Obj) -> str:
    return str(_metadata(obj).get("name", ""))


def _namespace(obj: Obj) -> str:
    return str(_metadata(obj).get("namespace", ""))


def _spec(obj: Obj) -> Mapping[str, Any]:
    return obj.get("spec") or {}


def _deleting(obj: Obj) -> bool:
    return bool(_metadata(obj).get("deletionTimestamp"))


# Kinds


def propagated_kinds(hnc_config: Obj | None, resource_lists: Iterable[Obj]) -> Kinds:
    """The kinds HNC propagates (its config's ``Propagate`` and ``AllowPropagate`` resources and
    the Roles and RoleBindings it always propagates), found in the API server's discovery.

    ``Remove`` and ``Ignore`` kinds are not propagated, so Accurate need not watch them; nor are
    resources with a mode HNC does not know (it treats them as ``Ignore``).
    """
    served = _served(resource_lists)
    wanted = {resource: MODE_PROPAGATE for resource in ENFORCED_RESOURCES}
    for entry in _spec(hnc_config or {}).get("resources") or ():
        resource = (entry.get("group") or "", entry.get("resource") or "")
        if resource in ENFORCED_RESOURCES:
            continue
        mode = entry.get("mode") or MODE_PROPAGATE
        if mode in (MODE_PROPAGATE, MODE_ALLOW_PROPAGATE):
            wanted[resource] = mode
    propagated = []
    not_carried = []
    for (group, plural), mode in wanted.items():
        found = served.get((group, plural))
        if found is None:
            what = f"resource {plural}" + (f".{group}" if group else "")
            reason = "HNC's config propagates it, but the API server does not serve it"
            not_carried.append(NotCarried(what, reason))
            continue
        version, kind = found
        propagated.append(PropagatedKind(GroupVersionKind(group, version, kind), plural, mode))
    return Kinds(tuple(propagated), tuple(not_carried))


def _served(resource_lists: Iterable[Obj]) -> dict[tuple[str, str], tuple[str, str]]:
    """(group, plural) -> (version, kind) of namespaced resources, in the server's preferred
    version: discovery lists each group's preferred version first."""
    served: dict[tuple[str, str], tuple[str, str]] = {}
    for resource_list in resource_lists:
        group, _, version = str(resource_list.get("groupVersion", "")).rpartition("/")
        for resource in resource_list.get("resources") or ():
            name = resource.get("name", "")
            if "/" in name or not resource.get("namespaced", False):
                continue
            served.setdefault((group, name), (version, resource.get("kind", "")))
    return served


# The hierarchy


@dataclass
class _Tree:
    """HNC's tree as Accurate will hold it: which namespaces come along, and why not others."""

    namespaces: dict[str, Obj]
    parents: dict[str, str]
    anchors: dict[tuple[str, str], Obj]
    reasons: dict[str, str] = field(default_factory=dict)
    carried: dict[str, list[str]] = field(default_factory=dict)
    roots: list[str] = field(default_factory=list)
    _below: dict[str, list[str]] = field(default_factory=dict)

    def children(self, name: str) -> list[str]:
        return self.carried.get(name, [])

    def descendants(self, name: str) -> list[str]:
        """Each after its parent; remembered, as every source in a namespace asks again."""
        if name not in self._below:
            found: list[str] = []
            for child in self.children(name):
                found.append(child)
                found.extend(self.descendants(child))
            self._below[name] = found
        return self._below[name]

    def top_down(self) -> list[str]:
        order: list[str] = []
        for root in self.roots:
            order.append(root)
            order.extend(self.descendants(root))
        return order


def _build_tree(snapshot: HncSnapshot, not_carried: list[NotCarried]) -> _Tree:
    namespaces = {_name(ns): ns for ns in snapshot.namespaces}
    declared = {
        _namespace(hc): str(_spec(hc).get("parent") or "")
        for hc in snapshot.hierarchies
        if _name(hc) == HIERARCHY_NAME
    }
    anchors = {(_namespace(anchor), _name(anchor)): anchor for anchor in snapshot.anchors}
    tree = _Tree(namespaces, {}, anchors)
    for name, namespace in namespaces.items():
        from_hierarchy = declared.get(name) or None
        from_annotation = annotations_of(namespace).get(ANNOTATION_SUBNAMESPACE_OF) or None
        if from_hierarchy and from_annotation and from_hierarchy != from_annotation:
            tree.reasons[name] = (
                f"it has two parents in flight: its HierarchyConfiguration names "
                f"{from_hierarchy}, its {ANNOTATION_SUBNAMESPACE_OF} annotation {from_annotation}"
            )
        parent = from_hierarchy or from_annotation
        if parent:
            tree.parents[name] = parent
    for (parent, name), anchor in sorted(anchors.items()):
        # An anchor whose namespace HNC has not made yet: Accurate's controller will make it.
        if name not in namespaces and not _deleting(anchor):
            tree.parents.setdefault(name, parent)
    _judge(tree)
    for name in sorted(tree.reasons):
        not_carried.append(NotCarried(f"namespace {name}", tree.reasons[name]))
    return tree


def _judge(tree: _Tree) -> None:
    """Decide for every namespace of HNC's trees whether it comes along, top-down."""
    children: dict[str, list[str]] = {}
    for child, parent in sorted(tree.parents.items()):
        children.setdefault(parent, []).append(child)
    for name in sorted(children):
        if name in tree.parents:
            continue
        if name not in tree.namespaces:
            for child in children[name]:
                tree.reasons[child] = f"its parent {name} does not exist"
        elif (problem := _root_problem(tree.namespaces[name])) is not None:
            for child in children[name]:
                tree.reasons[child] = f"its parent {name} {problem}"
        else:
            tree.roots.append(name)
    pending = list(tree.roots)
    while pending:
        parent = pending.pop(0)
        for child in children.get(parent, []):
            if child in tree.reasons:
                continue
            problem = _child_problem(tree, child, parent)
            if problem is not None:
                tree.reasons[child] = problem
                continue
            tree.carried.setdefault(parent, []).append(child)
            pending.append(child)
    _report_unreached(tree)
    tree.roots = [root for root in tree.roots if tree.children(root)]


def _report_unreached(tree: _Tree) -> None:
    """Say why the namespaces the walk from the roots did not reach stay behind: an ancestor
    stays behind, or their parents form a cycle."""
    reached = {*tree.roots, *(c for kids in tree.carried.values() for c in kids)}
    for name in sorted(tree.parents):
        if name in reached or name in tree.reasons:
            continue
        chain = [name]
        while (parent := tree.parents.get(chain[-1])) is not None and parent not in chain:
            if parent in tree.reasons or parent not in tree.parents:
                break
            chain.append(parent)
        top = tree.parents.get(chain[-1])
        if top in chain:
            cycle = " -> ".join([*chain[chain.index(top) :], top])
            reason = f"its parents form a cycle: {cycle}"
        else:
            reason = f"its ancestor {top} is not carried over"
        for member in chain:
            tree.reasons.setdefault(member, reason)


def _root_problem(namespace: Obj) -> str | None:
    labels = labels_of(namespace)
    if _deleting(namespace):
        return "is being deleted"
    if labels.get(LABEL_TYPE) == TYPE_TEMPLATE and not labels.get(LABEL_PARENT):
        return "is an Accurate template, which cannot have sub-namespaces"
    return None


def _child_problem(tree: _Tree, name: str, parent: str) -> str | None:
    anchor = tree.anchors.get((parent, name))
    if anchor is not None and _deleting(anchor):
        return f"its anchor {parent}/{name} is being deleted, so HNC is deleting it"
    namespace = tree.namespaces.get(name)
    if namespace is None:
        return None
    labels = labels_of(namespace)
    if _deleting(namespace):
        return "it is being deleted"
    current = labels.get(LABEL_PARENT)
    if current and current != parent:
        return (
            f"it has two parents in flight: HNC says {parent}, its {LABEL_PARENT} label "
            f"says {current}"
        )
    if labels.get(LABEL_TYPE) or labels.get(LABEL_TEMPLATE):
        return (
            f"it is an Accurate root, template or instance, which a sub-namespace of {parent} "
            "cannot be"
        )
    return None


# Namespaces and SubNamespaces


def _namespace_writes(
    tree: _Tree, owns: _Owns, existing: Iterable[Obj], not_carried: list[NotCarried]
) -> tuple[list[str], list[tuple[str, str]], list[NewSubNamespace]]:
    have = {(_namespace(sub), _name(sub)) for sub in existing}
    roots = [
        root
        for root in tree.roots
        if not labels_of(tree.namespaces[root]).get(LABEL_PARENT)
        and labels_of(tree.namespaces[root]).get(LABEL_TYPE) != TYPE_ROOT
    ]
    parents: list[tuple[str, str]] = []
    subnamespaces: list[NewSubNamespace] = []
    used: set[tuple[str, str]] = set()
    for name in tree.top_down():
        parent = tree.parents.get(name)
        if parent is None:
            continue
        namespace = tree.namespaces.get(name)
        if namespace is not None and labels_of(namespace).get(LABEL_PARENT) != parent:
            parents.append((name, parent))
        subnamespace_of = annotations_of(namespace or {}).get(ANNOTATION_SUBNAMESPACE_OF)
        anchor = tree.anchors.get((parent, name))
        if namespace is not None and subnamespace_of != parent:
            continue
        if anchor is None:
            not_carried.append(_missing_anchor(parent, name))
            continue
        used.add((parent, name))
        if (parent, name) not in have:
            labels, annotations = owns.kept.get(name, ({}, {}))
            subnamespaces.append(NewSubNamespace(parent, name, labels, annotations))
            if namespace is None and (labels or annotations):
                not_carried.append(_pending_metadata(parent, name, labels, annotations))
    for parent, name in sorted(tree.anchors):
        if (parent, name) not in used and name not in tree.reasons:
            not_carried.append(
                NotCarried(
                    f"SubnamespaceAnchor {parent}/{name}",
                    f"namespace {name} is not its subnamespace (HNC reports it as Conflict), "
                    "so no SubNamespace is made for it",
                )
            )
    return roots, parents, subnamespaces


def _pending_metadata(
    parent: str, name: str, labels: Mapping[str, str], annotations: Mapping[str, str]
) -> NotCarried:
    return NotCarried(
        f"SubnamespaceAnchor {parent}/{name}",
        f"namespace {name} does not exist yet: Accurate's controller makes it with what it "
        f"inherits, without the anchor's {_metadata_text(labels, annotations)}, as no key is "
        "taken from a SubNamespace (see the managed keys)",
    )


def _metadata_text(labels: Mapping[str, str], annotations: Mapping[str, str]) -> str:
    """``label a=1``, ``labels a=1, b=2 and annotation c=3``."""
    parts = []
    for noun, values in (("label", labels), ("annotation", annotations)):
        if values:
            pairs = ", ".join(f"{key}={value}" for key, value in sorted(values.items()))
            parts.append(f"{noun if len(values) == 1 else noun + 's'} {pairs}")
    return " and ".join(parts)


def counted(count: int, noun: str) -> str:
    """``count`` and the noun, plural unless the count is one (the nouns here take an s)."""
    return f"{count} {noun if count == 1 else noun + 's'}"


def _missing_anchor(parent: str, name: str) -> NotCarried:
    return NotCarried(
        f"namespace {name}",
        f"it is HNC's subnamespace of {parent}, but its anchor is gone: it becomes a "
        f"sub-namespace of {parent} without a SubNamespace, so tenants cannot delete it "
        "through Accurate",
    )


def _pairs(items: object) -> dict[str, str]:
    """HNC's list of ``{key, value}`` as a map."""
    if not isinstance(items, list):
        return {}
    return {str(item.get("key", "")): str(item.get("value", "")) for item in items}


# Objects


def _is_hnc_copy(obj: Obj) -> bool:
    return LABEL_INHERITED_FROM in labels_of(obj)


def _is_source(obj: Obj) -> bool:
    return not _is_hnc_copy(obj) and copied_from(obj) is None


def _exception(kind: PropagatedKind, obj: Obj) -> tuple[str | None, dict[str, str]]:
    """HNC's exceptions on a source: why it is not carried over ("" when HNC never meant to
    copy it, so there is nothing to say; None when it is), and Accurate's annotations that
    narrow it as HNC's did."""
    annotations = annotations_of(obj)
    if kind.mode == MODE_ALLOW_PROPAGATE and not _allowed(annotations):
        return "", {}
    ours: dict[str, str] = {}
    for theirs, mine in EXCEPTIONS.items():
        value = str(annotations.get(theirs, ""))
        if not value:  # HNC reads an empty exception as none at all
            continue
        translated, problem = _translated(theirs, value)
        if problem is None and translated is not None:
            problem = _conflict(annotations, theirs, value, mine, translated)
        if problem is not None:
            return problem, {}
        if translated is not None:
            ours[mine] = translated
    return None, ours


def _allowed(annotations: Mapping[str, str]) -> bool:
    """Whether HNC copies an object of an ``AllowPropagate`` kind: only when it says where."""
    return bool(
        annotations.get(EXCEPTION_SELECT)
        or annotations.get(EXCEPTION_TREE_SELECT)
        or str(annotations.get(EXCEPTION_ALL, "")).lower() == "true"
    )


def _translated(theirs: str, value: str) -> tuple[str | None, str | None]:
    """(Accurate's value for HNC's exception ``theirs``, None when it needs none; why it cannot
    be translated, or None). A value HNC cannot read made HNC copy the object nowhere."""
    nowhere = f"HNC reads {theirs}={value!r} as an error and copies it nowhere"
    if theirs == EXCEPTION_NONE:
        if value in GO_TRUE:
            return "true", None
        if value in GO_FALSE:
            return None, None
        return None, f"{nowhere}: not a boolean; fix or remove the annotation, then import again"
    if theirs == EXCEPTION_TREE_SELECT:
        named = [term for term in value.split(",") if not term.strip().startswith("!")]
        if len(named) > 1:
            return None, f"{nowhere}: it names more than one namespace without '!'"
    error = selection_of({"metadata": {"annotations": {EXCEPTIONS[theirs]: value}}}).error
    if error is not None:
        return None, f"{theirs}={value!r} cannot be translated: {error}"
    return value, None


def _conflict(
    annotations: Mapping[str, str], theirs: str, value: str, mine: str, translated: str
) -> str | None:
    """Why a source that already carries Accurate's exception with another value is left
    alone, or None."""
    existing = annotations.get(mine)
    if existing is None or existing == translated:
        return None
    return f"it carries {mine}={existing!r} and {theirs}={value!r}, which differ; left as it is"


@dataclass
class _Objects:
    """One kind's objects by namespace and name, split into HNC's copies and the rest."""

    kind: PropagatedKind
    by_key: dict[tuple[str, str], Obj]
    copies_taken: set[tuple[str, str]] = field(default_factory=set)


def _object_writes(
    tree: _Tree, objects: _Objects, not_carried: list[NotCarried]
) -> tuple[list[MarkObject], list[MarkObject]]:
    kind = objects.kind
    sources: list[MarkObject] = []
    copies: list[MarkObject] = []
    explained: set[tuple[str, str]] = set()
    for (namespace, name), obj in sorted(objects.by_key.items()):
        if not _is_source(obj) or not tree.children(namespace):
            continue
        below = tree.descendants(namespace)
        theirs = [
            (child, objects.by_key[(child, name)])
            for child in below
            if (child, name) in objects.by_key
        ]
        hnc_copies = [
            (child, copy_)
            for child, copy_ in theirs
            if labels_of(copy_).get(LABEL_INHERITED_FROM) == namespace
        ]
        exception, exceptions = _exception(kind, obj)
        problem = (
            _source_problem(kind, obj, theirs, hnc_copies, bool(exceptions))
            if exception is None
            else _left_copies(exception, hnc_copies)
        )
        if problem is not None:
            explained.update((child, name) for child, _ in hnc_copies)
            if problem:
                not_carried.append(NotCarried(_describe(kind, namespace, name), problem))
            continue
        mode = propagate_mode(obj)
        missing = {k: v for k, v in exceptions.items() if annotations_of(obj).get(k) != v}
        if mode is None:
            sources.append(_mark(kind, obj, {ANNOTATION_PROPAGATE: PROPAGATE_UPDATE, **missing}))
        elif mode != PROPAGATE_UPDATE:
            not_carried.append(
                NotCarried(
                    _describe(kind, namespace, name),
                    f"it is already annotated {ANNOTATION_PROPAGATE}={mode}; left as it is",
                )
            )
        elif missing:
            sources.append(_mark(kind, obj, missing))
        for child, copy_ in hnc_copies:
            objects.copies_taken.add((child, name))
            parent = tree.parents[child]
            if copied_from(copy_) != parent:
                copies.append(_mark(kind, copy_, {ANNOTATION_FROM: parent}))
    for (namespace, name), obj in sorted(objects.by_key.items()):
        key = (namespace, name)
        if _is_hnc_copy(obj) and key not in objects.copies_taken and key not in explained:
            origin = labels_of(obj)[LABEL_INHERITED_FROM]
            not_carried.append(
                NotCarried(
                    _describe(kind, namespace, name),
                    f"HNC's copy from {origin} has no source in an ancestor that comes along; "
                    "left as it is (HNC would have deleted it)",
                )
            )
    return copies, sources


def _source_problem(
    kind: PropagatedKind,
    obj: Obj,
    theirs: Sequence[tuple[str, Obj]],
    hnc_copies: Sequence[tuple[str, Obj]],
    narrowed: bool,
) -> str | None:
    """Why a source in a namespace with descendants, whose exceptions carry over, is not opted
    in, or None. One that HNC copied nowhere is opted in only when its exceptions (``narrowed``)
    may be why."""
    own = [child for child, other in theirs if _is_source(other)]
    if own:
        holds = "holds its" if len(own) == 1 else "hold their"
        return (
            f"{', '.join(own)} {holds} own {kind.gvk.kind} {_name(obj)}, which Accurate would "
            "replace with the copy"
        )
    if not hnc_copies and propagate_mode(obj) is None and not narrowed:
        return (
            "HNC made no copies of it (HNC leaves out some objects, such as those with "
            "finalizers), so it is not opted in"
        )
    return None


def _left_copies(exception: str, hnc_copies: Sequence[tuple[str, Obj]]) -> str:
    """A reason for not carrying a source over, with what becomes of HNC's copies of it."""
    if exception and len(hnc_copies) == 1:
        return f"{exception}; its copy stays as it is, no longer kept current"
    if exception and hnc_copies:
        return f"{exception}; its {len(hnc_copies)} copies stay as they are, no longer kept current"
    return exception


def _mark(kind: PropagatedKind, obj: Obj, annotations: Mapping[str, str]) -> MarkObject:
    return MarkObject(kind, obj, _namespace(obj), _name(obj), dict(annotations))


def _describe(kind: PropagatedKind, namespace: str, name: str) -> str:
    return f"{kind.gvk.kind} {namespace}/{name}"


# Namespace labels and annotations, and what has no equivalent


@dataclass(frozen=True)
class _Owns:
    """Of each carried namespace's own managed labels and annotations (its anchor's for a
    subnamespace, else its HierarchyConfiguration's), the values no ancestor overrides: what
    its SubNamespace records."""

    kept: Mapping[str, tuple[dict[str, str], dict[str, str]]]
    # The namespaces whose own values come from an anchor.
    anchored: frozenset[str]


def _own_metadata(tree: _Tree, snapshot: HncSnapshot, not_carried: list[NotCarried]) -> _Owns:
    """HNC sets a namespace's own managed values first, then each ancestor's up to the root,
    so the highest namespace holding a key wins (hierarchyconfig's syncLabels and
    syncAnnotations). Accurate's labelKeys give the same answer for every namespace HNC
    labelled, as a parent's value wins over a namespace's own; every own value an ancestor
    overrides with another is reported with the value that wins."""
    declared = {
        _namespace(hc): _spec(hc) for hc in snapshot.hierarchies if _name(hc) == HIERARCHY_NAME
    }
    labels: dict[str, Mapping[str, str]] = {}
    annotations: dict[str, Mapping[str, str]] = {}
    origins: dict[str, str] = {}
    anchored = set()
    for name in tree.top_down():
        anchor, spec = _own_spec(tree, declared, name)
        if anchor is None:
            origins[name] = f"HierarchyConfiguration {name}/{HIERARCHY_NAME}"
        else:
            origins[name] = f"SubnamespaceAnchor {_namespace(anchor)}/{name}"
            anchored.add(name)
        labels[name] = _pairs(spec.get("labels"))
        annotations[name] = _pairs(spec.get("annotations"))
    kept = {}
    for name in tree.top_down():
        sections = []
        for noun, own in (("label", labels), ("annotation", annotations)):
            mine = {}
            for key, value in own[name].items():
                winner = _winner(tree, own, name, key)
                if winner is None or winner[1] == value:
                    mine[key] = value
                    continue
                ancestor, wins = winner
                not_carried.append(
                    NotCarried(
                        f"{origins[name]}: {noun} {key}={value}",
                        f"HNC gives namespace {name} {ancestor}'s {key}={wins}, as an "
                        f"ancestor's managed {noun} wins over a namespace's own; so does "
                        f"Accurate, which has {name} inherit it",
                    )
                )
            sections.append(mine)
        kept[name] = (sections[0], sections[1])
    return _Owns(kept, frozenset(anchored))


def _own_spec(
    tree: _Tree, declared: Mapping[str, Mapping[str, Any]], name: str
) -> tuple[Obj | None, Mapping[str, Any]]:
    """The anchor a namespace's own managed values come from (None for its
    HierarchyConfiguration), and that spec: HNC copies a subnamespace's anchor's values onto
    its HierarchyConfiguration."""
    parent = tree.parents.get(name)
    anchor = tree.anchors.get((parent, name)) if parent else None
    namespace = tree.namespaces.get(name)
    subnamespace_of = annotations_of(namespace or {}).get(ANNOTATION_SUBNAMESPACE_OF)
    if anchor is not None and (namespace is None or subnamespace_of == parent):
        return anchor, _spec(anchor)
    return None, declared.get(name) or {}


def _winner(
    tree: _Tree, own: Mapping[str, Mapping[str, str]], name: str, key: str
) -> tuple[str, str] | None:
    """The highest ancestor holding ``key`` among its own values, and its value."""
    found = None
    above = tree.parents.get(name)
    while above is not None and above in own:
        if key in own[above]:
            found = (above, own[above][key])
        above = tree.parents.get(above)
    return found


def _managed_keys(
    snapshot: HncSnapshot, owns: _Owns, not_carried: list[NotCarried]
) -> tuple[frozenset[str], frozenset[str]]:
    """The label and annotation keys HNC manages in the cluster (the keys in use: the patterns
    themselves are flags of HNC's deployment), without the reserved ones, which are reported.

    None goes to subNamespaceLabelKeys or subNamespaceAnnotationKeys: there a SubNamespace's
    value wins over an inherited one, which HNC never lets an anchor do, so a tenant could
    override what an ancestor sets (say pod-security.kubernetes.io/enforce) in every
    SubNamespace they create. The anchors' values stay on their namespaces as HNC set them and
    pass down as in HNC."""
    labels: set[str] = set()
    annotations: set[str] = set()
    for spec in [*map(_spec, snapshot.hierarchies), *map(_spec, snapshot.anchors)]:
        labels.update(_pairs(spec.get("labels")))
        annotations.update(_pairs(spec.get("annotations")))
    reserved = sorted(k for k in labels | annotations if k.startswith(RESERVED_PREFIX))
    for key in reserved:
        not_carried.append(
            NotCarried(f"managed key {key}", "keys under accurate.cybozu.com/ cannot be inherited")
        )
    anchored = sorted(
        {key for name in owns.anchored for section in owns.kept[name] for key in section}
    )
    if anchored:
        not_carried.append(
            NotCarried(
                f"managed {'key' if len(anchored) == 1 else 'keys'} {', '.join(anchored)} on "
                "anchors",
                "taken from no SubNamespace: in subNamespaceLabelKeys or "
                "subNamespaceAnnotationKeys a SubNamespace's value would win over an inherited "
                "one, while HNC lets an ancestor's value win over an anchor's, so a tenant "
                "could override what an ancestor sets. The anchors' values stay on their "
                "namespaces and pass down as in HNC, and the SubNamespaces record them",
            )
        )
    return (
        frozenset(k for k in labels if not k.startswith(RESERVED_PREFIX)),
        frozenset(k for k in annotations if not k.startswith(RESERVED_PREFIX)),
    )


def _literal(key: str) -> str:
    """A glob that matches exactly ``key``."""
    return "".join(f"\\{char}" if char in "*?[\\" else char for char in key)


def _leftovers(snapshot: HncSnapshot, not_carried: list[NotCarried]) -> None:
    """What HNC did that Accurate has no equivalent for."""
    for hierarchy in snapshot.hierarchies:
        if _spec(hierarchy).get("allowCascadingDeletion"):
            not_carried.append(
                NotCarried(
                    f"allowCascadingDeletion on namespace {_namespace(hierarchy)}",
                    "the import does not carry it over: in Accurate a tenant allows it per "
                    "subtree with the annotation accurate.cybozu.com/allow-cascading-deletion="
                    '"true" on a SubNamespace, an administrator cluster-wide with the controller '
                    "flag --webhook-allow-cascading-deletion",
                )
            )


# Hierarchical quotas


def _quota_writes(snapshot: HncSnapshot, not_carried: list[NotCarried]) -> list[CreateQuota]:
    """HNC's HRQs as Accurate's (the spec is the same; only the apiVersion changes), those
    already there left out."""
    if snapshot.accurate_quotas is None:
        for hnc_quota in snapshot.quotas:
            not_carried.append(
                NotCarried(
                    f"HierarchicalResourceQuota {_namespace(hnc_quota)}/{_name(hnc_quota)}",
                    "Accurate's hierarchical quotas are not installed (CRD "
                    "hierarchicalresourcequotas.quota.accurate.cybozu.com: controller/config/"
                    "quota, or the chart's quota.enabled); install them and run import-hnc "
                    "again. Until then HNC's ResourceQuota limits each namespace on its own",
                )
            )
        return []
    existing = {(_namespace(o), _name(o)): o for o in snapshot.accurate_quotas}
    writes = []
    for hnc_quota in snapshot.quotas:
        key = (_namespace(hnc_quota), _name(hnc_quota))
        spec = {k: v for k, v in _spec(hnc_quota).items() if k in ("hard", "scopeSelector")}
        what = f"HierarchicalResourceQuota {key[0]}/{key[1]}"
        try:
            wanted = read_hrq({"metadata": _metadata(hnc_quota), "spec": spec})
        except QuotaError as error:
            not_carried.append(NotCarried(what, f"its spec cannot be carried over: {error}"))
            continue
        ours = existing.get(key)
        if ours is None:
            writes.append(CreateQuota(key[0], key[1], spec))
        elif _quota_differs(ours, wanted.hard, wanted.scope_selector):
            not_carried.append(
                NotCarried(what, "Accurate's HRQ of that name has another spec; it is kept")
            )
    return writes


def _quota_differs(ours: Obj, hard: Mapping[str, Any], scope: Any) -> bool:
    try:
        found = read_hrq(ours)
    except QuotaError:
        return True
    values = {r: q.value for r, q in found.hard.items()}
    return values != {r: q.value for r, q in hard.items()} or found.scope_selector != scope


def _quota_removals(snapshot: HncSnapshot) -> tuple[list[DeleteHncQuota], list[str]]:
    """HNC's ResourceQuotas (found by its label) that may go: in each namespace, once the
    ResourceQuotas Accurate's controller keeps there have been counted by kube-apiserver for
    every resource HNC's limits, so that the namespace is never left without a limit; and the
    namespaces where one must wait (none when Accurate's HRQs are not installed: nothing
    will count there until they are, and the plan says so)."""
    if snapshot.accurate_quotas is None:
        return [], []
    counting: dict[str, set[str]] = {}
    for rq in snapshot.resource_quotas:
        used = (rq.get("status") or {}).get("used")
        if hrq_of_quota(rq) is not None and used is not None:
            counting.setdefault(_namespace(rq), set()).update(used)
    removals, waiting = [], []
    for rq in snapshot.resource_quotas:
        if labels_of(rq).get(HNC_QUOTA_LABEL) != "true":
            continue
        if set(_spec(rq).get("hard") or {}) <= counting.get(_namespace(rq), set()):
            removals.append(DeleteHncQuota(rq, _namespace(rq), _name(rq)))
        else:
            waiting.append(_namespace(rq))
    return removals, sorted(waiting)


# Field ownership


def _takeovers(
    tree: _Tree, labels: frozenset[str], annotations: frozenset[str]
) -> list[TakeOwnership]:
    """For each namespace of the carried trees, the keys Accurate keeps (managed keys, HNC's
    tree labels) that HNC's field managers still own."""
    found = []
    for name in tree.top_down():
        namespace = tree.namespaces.get(name)
        if namespace is None:
            continue
        owned = owned_keys(_metadata(namespace).get("managedFields") or (), _hnc_entry)
        taken = sorted(k for k in owned.labels if k in labels or k.endswith(TREE_LABEL_SUFFIX))
        taken_annotations = sorted(owned.annotations & annotations)
        if taken or taken_annotations:
            found.append(TakeOwnership(namespace, name, tuple(taken), tuple(taken_annotations)))
    return found


def _hnc_entry(entry: Obj) -> bool:
    return any(written_by(entry, manager, "Update") for manager in HNC_FIELD_MANAGERS)


# The plan


def plan_import(snapshot: HncSnapshot, kinds: Kinds) -> Plan:
    """The writes that carry HNC's trees, copies and managed metadata over to Accurate.

    Writes already made are left out, so that planning again after an import finds nothing.
    """
    not_carried: list[NotCarried] = list(kinds.not_carried)
    tree = _build_tree(snapshot, not_carried)
    owns = _own_metadata(tree, snapshot, not_carried)
    roots, parents, subnamespaces = _namespace_writes(
        tree, owns, snapshot.subnamespaces, not_carried
    )
    copies: list[MarkObject] = []
    sources: list[MarkObject] = []
    for kind in kinds.propagated:
        by_key = {(_namespace(obj), _name(obj)): obj for obj in snapshot.objects.get(kind, ())}
        made_copies, made_sources = _object_writes(tree, _Objects(kind, by_key), not_carried)
        copies.extend(made_copies)
        sources.extend(made_sources)
    labels, annotations = _managed_keys(snapshot, owns, not_carried)
    _leftovers(snapshot, not_carried)
    quotas = _quota_writes(snapshot, not_carried)
    removals, waiting = _quota_removals(snapshot)
    tree_labels = _tree_labels(snapshot)
    config = Config(
        label_keys=tuple(_literal(key) for key in sorted(labels)),
        annotation_keys=tuple(_literal(key) for key in sorted(annotations)),
        watches=tuple(kind.gvk for kind in kinds.propagated),
        tree_labels=TreeLabelSettings(HNC_TREE_SUFFIX) if tree_labels else None,
    )
    return Plan(
        tuple(copies),
        tuple(sources),
        tuple(roots),
        tuple(parents),
        tuple(subnamespaces),
        config,
        tuple(not_carried),
        (tree_labels,) if tree_labels else (),
        tuple(_takeovers(tree, labels, annotations)),
        tuple(quotas),
        tuple(removals),
        tuple(waiting),
    )


def _tree_labels(snapshot: HncSnapshot) -> str:
    """Why the config needs HNC's tree label suffix ("" when it does not): namespaces carry
    HNC's tree labels, or selectors name them (HNC's, or Accurate's once carried over, so
    that planning again after an import asks for the same config)."""
    labelled = sum(
        any(key.endswith(TREE_LABEL_SUFFIX) for key in labels_of(ns)) for ns in snapshot.namespaces
    )
    selecting = sum(
        any(
            TREE_LABEL_SUFFIX in annotations_of(obj).get(key, "")
            for key in (EXCEPTION_SELECT, ANNOTATION_PROPAGATE_SELECT)
        )
        for objects in snapshot.objects.values()
        for obj in objects
    )
    if not labelled and not selecting:
        return ""
    found = (
        f"HNC's tree labels (<ancestor>{TREE_LABEL_SUFFIX}) are on {counted(labelled, 'namespace')}"
    )
    if selecting:
        found += f" and the selectors of {counted(selecting, 'object')} name them"
    return (
        f"treeLabels: {found}. With suffix {HNC_TREE_SUFFIX} Accurate keeps them current on "
        "the namespaces of its trees, so NetworkPolicies, namespaceSelectors and selectors "
        "written for HNC keep matching; namespaces outside its trees keep the ones HNC last "
        "wrote."
    )


def hnc_still_running(
    webhook_configurations: Iterable[Obj], deployments: Iterable[Obj]
) -> tuple[str, ...]:
    """What of HNC still acts on the cluster: webhook configurations holding HNC's webhooks
    (they refuse changes to HNC's copies) and Deployments not scaled to zero."""
    running = []
    for configuration in webhook_configurations:
        names = [
            str(hook.get("name", ""))
            for hook in configuration.get("webhooks") or ()
            if str(hook.get("name", "")).endswith(WEBHOOK_SUFFIX)
        ]
        if names:
            running.append(f"{configuration.get('kind', '')} {_name(configuration)}")
    for deployment in deployments:
        replicas = _spec(deployment).get("replicas", 1)
        if replicas != 0:
            running.append(f"Deployment {_namespace(deployment)}/{_name(deployment)}")
    return tuple(running)
