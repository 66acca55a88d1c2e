"""The admission rules for Namespaces and SubNamespaces (DESIGN.md 5), as pure functions.

They keep the namespace forest sound: no cycles, no links to missing or unsuitable namespaces,
no namespace removed or demoted while others depend on it. The webhook server wraps them in
AdmissionReview envelopes. ``forest`` is always the cluster as it is, without the change under
review, so every rule asks "what if this object were the new one?". Denials say what is wrong
and name the namespaces involved, so that a tenant can fix the problem without an operator.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from libaccurate.config import NamingPolicy
from libaccurate.constants import (
    ANNOTATION_ALLOW_CASCADING_DELETION,
    FINALIZER,
    LABEL_PARENT,
    LABEL_TEMPLATE,
    LABEL_TYPE,
    TYPE_ROOT,
    TYPE_TEMPLATE,
)
from libaccurate.forest import Forest, Node, node_from_object
from libaccurate.lifecycle import cascades
from libaccurate.naming import check_name
from libaccurate.treelabels import is_tree_label, tree_labels
from libaccurate.validation import (
    FieldError,
    validate_annotations,
    validate_dns1123_label,
    validate_labels,
)

CREATE = "CREATE"
UPDATE = "UPDATE"
DELETE = "DELETE"

# Long lists of blocking namespaces are cut so that a denial stays readable.
_NAMES_SHOWN = 10


@dataclass(frozen=True)
class Verdict:
    """The answer to one admission request; ``patch`` holds JSON patch operations to apply."""

    allowed: bool
    message: str = ""
    patch: tuple[dict[str, Any], ...] = ()


ALLOWED = Verdict(True)


def review_namespace(
    operation: str,
    new: Mapping[str, Any] | None,
    old: Mapping[str, Any] | None,
    forest: Forest,
    allow_cascading_deletion: bool,
    tree_label_suffix: str | None = None,
) -> Verdict:
    """Validate a CREATE, UPDATE or DELETE of a Namespace.

    With tree labels on (``tree_label_suffix``), a tree label may change only to what the
    controller keeps there, whoever asks: the controller's own writes pass, a hand edit does not.
    """
    if operation == CREATE:
        node = node_from_object(_required(new, operation))
        return _verdict(
            _tree_label_denial(node, {}, forest, tree_label_suffix)
            or _namespace_denial(node, forest)
        )
    if operation == UPDATE:
        after = node_from_object(_required(new, operation))
        before = node_from_object(_required(old, operation))
        denial = _tree_label_denial(after, before.labels, forest, tree_label_suffix)
        if denial is not None:
            return Verdict(False, denial)
        if _links(after) == _links(before):
            # Nothing Accurate cares about changed, so even a namespace in a broken part of the
            # forest can still be edited (for example to fix its other labels).
            return ALLOWED
        return _verdict(_namespace_denial(after, forest) or _demotion_denial(before, after, forest))
    if operation == DELETE:
        name = node_from_object(_required(old, operation)).name
        return _verdict(_deletion_denial(name, forest, allow_cascading_deletion))
    return Verdict(False, f"unknown operation: {operation}")


def review_subnamespace(
    operation: str,
    new: Mapping[str, Any] | None,
    old: Mapping[str, Any] | None,
    forest: Forest,
    naming_policies: Sequence[NamingPolicy],
    allow_cascading_deletion: bool,
) -> Verdict:
    """Validate a CREATE, UPDATE or DELETE of a SubNamespace.

    An UPDATE is checked only for a changed spec, or a cascading deletion taken back, so that
    the controller and users can always remove the finalizer, whatever state the object is in.
    """
    if operation == CREATE:
        return _verdict(_subnamespace_denial(_required(new, operation), forest, naming_policies))
    if operation == UPDATE:
        after, before = _required(new, operation), _required(old, operation)
        withdrawn = _cascade_withdrawal(after, before)
        if withdrawn is not None or _spec(after) == _spec(before):
            return _verdict(withdrawn)
        return _verdict(_spec_denial(after))
    if operation == DELETE and not allow_cascading_deletion:
        return _verdict(_subnamespace_deletion_denial(_required(old, operation), forest))
    return ALLOWED


def mutate_subnamespace(operation: str, obj: Mapping[str, Any]) -> Verdict:
    """Add the finalizer to a new SubNamespace, keeping any finalizers it already has.

    The Go Accurate replaces the whole list; keeping the others lets other tools that set
    finalizers on SubNamespaces work.
    """
    finalizers = list((obj.get("metadata") or {}).get("finalizers") or [])
    if operation != CREATE or FINALIZER in finalizers:
        return ALLOWED
    # "add" on an existing member replaces it, so this works with or without a finalizer list.
    add = {"op": "add", "path": "/metadata/finalizers", "value": [*finalizers, FINALIZER]}
    return Verdict(True, patch=(add,))


def _verdict(denial: str | None) -> Verdict:
    return ALLOWED if denial is None else Verdict(False, denial)


def _required(obj: Mapping[str, Any] | None, operation: str) -> Mapping[str, Any]:
    """The object a request of this operation must carry; the envelope guarantees it."""
    if obj is None:
        raise ValueError(f"an admission request for {operation} carries no object to review")
    return obj


# Namespaces


def _links(node: Node) -> tuple[str | None, str | None, str | None]:
    return (
        node.labels.get(LABEL_TYPE),
        node.labels.get(LABEL_PARENT),
        node.labels.get(LABEL_TEMPLATE),
    )


def _namespace_denial(node: Node, forest: Forest) -> str | None:
    """Why the namespace as it would be after this request breaks the forest, if it does."""
    return _label_denial(node) or _chain_denial(node, forest) or _target_denial(node, forest)


def _label_denial(node: Node) -> str | None:
    """The namespace's own labels must make sense together."""
    if node.type and node.type not in (TYPE_ROOT, TYPE_TEMPLATE):
        return (
            f"label {LABEL_TYPE} of namespace {node.name} must be {TYPE_ROOT!r} or "
            f"{TYPE_TEMPLATE!r}, not {node.type!r}"
        )
    if node.parent is not None and node.template is not None:
        return (
            f"a sub-namespace cannot have a template: namespace {node.name} has parent "
            f"{node.parent} and template {node.template}"
        )
    if node.parent is not None and node.type:
        return (
            f"a sub-namespace cannot be a root or a template: namespace {node.name} has parent "
            f"{node.parent} and is labelled {LABEL_TYPE}={node.type}"
        )
    return None


def _tree_label_denial(
    node: Node, before: Mapping[str, str], forest: Forest, suffix: str | None
) -> str | None:
    """Tree labels are the controller's: each one a request adds, changes or removes must end
    up as the namespace's place in its tree says."""
    if suffix is None:
        return None
    keys = {*node.labels, *before}
    changed = sorted(
        key
        for key in keys
        if is_tree_label(key, suffix) and node.labels.get(key) != before.get(key)
    )
    if not changed:
        return None
    expected = tree_labels(forest, node, suffix).labels
    wrong = [key for key in changed if node.labels.get(key) != expected.get(key)]
    if not wrong:
        return None
    return (
        f"label {wrong[0]} of namespace {node.name} is a tree label, kept by Accurate from the "
        f"namespace's place in its tree ({_tree_label_value(expected.get(wrong[0]))}); "
        f"move the namespace (its {LABEL_PARENT} label) instead of editing tree labels"
    )


def _tree_label_value(value: str | None) -> str:
    return "it must not be set" if value is None else f"it must be {value!r}"


def _chain_denial(node: Node, forest: Forest) -> str | None:
    """Following parent-or-template links up from the namespace must end at a namespace that
    has neither, without a cycle and without a missing namespace on the way."""
    if node.source is None:
        return None
    role = _role(node)
    chain = forest.walk_sources(node.name, first=node.source)
    if chain.end == "cycle":
        if chain.names == (node.name, node.name):
            return f"circular reference is not permitted: {node.name} cannot be its own {role}"
        return f"circular reference is not permitted: {' -> '.join(chain.names)}"
    if chain.end == "missing":
        missing = chain.names[-1]
        if len(chain.names) == 2:
            return f"{role} namespace does not exist: {missing}"
        return (
            f"namespace does not exist: {missing}, referenced by {chain.names[-2]} in the chain "
            f"{' -> '.join(chain.names)}"
        )
    return None


def _target_denial(node: Node, forest: Forest) -> str | None:
    """A parent must be a root or a sub-namespace; a template must be a template."""
    if node.source is None:
        return None
    target = forest.nodes[node.source]
    if node.parent is not None and not _can_have_children(target):
        return (
            f"{target.name} is not a valid parent namespace: it is {_describe(target)}; "
            f"a parent must be a root or a sub-namespace"
        )
    if node.parent is None and not target.is_template:
        return (
            f"{target.name} is not a valid template namespace: it is {_describe(target)}, "
            f"not labelled {LABEL_TYPE}={TYPE_TEMPLATE}"
        )
    return None


def _demotion_denial(before: Node, after: Node, forest: Forest) -> str | None:
    """A namespace may not stop being what its dependents need it to be.

    Children need a root or a sub-namespace (turning a root into a sub-namespace keeps them
    valid, which is what grafting a tree does); instances need a template.
    """
    children = forest.children(after.name)
    if children and _can_have_children(before) and not _can_have_children(after):
        advice = (
            f"keep it labelled {LABEL_TYPE}={TYPE_ROOT}"
            if before.is_root
            else f"label it {LABEL_TYPE}={TYPE_ROOT} in the same update"
        )
        return (
            f"there are sub-namespaces under {after.name}: {_names(children)}; {advice}, "
            f"or move or delete them first"
        )
    instances = forest.instances(after.name)
    if instances and before.is_template and not after.is_template:
        return (
            f"there are namespaces referencing {after.name} as their template: "
            f"{_names(instances)}; unset their template first"
        )
    return None


def _deletion_denial(name: str, forest: Forest, allow_cascading_deletion: bool) -> str | None:
    instances = forest.instances(name)
    if instances:
        return (
            f"child namespaces exist: namespaces {_names(instances)} use {name} as their "
            f"template; unset their template before deleting it"
        )
    children = forest.children(name)
    if children and not allow_cascading_deletion:
        return (
            f"child namespaces exist: {name} has sub-namespaces {_names(children)}; "
            f"delete them before deleting it"
        )
    return None


def _can_have_children(node: Node) -> bool:
    return node.is_root or node.parent is not None


def _role(node: Node) -> str:
    return "parent" if node.parent is not None else "template"


def _describe(node: Node) -> str:
    """A namespace's kind in words, for messages that say why it does not fit."""
    kind = node.kind
    if kind == "subnamespace":
        return f"a sub-namespace of {node.parent}"
    if kind == "instance":
        return f"an instance of template {node.template}"
    if kind == "plain":
        return f"a plain namespace (no {LABEL_TYPE}, {LABEL_PARENT} or {LABEL_TEMPLATE} label)"
    return f"a {kind} namespace"


def _names(names: Sequence[str]) -> str:
    shown = ", ".join(names[:_NAMES_SHOWN])
    hidden = len(names) - _NAMES_SHOWN
    return f"{shown} and {hidden} more" if hidden > 0 else shown


# SubNamespaces


def _cascade_withdrawal(after: Mapping[str, Any], before: Mapping[str, Any]) -> str | None:
    """A SubNamespace being deleted keeps the annotation that allowed its subtree to go.

    The deletion was admitted for the whole subtree because the annotation was there, and an
    admitted deletion is never taken back; the annotation is also what tells the controller,
    whenever it first sees the deletion, that the subtree goes with it. Taking it away would
    leave a deletion that can neither finish nor be undone (docs/hnc-features.md).
    """
    metadata = before.get("metadata") or {}
    if not metadata.get("deletionTimestamp") or not cascades(before) or cascades(after):
        return None
    return (
        f"SubNamespace {metadata.get('namespace')}/{metadata.get('name')} is being deleted "
        f'with its subtree, as {ANNOTATION_ALLOW_CASCADING_DELETION}="true" allowed; the '
        "annotation stays until the deletion is done, since a deletion cannot be taken back"
    )


def _spec(obj: Mapping[str, Any]) -> tuple[Mapping[str, str], Mapping[str, str]]:
    spec = obj.get("spec") or {}
    return spec.get("labels") or {}, spec.get("annotations") or {}


def _subnamespace_denial(
    obj: Mapping[str, Any], forest: Forest, naming_policies: Sequence[NamingPolicy]
) -> str | None:
    metadata = obj["metadata"]
    namespace, name = metadata["namespace"], metadata["name"]
    return (
        _home_denial(namespace, forest)
        # A custom resource name only has to be a DNS subdomain, but this one becomes a namespace
        # name; without this check a SubNamespace could ask for a namespace that cannot exist.
        or _field_denial(validate_dns1123_label(name, "metadata.name"))
        or _spec_denial(obj)
        or _naming_denial(namespace, name, forest, naming_policies)
    )


def _home_denial(namespace: str, forest: Forest) -> str | None:
    """Only roots and sub-namespaces may hold SubNamespaces."""
    node = forest.get(namespace)
    if node is None:
        return f"namespace {namespace} does not exist"
    if not _can_have_children(node):
        return (
            f"namespace {namespace} is neither a root nor a sub namespace: it is "
            f"{_describe(node)}, so it cannot hold SubNamespaces"
        )
    return None


def _spec_denial(obj: Mapping[str, Any]) -> str | None:
    """Labels and annotations in the spec must be valid on a Namespace, where they end up."""
    labels, annotations = _spec(obj)
    return _field_denial(
        [
            *validate_labels(labels, "spec.labels"),
            *validate_annotations(annotations, "spec.annotations"),
        ]
    )


def _field_denial(errors: Sequence[FieldError]) -> str | None:
    """Field errors in the format of Kubernetes' aggregated errors, as the Go Accurate reports
    them: one error as it is, several (without repeats) in brackets."""
    messages = list(dict.fromkeys(str(error) for error in errors))
    if not messages:
        return None
    return messages[0] if len(messages) == 1 else f"[{', '.join(messages)}]"


def _naming_denial(
    namespace: str, name: str, forest: Forest, naming_policies: Sequence[NamingPolicy]
) -> str | None:
    """Naming policies apply through the root of the tree that will hold the new namespace."""
    root = forest.root_of(namespace)
    if root is None:
        problem = forest.problem(namespace)
        ancestors = _names(forest.ancestors(namespace))
        reason = problem.message if problem else f"its parents {ancestors} do not lead to a root"
        return f"cannot find the root namespace of {namespace}: {reason}"
    denial = check_name(naming_policies, root, name)
    if denial is None:
        return None
    return f"cannot create sub-namespace {name} in {namespace}: {denial}"


def _subnamespace_deletion_denial(obj: Mapping[str, Any], forest: Forest) -> str | None:
    """Deleting a SubNamespace deletes its namespace, so that namespace must have no children.

    A namespace of the same name that is not this SubNamespace's child is never deleted by it.
    So the verdict rests on the namespace's parent label: ``forest`` must hold the namespace as
    the API has it now (``sub move`` patches the label, then deletes the old SubNamespace at
    once), as well as its current children.
    """
    metadata = obj["metadata"]
    namespace, name = metadata["namespace"], metadata["name"]
    node = forest.get(name)
    if node is None or node.parent != namespace or cascades(obj):
        return None
    children = forest.children(name)
    if not children:
        return None
    return (
        f"child namespaces exist: deleting SubNamespace {namespace}/{name} would delete "
        f"namespace {name}, which has sub-namespaces {_names(children)}; delete them first, "
        f'or annotate the SubNamespace with {ANNOTATION_ALLOW_CASCADING_DELETION}="true" to '
        "delete the whole subtree with it"
    )
