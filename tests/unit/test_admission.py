"""Admission rules for Namespaces and SubNamespaces (DESIGN.md 5; ACCEPTANCE.md C and D)."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from libaccurate.admission import (
    Verdict,
    mutate_subnamespace,
    review_namespace,
    review_subnamespace,
)
from libaccurate.config import NamingPolicy
from libaccurate.constants import (
    ANNOTATION_ALLOW_CASCADING_DELETION,
    FINALIZER,
    LABEL_PARENT,
    LABEL_TEMPLATE,
    LABEL_TYPE,
)
from libaccurate.forest import Forest

Obj = dict[str, Any]
LINK_LABELS = {"type": LABEL_TYPE, "parent": LABEL_PARENT, "template": LABEL_TEMPLATE}


def ns(name: str, **links: str) -> Obj:
    """A Namespace; ``links`` are type=, parent= and template= label values."""
    labels = {LINK_LABELS[link]: value for link, value in links.items()}
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}}


def sn(
    namespace: str,
    name: str,
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
) -> Obj:
    spec = {}
    if labels is not None:
        spec["labels"] = labels
    if annotations is not None:
        spec["annotations"] = annotations
    return {
        "apiVersion": "accurate.cybozu.com/v2",
        "kind": "SubNamespace",
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
    }


def relabel(obj: Obj, **changes: str | None) -> Obj:
    """A copy of a Namespace with links set (a value) or removed (None)."""
    new = ns(obj["metadata"]["name"])
    new["metadata"]["labels"] = dict(obj["metadata"]["labels"])
    for link, value in changes.items():
        if value is None:
            new["metadata"]["labels"].pop(LINK_LABELS[link], None)
        else:
            new["metadata"]["labels"][LINK_LABELS[link]] = value
    return new


CLUSTER = [
    ns("root1", type="root"),
    ns("sub1", parent="root1"),
    ns("sub1-a", parent="sub1"),
    ns("sub1-b", parent="sub1"),
    ns("sub2", parent="root1"),
    ns("leaf-root", type="root"),
    ns("tmpl", type="template"),
    ns("tmpl-child", type="template", template="tmpl"),
    ns("inst1", template="tmpl"),
    ns("inst2", template="tmpl-child"),
    ns("lonely-tmpl", type="template"),
    ns("plain"),
]


@pytest.fixture
def forest() -> Forest:
    return Forest.build(CLUSTER)


def by_name(name: str) -> Obj:
    return copy.deepcopy(next(obj for obj in CLUSTER if obj["metadata"]["name"] == name))


def create(obj: Obj, forest: Forest) -> Verdict:
    return review_namespace("CREATE", obj, None, forest, allow_cascading_deletion=False)


def update(old: Obj, new: Obj, forest: Forest) -> Verdict:
    return review_namespace("UPDATE", new, old, forest, allow_cascading_deletion=False)


def delete(name: str, forest: Forest, *, cascade: bool = False) -> Verdict:
    return review_namespace("DELETE", None, by_name(name), forest, cascade)


def denied(verdict: Verdict, *fragments: str) -> bool:
    return not verdict.allowed and all(fragment in verdict.message for fragment in fragments)


# C1


def test_plain_namespace_can_be_created(forest: Forest) -> None:
    assert create(ns("new"), forest) == Verdict(True)


def test_template_must_be_a_template_namespace(forest: Forest) -> None:
    verdict = update(by_name("plain"), relabel(by_name("plain"), template="root1"), forest)

    assert denied(verdict, "root1 is not a valid template namespace", "it is a root namespace")
    assert create(ns("new", template="tmpl"), forest).allowed
    assert create(ns("new", type="root", template="tmpl-child"), forest).allowed
    assert denied(
        create(ns("new", template="plain"), forest),
        "plain is not a valid template",
        "plain namespace",
    )
    assert denied(create(ns("new", template="sub1"), forest), "it is a sub-namespace of root1")
    assert denied(create(ns("new", template="inst1"), forest), "an instance of template tmpl")


# C2


def test_self_parent_and_self_template_are_denied(forest: Forest) -> None:
    assert denied(
        create(ns("me", parent="me"), forest),
        "circular reference is not permitted: me cannot be its own parent",
    )
    assert denied(
        create(ns("me", type="template", template="me"), forest),
        "circular reference is not permitted: me cannot be its own template",
    )


def test_longer_cycles_are_denied_and_shown(forest: Forest) -> None:
    moved = update(by_name("sub1"), relabel(by_name("sub1"), parent="sub1-a"), forest)
    templated = update(by_name("tmpl"), relabel(by_name("tmpl"), template="tmpl-child"), forest)
    mixed = update(by_name("root1"), relabel(by_name("root1"), template="sub2"), forest)

    assert moved == Verdict(False, "circular reference is not permitted: sub1 -> sub1-a -> sub1")
    assert templated == Verdict(
        False, "circular reference is not permitted: tmpl -> tmpl-child -> tmpl"
    )
    assert mixed == Verdict(False, "circular reference is not permitted: root1 -> sub2 -> root1")


def test_a_cycle_above_the_new_parent_is_denied() -> None:
    broken = Forest.build([ns("a", parent="b"), ns("b", parent="a")])

    assert denied(create(ns("new", parent="a"), broken), "circular reference", "new -> a -> b -> a")


# C3


def test_sub_namespace_cannot_have_a_template_or_a_type(forest: Forest) -> None:
    assert denied(
        create(ns("s", parent="root1", template="tmpl"), forest),
        "a sub-namespace cannot have a template",
        "s has parent root1 and template tmpl",
    )
    assert denied(
        create(ns("s", parent="root1", type="root"), forest),
        "a sub-namespace cannot be a root or a template",
        f"{LABEL_TYPE}=root",
    )
    assert denied(
        update(by_name("sub2"), relabel(by_name("sub2"), type="template"), forest),
        "a sub-namespace cannot be a root or a template",
    )


def test_type_must_be_root_or_template(forest: Forest) -> None:
    assert denied(create(ns("x", type="Root"), forest), f"label {LABEL_TYPE}", "not 'Root'")
    assert create(ns("x", type=""), forest).allowed


# C4


def test_parent_must_exist(forest: Forest) -> None:
    assert denied(create(ns("s", parent="nope"), forest), "parent namespace does not exist: nope")
    assert denied(
        update(by_name("inst1"), relabel(by_name("inst1"), template="gone"), forest),
        "template namespace does not exist: gone",
    )


def test_a_missing_namespace_higher_up_the_chain_is_named() -> None:
    broken = Forest.build([ns("orphan", parent="gone")])

    assert denied(
        create(ns("s", parent="orphan"), broken),
        "namespace does not exist: gone, referenced by orphan in the chain s -> orphan -> gone",
    )


@pytest.mark.parametrize(
    ("parent", "kind"),
    [
        ("plain", "a plain namespace"),
        ("tmpl", "a template namespace"),
        ("inst1", "an instance of template tmpl"),
    ],
)
def test_parent_must_be_a_root_or_a_sub_namespace(forest: Forest, parent: str, kind: str) -> None:
    verdict = create(ns("s", parent=parent), forest)

    assert denied(verdict, f"{parent} is not a valid parent namespace: it is {kind}")


# C5


def test_sub_namespaces_under_a_root_and_under_a_sub_namespace(forest: Forest) -> None:
    assert create(ns("s", parent="root1"), forest).allowed
    assert create(ns("s", parent="sub1-a"), forest).allowed
    assert update(by_name("sub2"), relabel(by_name("sub2"), parent="sub1-b"), forest).allowed


# C6


def test_a_root_with_children_must_stay_a_root(forest: Forest) -> None:
    verdict = update(by_name("root1"), relabel(by_name("root1"), type=None), forest)

    assert denied(verdict, "there are sub-namespaces under root1: sub1, sub2")
    assert denied(
        update(by_name("root1"), relabel(by_name("root1"), type="template"), forest),
        "sub-namespaces under root1",
    )
    assert update(by_name("leaf-root"), relabel(by_name("leaf-root"), type=None), forest).allowed


def test_a_root_with_children_can_be_grafted_under_another_root(forest: Forest) -> None:
    graft = relabel(by_name("root1"), type=None, parent="leaf-root")

    assert update(by_name("root1"), graft, forest).allowed


def test_a_template_with_instances_must_stay_a_template(forest: Forest) -> None:
    verdict = update(by_name("tmpl"), relabel(by_name("tmpl"), type=None), forest)

    assert denied(verdict, "namespaces referencing tmpl as their template: inst1, tmpl-child")
    allowed = update(by_name("lonely-tmpl"), relabel(by_name("lonely-tmpl"), type=None), forest)
    assert allowed.allowed


# C7


def test_a_sub_namespace_with_children_that_loses_its_parent_must_become_a_root(
    forest: Forest,
) -> None:
    cut = update(by_name("sub1"), relabel(by_name("sub1"), parent=None), forest)
    cut_to_root = update(
        by_name("sub1"), relabel(by_name("sub1"), parent=None, type="root"), forest
    )
    leaf_cut = update(by_name("sub2"), relabel(by_name("sub2"), parent=None), forest)

    assert denied(
        cut, "there are sub-namespaces under sub1: sub1-a, sub1-b", "=root in the same update"
    )
    assert cut_to_root.allowed
    assert leaf_cut.allowed


# C8


@pytest.mark.parametrize(
    ("name", "children"), [("root1", "sub1, sub2"), ("sub1", "sub1-a, sub1-b")]
)
def test_deleting_a_namespace_with_children_is_denied_unless_cascading(
    forest: Forest, name: str, children: str
) -> None:
    assert denied(delete(name, forest), f"{name} has sub-namespaces {children}")
    assert delete(name, forest, cascade=True).allowed


def test_deleting_a_template_with_instances_is_always_denied(forest: Forest) -> None:
    for cascade in (False, True):
        assert denied(
            delete("tmpl", forest, cascade=cascade),
            "namespaces inst1, tmpl-child use tmpl as their template",
        )


def test_deleting_namespaces_without_dependents_is_allowed(forest: Forest) -> None:
    for name in ("leaf-root", "sub2", "lonely-tmpl", "plain", "inst2"):
        assert delete(name, forest).allowed


def test_long_lists_of_children_are_cut() -> None:
    many = Forest.build(
        [ns("big", type="root"), *(ns(f"c{i:02}", parent="big") for i in range(13))]
    )

    verdict = review_namespace("DELETE", None, ns("big", type="root"), many, False)

    assert denied(verdict, "c00, c01", "c09 and 3 more")
    assert "c10" not in verdict.message


# Updates that do not touch the links


def test_unrelated_edits_are_allowed_even_in_a_broken_forest() -> None:
    broken = Forest.build([ns("a", parent="b"), ns("b", parent="a"), ns("c", template="gone")])
    for name, labels in (("a", {LABEL_PARENT: "b"}), ("c", {LABEL_TEMPLATE: "gone"})):
        old = {"metadata": {"name": name, "labels": labels}}
        new = {"metadata": {"name": name, "labels": {**labels, "team": "x"}}}

        assert review_namespace("UPDATE", new, old, broken, False).allowed


def test_fixing_a_broken_link_is_allowed() -> None:
    broken = Forest.build([ns("root", type="root"), ns("a", parent="b"), ns("b", parent="a")])

    assert update(ns("a", parent="b"), ns("a", parent="root"), broken).allowed


def test_unknown_operations_are_denied_and_missing_objects_are_errors(forest: Forest) -> None:
    assert denied(review_namespace("CONNECT", None, None, forest, False), "unknown operation")
    with pytest.raises(ValueError, match="UPDATE"):
        review_namespace("UPDATE", ns("a"), None, forest, False)


# D1 SubNamespace creation


def sub_create(obj: Obj, forest: Forest, policies: list[NamingPolicy] | None = None) -> Verdict:
    return review_subnamespace("CREATE", obj, None, forest, policies or [], False)


def test_subnamespace_in_a_plain_namespace_is_denied(forest: Forest) -> None:
    verdict = sub_create(sn("plain", "x"), forest)

    assert denied(
        verdict, "namespace plain is neither a root nor a sub namespace", "plain namespace"
    )
    assert denied(sub_create(sn("tmpl", "x"), forest), "it is a template namespace")
    assert denied(sub_create(sn("nowhere", "x"), forest), "namespace nowhere does not exist")


def test_subnamespace_in_a_root_or_a_sub_namespace_is_allowed(forest: Forest) -> None:
    assert sub_create(sn("root1", "x", {"team": "a"}, {"note": "b"}), forest).allowed
    assert sub_create(sn("sub1-a", "x"), forest).allowed


def apply_patch(obj: Obj, patch: tuple[dict[str, Any], ...]) -> Obj:
    """RFC 6902 "add" to object members: what the API server does with the mutating patch."""
    result = copy.deepcopy(obj)
    for operation in patch:
        assert operation["op"] == "add"
        *parents, last = operation["path"].lstrip("/").split("/")
        target = result
        for key in parents:
            target = target[key]
        target[last] = operation["value"]
    return result


def test_mutation_adds_the_finalizer_on_create() -> None:
    fresh = sn("root1", "x")
    with_other = sn("root1", "y")
    with_other["metadata"]["finalizers"] = ["example.com/keep"]

    assert apply_patch(fresh, mutate_subnamespace("CREATE", fresh).patch)["metadata"][
        "finalizers"
    ] == [FINALIZER]
    assert apply_patch(with_other, mutate_subnamespace("CREATE", with_other).patch)["metadata"][
        "finalizers"
    ] == ["example.com/keep", FINALIZER]


def test_mutation_leaves_other_requests_and_finalized_objects_alone() -> None:
    done = sn("root1", "x")
    done["metadata"]["finalizers"] = [FINALIZER]

    assert mutate_subnamespace("CREATE", done) == Verdict(True)
    assert mutate_subnamespace("UPDATE", sn("root1", "x")) == Verdict(True)


# D2


def test_finalizer_can_be_removed_with_an_update(forest: Forest) -> None:
    old = sn("plain", "x", {"bad": "~"})
    old["metadata"]["finalizers"] = [FINALIZER]
    new = sn("plain", "x", {"bad": "~"})

    assert review_subnamespace("UPDATE", new, old, forest, [], False).allowed


def deleting(annotated: bool) -> Obj:
    obj = sn("root1", "x")
    obj["metadata"]["deletionTimestamp"] = "2024-01-01T00:00:00Z"
    obj["metadata"]["finalizers"] = [FINALIZER]
    if annotated:
        obj["metadata"]["annotations"] = {ANNOTATION_ALLOW_CASCADING_DELETION: "true"}
    return obj


def test_a_cascading_deletion_under_way_keeps_its_annotation(forest: Forest) -> None:
    old = deleting(annotated=True)
    withdrawn = deleting(annotated=False)
    released = copy.deepcopy(old)
    released["metadata"]["finalizers"] = []

    verdict = review_subnamespace("UPDATE", withdrawn, old, forest, [], False)

    assert denied(verdict, "root1/x is being deleted with its subtree", "annotation stays")
    assert review_subnamespace("UPDATE", released, old, forest, [], False).allowed


def test_the_annotation_may_go_from_a_subnamespace_not_being_deleted(forest: Forest) -> None:
    old = deleting(annotated=True)
    del old["metadata"]["deletionTimestamp"]
    new = sn("root1", "x")

    assert review_subnamespace("UPDATE", new, old, forest, [], False).allowed


def test_spec_changes_are_validated_on_update(forest: Forest) -> None:
    old, new = sn("root1", "x"), sn("root1", "x", {"team": "~"})

    assert denied(review_subnamespace("UPDATE", new, old, forest, [], False), "spec.labels")


# D3


def test_invalid_spec_labels_and_annotations_are_denied_with_field_paths(forest: Forest) -> None:
    bad_value = sub_create(sn("root1", "x", {"team": "~"}), forest)
    bad_key = sub_create(sn("root1", "x", annotations={"foo-": "bar"}), forest)
    both = sub_create(sn("root1", "x", {"team": "~"}, {"foo-": "bar"}), forest)

    assert denied(bad_value, 'spec.labels: Invalid value: "~"')
    assert denied(bad_key, 'spec.annotations: Invalid value: "foo-"')
    assert denied(both, "[spec.labels: ", ", spec.annotations: ")
    assert both.message.endswith("]")


@pytest.mark.parametrize("name", ["a.b", "Upper", "x" * 64, "-x"])
def test_subnamespace_name_must_be_usable_as_a_namespace_name(forest: Forest, name: str) -> None:
    assert denied(sub_create(sn("root1", name), forest), f'metadata.name: Invalid value: "{name}"')


# Naming policies through the root of the tree


POLICIES = [NamingPolicy(root=r"^app-(?P<team>.*)", match=r"^app-${team}-.*")]


def test_naming_policies_apply_through_the_root() -> None:
    tree = Forest.build([ns("app-team1", type="root"), ns("app-team1-sub", parent="app-team1")])

    assert sub_create(sn("app-team1-sub", "app-team1-child"), tree, POLICIES).allowed
    verdict = sub_create(sn("app-team1-sub", "app-team2-child"), tree, POLICIES)
    assert denied(
        verdict, "cannot create sub-namespace app-team2-child in app-team1-sub", "app-team1"
    )


def test_a_subnamespace_needs_a_tree_that_reaches_a_root() -> None:
    broken = Forest.build(
        [
            ns("lost", parent="gone"),
            ns("p"),
            ns("under-plain", parent="p"),
            ns("a", parent="b"),
            ns("b", parent="a"),
        ]
    )

    assert denied(sub_create(sn("lost", "x"), broken), "root namespace of lost", "lost -> gone")
    assert denied(sub_create(sn("under-plain", "x"), broken), "its parents p do not lead to a root")
    assert denied(sub_create(sn("a", "x"), broken), "a -> b -> a")


# D4


def sub_delete(obj: Obj, forest: Forest, cascade: bool = False) -> Verdict:
    return review_subnamespace("DELETE", None, obj, forest, [], cascade)


def test_deleting_a_subnamespace_whose_namespace_has_children(forest: Forest) -> None:
    verdict = sub_delete(sn("root1", "sub1"), forest)

    assert denied(verdict, "SubNamespace root1/sub1", "namespace sub1", "sub1-a, sub1-b")
    assert sub_delete(sn("root1", "sub1"), forest, cascade=True).allowed
    assert sub_delete(sn("root1", "sub2"), forest).allowed


def test_deleting_a_subnamespace_ignores_namespaces_that_are_not_its_child(forest: Forest) -> None:
    assert sub_delete(sn("root2", "sub1"), forest).allowed
    assert sub_delete(sn("root1", "never-created"), forest).allowed


def test_other_subnamespace_operations_are_allowed(forest: Forest) -> None:
    assert review_subnamespace("CONNECT", None, None, forest, [], False).allowed


# Property: whatever a user asks, an allowed request keeps a sound forest sound.

NAMES = [f"n{i}" for i in range(6)]


@st.composite
def sound_forests(draw: st.DrawFn) -> list[Obj]:
    """Namespaces built in order, each linking only to earlier ones of a fitting kind."""
    made: list[Obj] = []
    for name in NAMES[: draw(st.integers(1, len(NAMES)))]:
        nodes = Forest.build(made)
        parents = [n.name for n in nodes if n.is_root or n.parent is not None]
        templates = [n.name for n in nodes if n.is_template]
        links: dict[str, str] = {}
        shape = draw(st.sampled_from(["plain", "root", "template", "sub", "instance"]))
        if shape == "sub" and parents:
            links["parent"] = draw(st.sampled_from(parents))
        else:
            if shape in ("root", "template"):
                links["type"] = shape
            if draw(st.booleans()) and templates:
                links["template"] = draw(st.sampled_from(templates))
        made.append(ns(name, **links))
    return made


_link = st.none() | st.sampled_from([*NAMES, "missing"])


@st.composite
def label_sets(draw: st.DrawFn) -> dict[str, str]:
    values = {
        "type": draw(st.none() | st.sampled_from(["root", "template", "bogus"])),
        "parent": draw(_link),
        "template": draw(_link),
    }
    return {link: value for link, value in values.items() if value is not None}


def unsound(namespaces: list[Obj]) -> list[str]:
    """What is wrong with a cluster, judged on the whole forest rather than on one change."""
    forest = Forest.build(namespaces)
    found = [problem.message for problem in forest.problems().values()]
    for node in forest:
        if node.type not in (None, "root", "template"):
            found.append(f"{node.name} has type {node.type}")
        if node.parent is not None:
            parent = forest.get(node.parent)
            if node.type or node.template:
                found.append(f"sub-namespace {node.name} has a type or template")
            if parent is not None and not (parent.is_root or parent.parent is not None):
                found.append(f"{node.name} has parent {parent.name} of kind {parent.kind}")
        elif node.template is not None:
            template = forest.get(node.template)
            if template is not None and not template.is_template:
                found.append(f"{node.name} uses {template.name} of kind {template.kind}")
    return found


@given(sound_forests(), st.data())
def test_allowed_updates_keep_the_forest_sound(namespaces: list[Obj], data: st.DataObject) -> None:
    assert unsound(namespaces) == []
    old = data.draw(st.sampled_from(namespaces))
    name = old["metadata"]["name"]
    new = ns(name, **data.draw(label_sets()))

    verdict = update(old, new, Forest.build(namespaces))

    after = [new if obj is old else obj for obj in namespaces]
    assert verdict.allowed == (unsound(after) == []), verdict.message


@given(sound_forests(), label_sets())
def test_allowed_creates_keep_the_forest_sound(
    namespaces: list[Obj], links: dict[str, str]
) -> None:
    new = ns("new", **links)

    verdict = create(new, Forest.build(namespaces))

    assert verdict.allowed == (unsound([*namespaces, new]) == []), verdict.message


@given(sound_forests(), st.data())
def test_allowed_deletes_keep_the_forest_sound(namespaces: list[Obj], data: st.DataObject) -> None:
    old = data.draw(st.sampled_from(namespaces))

    verdict = review_namespace("DELETE", None, old, Forest.build(namespaces), False)

    assert verdict.allowed == (unsound([obj for obj in namespaces if obj is not old]) == [])
