"""The reconcile planner against ACCEPTANCE.md E, F and G, at the rule level.

Each scenario builds a cluster in the in-memory world, plans, applies the plan the way the API
server would, and looks at what a user would see: namespaces, labels, objects, statuses.
"""

from __future__ import annotations

from typing import Any

import pytest

from libaccurate.actions import (
    AddFinalizer,
    AnnotateObject,
    ApplyNamespaceMetadata,
    Condition,
    CreateNamespace,
    CreateObject,
    DeleteNamespace,
    DeleteObject,
    EmitEvent,
    PatchSubNamespaceStatus,
    RemoveFinalizer,
    ReplaceObject,
    SubNamespaceStatus,
)
from libaccurate.config import Config, GroupVersionKind
from libaccurate.constants import (
    ANNOTATION_FROM,
    ANNOTATION_GENERATED,
    ANNOTATION_PROPAGATE,
    ANNOTATION_PROPAGATE_GENERATED,
    ANNOTATION_SOURCE_HASH,
    CONDITION_READY,
    CONDITION_STALLED,
    FINALIZER,
    LABEL_CREATED_BY,
    LABEL_PARENT,
    LABEL_TEMPLATE,
    LABEL_TYPE,
)
from libaccurate.planner import plan
from tests.unit.planner_world import (
    ROLE,
    ROLE_BINDING,
    SECRET,
    SERVICE_ACCOUNT,
    World,
    settle,
)

WIDGET = GroupVersionKind("example.com", "v1", "Widget")
CONFIG = Config(
    label_keys=("team", "foo.bar/baz", "*.glob/*"),
    annotation_keys=("team", "foo.bar/baz", "*.glob/*"),
    sub_namespace_label_keys=("env", "team"),
    sub_namespace_annotation_keys=("note",),
    watches=(ROLE, ROLE_BINDING, SECRET, SERVICE_ACCOUNT, WIDGET),
    propagate_label_key_excludes=("internal/*",),
    propagate_annotation_key_excludes=("*.kubernetes.io/*",),
)


def make_world(**kwargs) -> World:
    world = World(config=CONFIG, **kwargs)
    world.add_namespace("root1", {LABEL_TYPE: "root"})
    return world


def ns_labels(world: World, name: str) -> dict:
    return world.namespaces[name]["metadata"].get("labels") or {}


def ns_annotations(world: World, name: str) -> dict:
    return world.namespaces[name]["metadata"].get("annotations") or {}


def condition(world: World, parent: str, name: str, type_: str) -> dict[str, Any]:
    """The condition of that type, or {} when the SubNamespace does not have it."""
    status = world.subnamespaces[(parent, name)].get("status") or {}
    return next((c for c in status.get("conditions") or () if c["type"] == type_), {})


def ready_of(status: SubNamespaceStatus) -> Condition:
    ready = status.condition(CONDITION_READY)
    assert ready is not None
    return ready


def role(namespace, name="admin", mode="create", rules=None, **meta):
    annotations = {ANNOTATION_PROPAGATE: mode} if mode else {}
    annotations.update(meta.pop("annotations", {}))
    return {
        "metadata": {"namespace": namespace, "name": name, "annotations": annotations, **meta},
        "rules": rules if rules is not None else [{"verbs": ["get"], "resources": ["pods"]}],
    }


def secret(namespace, data, mode="update", name="s"):
    return {
        "metadata": {
            "namespace": namespace,
            "name": name,
            "annotations": {ANNOTATION_PROPAGATE: mode},
        },
        "data": data,
    }


def tree(world: World, *pairs: tuple[str, str]) -> None:
    """Sub-namespaces made through SubNamespaces and settled, as the controller would."""
    for parent, name in pairs:
        world.add_subnamespace(parent, name)
    settle(world)


# --- E. Sub-namespace lifecycle --------------------------------------------------------------


class TestLifecycle:
    def test_e1_a_subnamespace_creates_its_namespace_and_reports_ready(self):
        world = make_world()
        world.add_subnamespace("root1", "sub1")
        settle(world)
        assert ns_labels(world, "sub1") == {LABEL_PARENT: "root1", LABEL_CREATED_BY: "accurate"}
        status = world.subnamespaces[("root1", "sub1")]["status"]
        assert status["observedGeneration"] == 1
        assert condition(world, "root1", "sub1", CONDITION_STALLED) == {}
        assert condition(world, "root1", "sub1", CONDITION_READY)["status"] == "True"

    def test_e1_a_settled_subnamespace_plans_nothing(self):
        world = make_world()
        tree(world, ("root1", "sub1"))
        assert plan(world.snapshot()).actions == ()

    def test_observed_generation_follows_the_spec(self):
        world = make_world()
        tree(world, ("root1", "sub1"))
        world.subnamespaces[("root1", "sub1")]["metadata"]["generation"] = 2
        result = plan(world.snapshot())
        assert result.statuses[("root1", "sub1")].observed_generation == 2
        assert [type(a) for a in result.actions] == [PatchSubNamespaceStatus]

    def test_e2_deleting_the_subnamespace_deletes_the_namespace_then_lets_go(self):
        world = make_world()
        tree(world, ("root1", "sub1"))
        world.subnamespaces[("root1", "sub1")]["metadata"]["deletionTimestamp"] = "now"
        result = plan(world.snapshot())
        delete, release = result.steps
        assert isinstance(delete.action, DeleteNamespace)
        assert isinstance(release.action, RemoveFinalizer)
        assert release.after == (delete.index,)
        assert release.stage > delete.stage
        world.apply(result)
        assert "sub1" not in world.namespaces
        assert ("root1", "sub1") not in world.subnamespaces

    def test_e2_a_moved_subnamespace_is_let_go_before_anything_else_is_sent(self):
        """``sub move`` as the Go plugin does it: the namespace relabelled under another root,
        then the old SubNamespace deleted. Its finalizer comes off in the first stage, before
        the copies from the new parent, so that a script checking that it is gone finds it
        gone while those are still being written."""
        world = make_world()
        world.add_namespace("root2", {LABEL_TYPE: "root"})
        world.add_object(SECRET, secret("root2", {"k": "djE="}))
        world.add_object(ROLE, role("root2"))
        tree(world, ("root1", "sub1"))
        world.label_by_hand("sub1", LABEL_PARENT, "root2")
        world.subnamespaces[("root1", "sub1")]["metadata"]["deletionTimestamp"] = "now"
        first, *rest = plan(world.snapshot()).stages()
        assert [type(step.action) for step in first] == [RemoveFinalizer]
        copies = [s.action for stage in rest for s in stage if isinstance(s.action, CreateObject)]
        assert {copy.namespace for copy in copies} == {"sub1"}
        assert len(copies) == 2

    def test_e3_a_conflicting_namespace_is_never_touched(self):
        world = make_world()
        world.add_namespace("sub1", {"mine": "yes"})
        world.add_subnamespace("root1", "sub1")
        before = dict(world.namespaces["sub1"]["metadata"])
        settle(world)
        assert world.namespaces["sub1"]["metadata"] == before
        stalled = condition(world, "root1", "sub1", CONDITION_STALLED)
        assert (stalled["status"], stalled["reason"]) == ("True", "Conflict")
        assert condition(world, "root1", "sub1", CONDITION_READY)["status"] == "False"

    def test_e3_deleting_a_conflicting_subnamespace_leaves_the_namespace_alone(self):
        world = make_world()
        world.add_namespace("sub1")
        world.add_subnamespace("root1", "sub1", deleting=True)
        result = plan(world.snapshot())
        assert [type(a) for a in result.actions] == [RemoveFinalizer]

    def test_e3_when_the_other_namespace_goes_the_subnamespace_takes_over(self):
        world = make_world()
        world.add_namespace("sub1")
        world.add_subnamespace("root1", "sub1")
        settle(world)
        del world.namespaces["sub1"]
        settle(world)
        assert ns_labels(world, "sub1")[LABEL_PARENT] == "root1"
        assert condition(world, "root1", "sub1", CONDITION_STALLED) == {}
        assert condition(world, "root1", "sub1", CONDITION_READY)["status"] == "True"

    def test_e4_two_subnamespaces_with_one_name_the_older_wins(self):
        world = make_world()
        world.add_namespace("root2", {LABEL_TYPE: "root"})
        world.add_subnamespace("root2", "dup", created="2024-01-01T00:00:00Z")
        world.add_subnamespace("root1", "dup", created="2024-01-02T00:00:00Z")
        result = plan(world.snapshot())
        creates = [a for a in result.actions if isinstance(a, CreateNamespace)]
        assert [c.labels[LABEL_PARENT] for c in creates] == ["root2"]
        assert result.statuses[("root1", "dup")].condition(CONDITION_STALLED) is not None
        settle(world)
        world.subnamespaces[("root2", "dup")]["metadata"]["deletionTimestamp"] = "now"
        settle(world)
        assert ns_labels(world, "dup")[LABEL_PARENT] == "root1"
        assert condition(world, "root1", "dup", CONDITION_STALLED) == {}

    def test_e5_a_deleted_sub_namespace_is_recreated(self):
        world = make_world()
        tree(world, ("root1", "sub1"))
        del world.namespaces["sub1"]
        assert [type(a) for a in plan(world.snapshot()).actions] == [CreateNamespace]
        settle(world)
        assert "sub1" in world.namespaces

    def test_a_missing_finalizer_is_added_back(self):
        world = make_world()
        tree(world, ("root1", "sub1"))
        world.subnamespaces[("root1", "sub1")]["metadata"]["finalizers"] = []
        result = plan(world.snapshot())
        assert [type(a) for a in result.actions] == [AddFinalizer]
        world.apply(result)
        assert world.subnamespaces[("root1", "sub1")]["metadata"]["finalizers"] == [FINALIZER]

    def test_deletion_without_our_finalizer_waits_for_others(self):
        world = make_world()
        tree(world, ("root1", "sub1"))
        meta = world.subnamespaces[("root1", "sub1")]["metadata"]
        meta.update(deletionTimestamp="now", finalizers=["other"])
        assert plan(world.snapshot()).actions == ()

    def test_a_terminating_namespace_is_waited_for_not_deleted_again(self):
        world = make_world()
        tree(world, ("root1", "sub1"))
        world.namespaces["sub1"]["metadata"]["deletionTimestamp"] = "now"
        live = plan(world.snapshot())
        ready = ready_of(live.statuses[("root1", "sub1")])
        assert (ready.status, ready.reason) == ("False", "NamespaceTerminating")
        world.subnamespaces[("root1", "sub1")]["metadata"]["deletionTimestamp"] = "now"
        assert [type(a) for a in plan(world.snapshot()).actions] == [RemoveFinalizer]

    def test_subnamespaces_in_a_terminating_namespace_create_nothing(self):
        world = make_world()
        world.namespaces["root1"]["metadata"]["deletionTimestamp"] = "now"
        world.add_subnamespace("root1", "sub1")
        result = plan(world.snapshot())
        assert not [a for a in result.actions if isinstance(a, CreateNamespace)]
        assert ready_of(result.statuses[("root1", "sub1")]).status == "False"

    def test_a_failed_namespace_creation_skips_what_goes_into_it(self):
        world = make_world()
        world.add_object(ROLE, role("root1"))
        world.add_subnamespace("root1", "sub1")
        result = plan(world.snapshot())
        world.add_namespace("sub1", {"taken": "meanwhile"})
        world.apply(result)
        assert world.find(ROLE, "sub1", "admin") is None
        assert ns_labels(world, "sub1") == {"taken": "meanwhile"}
        assert [reason for _, reason in world.failures] == ["Conflict"]


# --- F. Metadata inheritance ----------------------------------------------------------------


def inheritance_world() -> World:
    world = make_world()
    meta = world.namespaces["root1"]["metadata"]
    meta["labels"].update(
        {"team": "a", "foo.bar/baz": "b", "x.glob/y": "c", "do.not.match/glob.pattern": "d"}
    )
    meta["annotations"] = {"team": "a", "unrelated": "u"}
    return world


class TestInheritance:
    def test_f1_matching_labels_and_annotations_reach_the_child_and_nothing_else(self):
        world = inheritance_world()
        tree(world, ("root1", "sub1"))
        assert ns_labels(world, "sub1") == {
            "team": "a",
            "foo.bar/baz": "b",
            "x.glob/y": "c",
            LABEL_PARENT: "root1",
            LABEL_CREATED_BY: "accurate",
        }
        assert ns_annotations(world, "sub1") == {"team": "a"}

    def test_f2_changes_and_removals_on_the_root_reach_every_level_in_one_pass(self):
        world = inheritance_world()
        tree(world, ("root1", "sub1"), ("sub1", "sub2"))
        assert ns_labels(world, "sub2")["team"] == "a"
        world.label_by_hand("root1", "team", "z")
        world.label_by_hand("root1", "foo.bar/baz", None)
        world.apply(plan(world.snapshot()))
        for name in ("sub1", "sub2"):
            assert ns_labels(world, name)["team"] == "z"
            assert "foo.bar/baz" not in ns_labels(world, name)
        assert plan(world.snapshot()).actions == ()

    def test_f3_subnamespace_spec_labels_land_and_override(self):
        world = inheritance_world()
        world.add_subnamespace(
            "root1", "sub1", {"env": "dev", "team": "own", "nope": "x"}, {"note": "n", "no": "x"}
        )
        settle(world)
        assert ns_labels(world, "sub1")["env"] == "dev"
        assert ns_labels(world, "sub1")["team"] == "own"
        assert "nope" not in ns_labels(world, "sub1")
        assert ns_annotations(world, "sub1") == {"team": "a", "note": "n"}
        world.subnamespaces[("root1", "sub1")]["spec"]["labels"] = {"env": "prod"}
        settle(world)
        assert ns_labels(world, "sub1")["env"] == "prod"
        assert ns_labels(world, "sub1")["team"] == "a"

    def test_f4_moving_switches_to_the_new_parents_values(self):
        world = inheritance_world()
        world.add_namespace("root2", {LABEL_TYPE: "root", "team": "b"})
        tree(world, ("root1", "sub1"), ("sub1", "sub2"))
        world.label_by_hand("sub1", LABEL_PARENT, "root2")
        assert settle(world) == 1
        assert ns_labels(world, "sub1")["team"] == "b"
        assert ns_labels(world, "sub2")["team"] == "b"
        assert "foo.bar/baz" not in ns_labels(world, "sub1")

    def test_f5_a_label_set_by_hand_is_kept_when_the_template_lacks_it(self):
        world = make_world()
        world.add_namespace("tmpl", {LABEL_TYPE: "template", "foo.bar/baz": "t"})
        world.add_namespace("teamroot", {LABEL_TYPE: "root", LABEL_TEMPLATE: "tmpl", "team": "x"})
        settle(world)
        assert ns_labels(world, "teamroot")["team"] == "x"
        assert ns_labels(world, "teamroot")["foo.bar/baz"] == "t"

    def test_f5_a_hand_edit_of_an_inherited_key_is_reverted(self):
        world = inheritance_world()
        tree(world, ("root1", "sub1"))
        world.label_by_hand("sub1", "team", "hijack")
        settle(world)
        assert ns_labels(world, "sub1")["team"] == "a"

    def test_f6_settled_namespaces_keep_their_resource_versions(self):
        world = inheritance_world()
        tree(world, ("root1", "sub1"), ("sub1", "sub2"))
        versions = {n: o["metadata"]["resourceVersion"] for n, o in world.namespaces.items()}
        for _ in range(3):
            result = plan(world.snapshot())
            assert result.actions == ()
            world.apply(result)
        assert versions == {
            n: o["metadata"]["resourceVersion"] for n, o in world.namespaces.items()
        }

    def test_f7_template_chains_give_keys_from_every_level(self):
        world = make_world()
        world.add_namespace("base", {LABEL_TYPE: "template", "team": "t"})
        world.add_namespace(
            "mid", {LABEL_TYPE: "template", LABEL_TEMPLATE: "base", "x.glob/a": "m"}
        )
        world.add_namespace("inst", {LABEL_TEMPLATE: "mid"})
        settle(world)
        assert ns_labels(world, "inst") == {LABEL_TEMPLATE: "mid", "team": "t", "x.glob/a": "m"}

    def test_a_cut_namespace_keeps_its_labels(self):
        world = inheritance_world()
        tree(world, ("root1", "sub1"))
        world.label_by_hand("sub1", LABEL_PARENT, None)
        world.label_by_hand("sub1", LABEL_TYPE, "root")
        before = world.namespaces["sub1"]["metadata"]["resourceVersion"]
        settle(world)
        assert ns_labels(world, "sub1")["team"] == "a"
        assert world.namespaces["sub1"]["metadata"]["resourceVersion"] == before

    def test_a_takeover_from_the_go_controller_writes_nothing(self):
        world = inheritance_world()
        world.add_namespace(
            "sub1",
            applied={
                "team": "a",
                "foo.bar/baz": "b",
                "x.glob/y": "c",
                LABEL_PARENT: "root1",
                LABEL_CREATED_BY: "accurate",
            },
        )
        world.namespaces["sub1"]["metadata"]["annotations"] = {"team": "a"}
        world.namespaces["sub1"]["metadata"]["managedFields"][0]["fieldsV1"]["f:metadata"][
            "f:annotations"
        ] = {"f:team": {}}
        assert [
            a for a in plan(world.snapshot()).actions if isinstance(a, ApplyNamespaceMetadata)
        ] == []

    def test_a_takeover_from_a_go_controller_that_labelled_by_update_writes_no_namespace(self):
        world = make_world()
        world.add_namespace("sub1", {LABEL_PARENT: "root1", LABEL_CREATED_BY: "accurate"})
        world.add_namespace("sub2", {LABEL_PARENT: "sub1", LABEL_CREATED_BY: "accurate"})
        assert [
            a for a in plan(world.snapshot()).actions if isinstance(a, ApplyNamespaceMetadata)
        ] == []

    def test_an_unowned_inherited_key_is_still_taken_over_with_parent_and_created_by(self):
        world = inheritance_world()
        world.add_namespace(
            "sub1",
            {
                "team": "a",
                "foo.bar/baz": "b",
                "x.glob/y": "c",
                LABEL_PARENT: "root1",
                LABEL_CREATED_BY: "accurate",
            },
            {"team": "a"},
        )
        settle(world)
        world.namespaces["root1"]["metadata"]["labels"].pop("team")
        settle(world)
        assert "team" not in ns_labels(world, "sub1")
        assert ns_labels(world, "sub1")[LABEL_CREATED_BY] == "accurate"

    def test_problems_are_reported_and_get_nothing(self):
        world = inheritance_world()
        world.add_namespace("a", {LABEL_PARENT: "b"})
        world.add_namespace("b", {LABEL_PARENT: "a"})
        world.add_namespace("orphan", {LABEL_PARENT: "gone"})
        world.add_object(ROLE, role("gone-is-not-here", mode="update"))
        result = plan(world.snapshot())
        assert set(result.problems) == {"a", "b", "orphan"}
        assert result.problems["orphan"].reason == "MissingReference"
        assert result.actions == ()

    def test_a_subnamespace_under_a_broken_chain_is_not_ready(self):
        world = make_world()
        world.add_namespace("a", {LABEL_PARENT: "b"})
        world.add_namespace("b", {LABEL_PARENT: "a"})
        world.add_subnamespace("a", "child")
        result = plan(world.snapshot())
        ready = ready_of(result.statuses[("a", "child")])
        assert (ready.status, ready.reason) == ("False", "Cycle")
        create = next(a for a in result.actions if isinstance(a, CreateNamespace))
        assert create.labels == {LABEL_PARENT: "a", LABEL_CREATED_BY: "accurate"}


# --- G. Resource propagation ----------------------------------------------------------------


class TestPropagation:
    def test_g1_create_mode_reaches_every_depth_with_the_immediate_parent_as_from(self):
        world = make_world()
        world.add_object(ROLE, role("root1"))
        world.add_object(ROLE, role("root1", name="plain", mode=None))
        world.add_subnamespace("root1", "sub1")
        result = plan(world.snapshot())
        world.apply(result)
        world.add_subnamespace("sub1", "sub2")
        world.apply(plan(world.snapshot()))
        for namespace, origin in (("sub1", "root1"), ("sub2", "sub1")):
            copy_ = world.obj(ROLE, namespace, "admin")
            assert copy_["metadata"]["annotations"][ANNOTATION_FROM] == origin
            assert copy_["metadata"]["labels"][LABEL_CREATED_BY] == "accurate"
            assert world.find(ROLE, namespace, "plain") is None

    def test_g1_siblings_get_equal_copies_in_their_own_namespaces(self):
        world = make_world()
        world.add_object(ROLE, role("root1", mode="update"))
        tree(world, ("root1", "sub1"), ("root1", "sub2"))
        one, two = world.obj(ROLE, "sub1", "admin"), world.obj(ROLE, "sub2", "admin")
        assert (one["metadata"]["namespace"], two["metadata"]["namespace"]) == ("sub1", "sub2")
        assert one["metadata"]["annotations"] == two["metadata"]["annotations"]
        assert one["rules"] == two["rules"]

    def test_g1_a_new_subtree_is_filled_in_one_pass(self):
        world = make_world()
        world.add_object(ROLE, role("root1"))
        world.add_subnamespace("root1", "sub1")
        world.add_namespace("sub2", {LABEL_PARENT: "sub1"})
        world.apply(plan(world.snapshot()))
        assert (
            world.obj(ROLE, "sub2", "admin")["metadata"]["annotations"][ANNOTATION_FROM] == "sub1"
        )
        assert plan(world.snapshot()).changes() == ()

    def test_g2_create_mode_copy_comes_back_keeps_edits_and_outlives_its_source(self):
        world = make_world()
        world.add_object(ROLE, role("root1"))
        tree(world, ("root1", "sub1"))
        del world.objects[(ROLE, "sub1", "admin")]
        settle(world)
        assert world.find(ROLE, "sub1", "admin") is not None
        world.obj(ROLE, "sub1", "admin")["rules"].append({"verbs": ["list"]})
        assert plan(world.snapshot()).actions == ()
        del world.objects[(ROLE, "root1", "admin")]
        settle(world)
        assert len(world.obj(ROLE, "sub1", "admin")["rules"]) == 2

    def test_g3_update_mode_follows_the_source_and_reverts_edits(self):
        world = make_world()
        world.add_object(SECRET, secret("root1", {"a": "MQ==", "b": "Mg=="}))
        tree(world, ("root1", "sub1"), ("sub1", "sub2"))
        assert world.obj(SECRET, "sub2", "s")["data"] == {"a": "MQ==", "b": "Mg=="}
        world.obj(SECRET, "root1", "s")["data"] = {"a": "Mw==", "c": "NA=="}
        world.apply(plan(world.snapshot()))
        for namespace in ("sub1", "sub2"):
            assert world.obj(SECRET, namespace, "s")["data"] == {"a": "Mw==", "c": "NA=="}
        world.obj(SECRET, "sub2", "s")["data"]["a"] = "ZWRpdA=="
        settle(world)
        assert world.obj(SECRET, "sub2", "s")["data"]["a"] == "Mw=="
        del world.objects[(SECRET, "root1", "s")]
        world.apply(plan(world.snapshot()))
        assert world.find(SECRET, "sub1", "s") is None
        assert world.find(SECRET, "sub2", "s") is None

    def test_g3_server_defaults_on_copies_are_not_differences(self):
        world = make_world()
        world.add_object(SECRET, secret("root1", {}))
        binding: dict[str, Any] = {
            "metadata": {
                "namespace": "root1",
                "name": "b",
                "annotations": {ANNOTATION_PROPAGATE: "update"},
            },
            "roleRef": {"kind": "Role", "name": "admin", "apiGroup": "rbac.authorization.k8s.io"},
            "subjects": [{"kind": "User", "name": "alice"}],
        }
        world.objects.clear()
        world.add_object(SECRET, secret("root1", {}))
        world.objects[(ROLE_BINDING, "root1", "b")] = {
            **binding,
            "metadata": {**binding["metadata"], "uid": "u", "resourceVersion": "1"},
        }
        tree(world, ("root1", "sub1"))
        assert world.obj(ROLE_BINDING, "sub1", "b")["subjects"][0]["apiGroup"]
        assert "data" not in world.obj(SECRET, "sub1", "s")
        assert plan(world.snapshot()).actions == ()

    def test_g4_a_rule_removed_from_the_source_is_removed_from_copies(self):
        world = make_world()
        rules = [{"verbs": ["get"]}, {"verbs": ["delete"]}]
        world.add_object(ROLE, role("root1", mode="update", rules=rules))
        tree(world, ("root1", "sub1"), ("sub1", "sub2"))
        world.obj(ROLE, "root1", "admin")["rules"] = [{"verbs": ["get"]}]
        settle(world)
        assert world.obj(ROLE, "sub2", "admin")["rules"] == [{"verbs": ["get"]}]

    def test_g4_a_removed_field_reaches_copies_through_the_hash(self):
        world = make_world()
        world.add_object(WIDGET, role("root1", mode="update") | {"spec": {"a": 1, "b": 2}})
        tree(world, ("root1", "sub1"))
        world.obj(WIDGET, "root1", "admin")["spec"] = {"a": 1}
        result = plan(world.snapshot())
        assert [type(a) for a in result.actions] == [ReplaceObject]
        world.apply(result)
        assert world.obj(WIDGET, "sub1", "admin")["spec"] == {"a": 1}

    def test_a_copy_without_a_hash_made_by_the_go_controller_is_replaced_once(self):
        world = make_world()
        world.add_object(ROLE, role("root1", mode="update"))
        tree(world, ("root1", "sub1"))
        copy_ = world.obj(ROLE, "sub1", "admin")
        del copy_["metadata"]["annotations"][ANNOTATION_SOURCE_HASH]
        assert settle(world) == 1
        assert ANNOTATION_SOURCE_HASH in world.obj(ROLE, "sub1", "admin")["metadata"]["annotations"]

    def test_hncs_keys_leave_copies_in_one_replacement_and_do_not_flap(self):
        """A copy made when copies still carried HNC's exception annotation (issue 27): one
        in-place replacement drops it, then a settled tree sees no write, through two levels."""
        world = make_world()
        hnc = "propagate.hnc.x-k8s.io/treeSelect"
        world.add_object(ROLE, role("root1", mode="update", annotations={hnc: "sub1"}))
        tree(world, ("root1", "sub1"), ("sub1", "sub2"))
        assert hnc not in world.obj(ROLE, "sub2", "admin")["metadata"]["annotations"]
        uid = world.obj(ROLE, "sub1", "admin")["metadata"]["uid"]
        stale = world.obj(ROLE, "sub1", "admin")["metadata"]["annotations"]
        stale[hnc] = "sub1"
        stale[ANNOTATION_SOURCE_HASH] = "made-before"
        assert settle(world) == 1
        kept = world.obj(ROLE, "sub1", "admin")["metadata"]
        assert (kept["uid"], hnc in kept["annotations"]) == (uid, False)
        assert plan(world.snapshot()).actions == ()

    def test_g5_excluded_labels_and_annotations_are_not_copied(self):
        world = make_world()
        source = role(
            "root1",
            labels={"internal/x": "1", "keep": "2"},
            annotations={"kubectl.kubernetes.io/last-applied-configuration": "{}", "k": "v"},
        )
        world.add_object(ROLE, source)
        tree(world, ("root1", "sub1"))
        meta = world.obj(ROLE, "sub1", "admin")["metadata"]
        assert meta["labels"] == {"keep": "2", LABEL_CREATED_BY: "accurate"}
        assert "kubectl.kubernetes.io/last-applied-configuration" not in meta["annotations"]
        assert meta["annotations"]["k"] == "v"

    def test_g6_templates_pass_objects_down_and_unsetting_removes_update_copies(self):
        world = make_world()
        world.add_namespace("base", {LABEL_TYPE: "template"})
        world.add_namespace("mid", {LABEL_TYPE: "template", LABEL_TEMPLATE: "base"})
        world.add_namespace("inst", {LABEL_TEMPLATE: "mid"})
        world.add_object(ROLE, role("base", name="c", mode="create"))
        world.add_object(ROLE, role("base", name="u", mode="update"))
        settle(world)
        assert world.obj(ROLE, "inst", "u")["metadata"]["annotations"][ANNOTATION_FROM] == "mid"
        world.label_by_hand("inst", LABEL_TEMPLATE, None)
        settle(world)
        assert world.find(ROLE, "inst", "u") is None
        assert world.find(ROLE, "inst", "c") is not None

    def test_g7_moving_swaps_copies_and_cutting_removes_them(self):
        world = make_world()
        world.add_namespace("root2", {LABEL_TYPE: "root"})
        world.add_object(ROLE, role("root1", name="one", mode="update"))
        world.add_object(ROLE, role("root2", name="two", mode="update"))
        world.add_object(ROLE, role("root1", name="shared", mode="update", rules=[]))
        world.add_object(ROLE, role("root2", name="shared", mode="update"))
        tree(world, ("root1", "sub1"), ("sub1", "sub2"))
        world.label_by_hand("sub1", LABEL_PARENT, "root2")
        assert settle(world) == 1
        for namespace in ("sub1", "sub2"):
            assert world.find(ROLE, namespace, "one") is None
            assert world.find(ROLE, namespace, "two") is not None
            assert world.obj(ROLE, namespace, "shared")["rules"] == [
                {"verbs": ["get"], "resources": ["pods"]}
            ]
        world.label_by_hand("sub1", LABEL_PARENT, None)
        world.label_by_hand("sub1", LABEL_TYPE, "root")
        settle(world)
        assert world.find(ROLE, "sub1", "two") is None
        assert world.find(ROLE, "sub2", "two") is None

    def test_g8_update_mode_replaces_a_user_object_with_a_warning(self):
        world = make_world()
        tree(world, ("root1", "sub1"))
        world.add_object(ROLE, role("sub1", mode=None, rules=[{"verbs": ["*"]}]))
        world.add_object(ROLE, role("root1", mode="update"))
        result = plan(world.snapshot())
        replace = next(s for s in result.steps if isinstance(s.action, ReplaceObject))
        event = next(s for s in result.steps if isinstance(s.action, EmitEvent))
        assert isinstance(replace.action, ReplaceObject)
        assert isinstance(event.action, EmitEvent)
        assert event.after == (replace.index,)
        assert event.action.type == "Warning"
        world.apply(result)
        assert world.obj(ROLE, "sub1", "admin")["rules"] == [
            {"verbs": ["get"], "resources": ["pods"]}
        ]
        warnings = [e for e in world.events if e.type == "Warning"]
        assert [(e.reason, e.involved.name) for e in warnings] == [("OriginalReplaced", "admin")]

    def test_g8_create_mode_leaves_a_user_object_alone_with_a_normal_event(self):
        world = make_world()
        tree(world, ("root1", "sub1"))
        world.add_object(ROLE, role("sub1", mode=None, rules=[{"verbs": ["*"]}]))
        world.add_object(ROLE, role("root1", mode="create"))
        result = plan(world.snapshot())
        assert result.changes() == ()
        (event,) = result.actions
        assert isinstance(event, EmitEvent)
        assert (event.type, event.involved.namespace) == ("Normal", "sub1")

    def test_g9_an_update_annotated_object_without_from_is_never_deleted(self):
        world = make_world()
        tree(world, ("root1", "sub1"))
        world.add_object(ROLE, role("sub1", name="own", mode="update"))
        assert plan(world.snapshot()).actions == ()

    def test_g10_a_service_account_copy_has_no_secrets(self):
        world = make_world()
        account = {
            "metadata": {
                "namespace": "root1",
                "name": "sa",
                "annotations": {ANNOTATION_PROPAGATE: "update"},
            },
            "secrets": [{"name": "sa-token"}],
        }
        world.add_object(SERVICE_ACCOUNT, account)
        tree(world, ("root1", "sub1"))
        assert "secrets" not in world.obj(SERVICE_ACCOUNT, "sub1", "sa")

    def test_g11_a_changed_role_ref_recreates_the_binding(self):
        world = make_world()
        binding: dict[str, Any] = {
            "metadata": {
                "namespace": "root1",
                "name": "b",
                "annotations": {ANNOTATION_PROPAGATE: "update"},
            },
            "roleRef": {"kind": "Role", "name": "admin", "apiGroup": "rbac.authorization.k8s.io"},
            "subjects": [],
        }
        world.add_object(ROLE_BINDING, binding)
        tree(world, ("root1", "sub1"))
        old_uid = world.obj(ROLE_BINDING, "sub1", "b")["metadata"]["uid"]
        world.obj(ROLE_BINDING, "root1", "b")["roleRef"]["name"] = "viewer"
        result = plan(world.snapshot())
        (replace,) = result.actions
        assert isinstance(replace, ReplaceObject)
        world.apply(result)
        copy_ = world.obj(ROLE_BINDING, "sub1", "b")
        assert copy_["roleRef"]["name"] == "viewer"
        assert copy_["metadata"]["uid"] != old_uid

    def test_g8_a_user_binding_with_another_role_ref_is_taken_over_too(self):
        world = make_world()
        tree(world, ("root1", "sub1"))
        ref = {"kind": "Role", "apiGroup": "rbac.authorization.k8s.io"}
        world.add_object(
            ROLE_BINDING,
            {"metadata": {"namespace": "sub1", "name": "b"}, "roleRef": {**ref, "name": "mine"}},
        )
        world.add_object(
            ROLE_BINDING,
            {
                "metadata": {
                    "namespace": "root1",
                    "name": "b",
                    "annotations": {ANNOTATION_PROPAGATE: "update"},
                },
                "roleRef": {**ref, "name": "admin"},
            },
        )
        world.apply(plan(world.snapshot()))
        taken = world.obj(ROLE_BINDING, "sub1", "b")
        assert taken["roleRef"]["name"] == "admin"
        assert taken["metadata"]["annotations"][ANNOTATION_FROM] == "root1"
        assert plan(world.snapshot()).changes() == ()

    def test_g12_propagate_generated_marks_and_propagates_in_one_pass(self):
        world = make_world(propagate_generated=True)
        world.owners = {
            "o1": {"metadata": {"annotations": {ANNOTATION_PROPAGATE_GENERATED: "update"}}},
            "o2": {"metadata": {}},
        }
        owned_by = lambda uid: [{"uid": uid, "controller": True}]  # noqa: E731
        world.add_object(ROLE, role("root1", name="gen", mode=None, ownerReferences=owned_by("o1")))
        world.add_object(
            ROLE, role("root1", name="other", mode=None, ownerReferences=owned_by("o2"))
        )
        world.add_object(
            ROLE, role("root1", name="lost", mode=None, ownerReferences=owned_by("o3"))
        )
        world.add_object(
            ROLE,
            role(
                "root1",
                name="free",
                mode=None,
                ownerReferences=[{"uid": "o1", "controller": False}],
            ),
        )
        world.add_subnamespace("root1", "sub1")
        result = plan(world.snapshot())
        marks = {a.ref.name: a.annotations for a in result.actions if isinstance(a, AnnotateObject)}
        assert marks == {
            "gen": {ANNOTATION_PROPAGATE: "update"},
            "other": {ANNOTATION_GENERATED: "false"},
        }
        world.apply(result)
        assert world.find(ROLE, "sub1", "gen") is not None
        assert world.find(ROLE, "sub1", "other") is None
        assert plan(world.snapshot()).actions == ()

    def test_propagate_generated_is_off_by_default(self):
        world = make_world()
        world.owners = {
            "o1": {"metadata": {"annotations": {ANNOTATION_PROPAGATE_GENERATED: "update"}}}
        }
        world.add_object(
            ROLE,
            role(
                "root1", name="gen", mode=None, ownerReferences=[{"uid": "o1", "controller": True}]
            ),
        )
        assert plan(world.snapshot()).actions == ()

    def test_terminating_namespaces_receive_nothing(self):
        world = make_world()
        world.add_object(ROLE, role("root1"))
        world.add_namespace("leaving", {LABEL_PARENT: "root1"}, terminating=True)
        assert plan(world.snapshot()).actions == ()

    def test_a_source_that_leaves_update_mode_turns_copies_into_create_mode_copies(self):
        world = make_world()
        world.add_object(ROLE, role("root1", mode="update"))
        tree(world, ("root1", "sub1"))
        world.obj(ROLE, "root1", "admin")["metadata"]["annotations"][ANNOTATION_PROPAGATE] = (
            "create"
        )
        assert settle(world) == 1
        copy_ = world.obj(ROLE, "sub1", "admin")
        assert copy_["metadata"]["annotations"][ANNOTATION_PROPAGATE] == "create"

    def test_a_create_mode_copy_from_an_old_parent_is_kept(self):
        world = make_world()
        world.add_namespace("root2", {LABEL_TYPE: "root"})
        world.add_object(ROLE, role("root1", mode="create"))
        world.add_object(ROLE, role("root2", mode="create", rules=[]))
        tree(world, ("root1", "sub1"))
        world.label_by_hand("sub1", LABEL_PARENT, "root2")
        settle(world)
        assert (
            world.obj(ROLE, "sub1", "admin")["metadata"]["annotations"][ANNOTATION_FROM] == "root1"
        )


class TestOrdering:
    def test_roles_come_before_bindings_and_deletions_after_creations(self):
        world = make_world()
        world.add_namespace("root2", {LABEL_TYPE: "root"})
        world.add_object(ROLE, role("root2", name="old", mode="update"))
        tree(world, ("root2", "sub1"))
        world.label_by_hand("sub1", LABEL_PARENT, "root1")
        world.add_object(ROLE, role("root1", mode="update"))
        binding: dict[str, Any] = {
            "metadata": {
                "namespace": "root1",
                "name": "b",
                "annotations": {ANNOTATION_PROPAGATE: "update"},
            },
            "roleRef": {"kind": "Role", "name": "admin", "apiGroup": "rbac.authorization.k8s.io"},
        }
        world.add_object(ROLE_BINDING, binding)
        stages = plan(world.snapshot()).stages()
        kinds = []
        for stage in stages:
            writes = [s.action for s in stage if isinstance(s.action, (CreateObject, DeleteObject))]
            if writes:
                kinds.append([(type(a).__name__, a.ref.kind) for a in writes])
        assert kinds == [
            [("CreateObject", "Role")],
            [("CreateObject", "RoleBinding")],
            [("DeleteObject", "Role")],
        ]

    def test_parents_come_before_children_within_a_stage(self):
        world = make_world()
        world.add_object(ROLE, role("root1"))
        world.add_namespace("b-child", {LABEL_PARENT: "root1"})
        world.add_namespace("a-grandchild", {LABEL_PARENT: "b-child"})
        actions = plan(world.snapshot()).actions
        assert [a.namespace for a in actions if isinstance(a, CreateObject)] == [
            "b-child",
            "a-grandchild",
        ]

    def test_every_action_describes_itself_in_one_line(self):
        world = make_world()
        world.add_object(ROLE, role("root1"))
        world.add_subnamespace("root1", "sub1", deleting=False)
        world.add_subnamespace("root1", "gone", deleting=True)
        for action in plan(world.snapshot()).actions:
            text = action.describe()
            assert text and "\n" not in text


@pytest.mark.parametrize("mode", ["create", "update"])
def test_a_copy_deleted_by_a_user_is_recreated(mode):
    world = make_world()
    world.add_object(ROLE, role("root1", mode=mode))
    tree(world, ("root1", "sub1"))
    del world.objects[(ROLE, "sub1", "admin")]
    assert [type(a) for a in plan(world.snapshot()).actions] == [CreateObject]


def test_stale_deletes_carry_uid_and_resource_version_preconditions():
    world = make_world()
    world.add_object(ROLE, role("root1", mode="update"))
    tree(world, ("root1", "sub1"))
    copy_ = world.obj(ROLE, "sub1", "admin")
    del world.objects[(ROLE, "root1", "admin")]
    (delete,) = plan(world.snapshot()).actions
    assert isinstance(delete, DeleteObject)
    assert delete.ref.uid == copy_["metadata"]["uid"]
    assert delete.resource_version == copy_["metadata"]["resourceVersion"]
