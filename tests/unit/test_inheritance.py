"""Metadata inheritance rules (DESIGN.md 4.2, ACCEPTANCE.md F) at the function level."""

from __future__ import annotations

from libaccurate.config import Config
from libaccurate.constants import (
    FIELD_MANAGER,
    LABEL_CREATED_BY,
    LABEL_PARENT,
    LABEL_TEMPLATE,
    LABEL_TYPE,
)
from libaccurate.forest import Forest
from libaccurate.inheritance import (
    Metadata,
    desired_metadata,
    labels_after,
    needs_write,
    owned_keys,
)
from libaccurate.ownership import OwnedKeys

CONFIG = Config(
    label_keys=("team", "foo.bar/baz", "*.glob/*", "*/*"),
    annotation_keys=("memo",),
    sub_namespace_label_keys=("env",),
    sub_namespace_annotation_keys=("note",),
)


def ns(name, labels=None, annotations=None, managed=None, terminating=False):
    meta = {"name": name, "labels": dict(labels or {}), "annotations": dict(annotations or {})}
    if managed is not None:
        meta["managedFields"] = managed
    if terminating:
        meta["deletionTimestamp"] = "t"
    return {"metadata": meta}


def applied(labels=(), annotations=(), manager=FIELD_MANAGER, operation="Apply", sub=None):
    entry = {
        "manager": manager,
        "operation": operation,
        "fieldsV1": {
            "f:metadata": {
                "f:labels": {f"f:{k}": {} for k in labels},
                "f:annotations": {f"f:{k}": {} for k in annotations},
            }
        },
    }
    if sub:
        entry["subresource"] = sub
    return entry


def desired(*namespaces, subs=None, config=CONFIG):
    by_name = {n["metadata"]["name"]: n for n in namespaces}
    return desired_metadata(Forest.build(namespaces), by_name, subs or {}, config)


ROOT = ns(
    "root",
    {
        LABEL_TYPE: "root",
        "team": "a",
        "foo.bar/baz": "b",
        "x.glob/y": "c",
        "other": "no",
        "do.not.match/glob.pattern": "no",
    },
    {"memo": "m", "other": "no"},
)


def test_a_sub_namespace_gets_matching_keys_and_parent_and_created_by_only():
    result = desired(ROOT, ns("sub", {LABEL_PARENT: "root"}))
    assert result["sub"].labels == {
        "team": "a",
        "foo.bar/baz": "b",
        "x.glob/y": "c",
        "do.not.match/glob.pattern": "no",  # matched by */* in this config
        LABEL_PARENT: "root",
        LABEL_CREATED_BY: "accurate",
    }
    assert result["sub"].annotations == {"memo": "m"}
    assert "root" not in result


def test_reserved_keys_never_flow_even_when_a_pattern_matches_them():
    result = desired(ROOT, ns("sub", {LABEL_PARENT: "root"}))
    assert LABEL_TYPE not in result["sub"].labels


def test_a_grandchild_gets_what_its_parent_will_have():
    stale_child = ns("child", {LABEL_PARENT: "root", "team": "old", "other": "x"})
    grandchild = ns("grandchild", {LABEL_PARENT: "child"})
    result = desired(ROOT, stale_child, grandchild)
    assert result["grandchild"].labels["team"] == "a"
    assert result["grandchild"].annotations == {"memo": "m"}


def test_a_key_the_parent_will_lose_is_not_passed_down():
    root = ns("root", {LABEL_TYPE: "root"})
    child = ns(
        "child", {LABEL_PARENT: "root", "team": "gone"}, managed=[applied(["team", LABEL_PARENT])]
    )
    grandchild = ns("grandchild", {LABEL_PARENT: "child", "team": "gone"})
    result = desired(root, child, grandchild)
    assert "team" not in result["grandchild"].labels


def test_a_key_set_by_hand_on_the_parent_is_passed_down():
    root = ns("root", {LABEL_TYPE: "root"})
    child = ns("child", {LABEL_PARENT: "root", "team": "mine"})
    result = desired(root, child, ns("grandchild", {LABEL_PARENT: "child"}))
    assert result["grandchild"].labels["team"] == "mine"


def test_subnamespace_spec_overrides_inherited_keys_when_its_pattern_matches():
    config = Config(label_keys=("team",), sub_namespace_label_keys=("team", "env"))
    spec = {"labels": {"team": "own", "env": "dev", "nope": "x"}, "annotations": {"note": "n"}}
    subs = {("root", "sub"): {"spec": spec}}
    result = desired(ROOT, ns("sub", {LABEL_PARENT: "root"}), subs=subs, config=config)
    assert result["sub"].labels["team"] == "own"
    assert result["sub"].labels["env"] == "dev"
    assert "nope" not in result["sub"].labels
    assert result["sub"].annotations == {}
    with_annotations = desired(ROOT, ns("sub", {LABEL_PARENT: "root"}), subs=subs)
    assert with_annotations["sub"].annotations == {"memo": "m", "note": "n"}


def test_instances_inherit_from_their_template_chain_without_parent_labels():
    base = ns("base", {LABEL_TYPE: "template", "team": "t"}, {"memo": "base"})
    middle = ns("middle", {LABEL_TYPE: "template", LABEL_TEMPLATE: "base", "foo.bar/baz": "m"})
    instance = ns("inst", {LABEL_TEMPLATE: "middle"})
    result = desired(base, middle, instance)
    assert result["inst"].labels == {"team": "t", "foo.bar/baz": "m"}
    assert result["inst"].annotations == {"memo": "base"}


def test_a_former_sub_namespace_keeps_its_created_by_label_as_an_instance():
    """Cut to a root, then given a template: the label the controller applied while it was a
    sub-namespace stays in its set, so the apply does not remove it; one the controller never
    owned is left to whoever set it."""
    template = ns("tmpl", {LABEL_TYPE: "template", "team": "t"})
    owned = [applied([LABEL_PARENT, LABEL_CREATED_BY, "team"])]
    former = ns("was-sub", {LABEL_CREATED_BY: "accurate", LABEL_TEMPLATE: "tmpl"}, managed=owned)
    by_hand = ns("by-hand", {LABEL_CREATED_BY: "someone", LABEL_TEMPLATE: "tmpl"})

    result = desired(template, former, by_hand)

    assert result["was-sub"].labels == {"team": "t", LABEL_CREATED_BY: "accurate"}
    assert result["by-hand"].labels == {"team": "t"}
    assert labels_after(former, result["was-sub"])[LABEL_CREATED_BY] == "accurate"


def test_broken_and_terminating_namespaces_get_nothing():
    result = desired(
        ns("a", {LABEL_PARENT: "b"}),
        ns("b", {LABEL_PARENT: "a"}),
        ns("orphan", {LABEL_PARENT: "missing"}),
        ROOT,
        ns("leaving", {LABEL_PARENT: "root"}, terminating=True),
        ns("below", {LABEL_PARENT: "leaving"}),
    )
    assert set(result) == {"below"}
    assert "team" not in result["below"].labels


def test_owned_keys_come_only_from_the_controllers_apply_entries():
    namespace = ns(
        "x",
        managed=[
            applied(["team"], ["memo"]),
            applied(["hand"], manager="kubectl", operation="Update"),
            applied(["upd"], operation="Update"),
            applied(["stat"], sub="status"),
        ],
    )
    owned = owned_keys(namespace)
    assert owned.labels == {"team"}
    assert owned.annotations == {"memo"}
    assert owned_keys(ns("y")).labels == frozenset()


def test_a_settled_namespace_needs_no_write():
    namespace = ns(
        "sub", {"team": "a", "hand": "x"}, {"memo": "m"}, managed=[applied(["team"], ["memo"])]
    )
    assert not needs_write(namespace, Metadata({"team": "a"}, {"memo": "m"}))


def test_a_write_is_due_for_a_changed_value_an_unowned_key_or_an_owned_key_to_drop():
    owned = [applied(["team"], [])]
    assert needs_write(ns("s", {"team": "b"}, managed=owned), Metadata({"team": "a"}, {}))
    assert needs_write(ns("s", {"team": "a"}), Metadata({"team": "a"}, {}))
    assert needs_write(ns("s", {"team": "a"}, managed=owned), Metadata({}, {}))
    assert needs_write(ns("s", {"team": "a"}, managed=owned), Metadata({"team": "a"}, {"m": "1"}))


def test_parent_and_created_by_set_by_an_update_need_no_write_when_their_values_are_right():
    labels = {LABEL_PARENT: "root", LABEL_CREATED_BY: "accurate"}
    by_update = [applied(list(labels), operation="Update")]
    assert not needs_write(ns("s", labels, managed=by_update), Metadata(labels, {}))
    assert not needs_write(ns("s", labels), Metadata(labels, {}))


def test_parent_and_created_by_unowned_still_get_a_write_for_a_wrong_value_or_another_key():
    labels = {LABEL_PARENT: "root", LABEL_CREATED_BY: "accurate"}
    grafted = ns("s", {LABEL_PARENT: "root"})
    assert needs_write(grafted, Metadata(labels, {}))
    edited = ns("s", {**labels, LABEL_CREATED_BY: "me"})
    assert needs_write(edited, Metadata(labels, {}))
    assert needs_write(ns("s", {**labels, "team": "a"}), Metadata({**labels, "team": "a"}, {}))


def test_an_owned_created_by_no_longer_wanted_is_still_removed():
    owned = [applied([LABEL_CREATED_BY])]
    instance = ns("i", {LABEL_CREATED_BY: "accurate", LABEL_TEMPLATE: "t"}, managed=owned)
    assert needs_write(instance, Metadata({}, {}))


def test_only_the_labels_parent_and_created_by_may_stay_unowned():
    assert needs_write(
        ns("s", annotations={LABEL_PARENT: "root"}), Metadata({}, {LABEL_PARENT: "root"})
    )


# Keys a Go Accurate older than v1.4 wrote by update (libaccurate/ownership.py).


def by_go(labels=(), annotations=()):
    return applied(labels, annotations, operation="Update")


def test_keys_the_go_controller_wrote_by_update_are_taken_over_once():
    child = ns(
        "child",
        {LABEL_PARENT: "root", LABEL_CREATED_BY: "accurate", "team": "a", "hand": "x"},
        {"memo": "m"},
        managed=[by_go([LABEL_PARENT, LABEL_CREATED_BY, "team", "hand"], ["memo"])],
    )
    root = ns("root", {LABEL_TYPE: "root", "team": "a"}, {"memo": "m"})
    wanted = desired(root, child)["child"]
    # Only what the patterns keep; "hand" matches none, parent and created-by are never removed.
    assert wanted.takeover == OwnedKeys(frozenset({"team"}), frozenset({"memo"}))
    assert needs_write(child, wanted)
    after = ns(
        "child",
        {LABEL_PARENT: "root", LABEL_CREATED_BY: "accurate", "team": "a"},
        {"memo": "m"},
        managed=[applied(["team"], ["memo"]), by_go([LABEL_PARENT, LABEL_CREATED_BY, "hand"])],
    )
    assert desired(root, after)["child"].takeover is None
    assert not needs_write(after, desired(root, after)["child"])


def test_a_key_the_go_controller_wrote_goes_down_the_tree_when_the_root_lost_it():
    root = ns("root", {LABEL_TYPE: "root"})
    child = ns("child", {LABEL_PARENT: "root", "team": "a"}, managed=[by_go(["team"])])
    grandchild = ns("grandchild", {LABEL_PARENT: "child", "team": "a"}, managed=[by_go(["team"])])
    result = desired(root, child, grandchild)
    for name in ("child", "grandchild"):
        assert "team" not in result[name].labels
        assert result[name].takeover == OwnedKeys(frozenset({"team"}))
    assert "team" not in labels_after(child, result["child"])


def test_spec_keys_are_taken_over_on_sub_namespaces_only():
    spec_labels = {LABEL_PARENT: "root", "env": "dev"}
    sub = ns("sub", spec_labels, managed=[by_go(["env"])])
    assert desired(ROOT, sub)["sub"].takeover == OwnedKeys(frozenset({"env"}))
    instance = ns("instance", {LABEL_TEMPLATE: "root", "env": "dev"}, managed=[by_go(["env"])])
    template = ns("root", {LABEL_TYPE: "template"})
    assert desired(template, instance)["instance"].takeover is None
