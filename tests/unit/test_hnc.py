"""The HNC import planner (libaccurate.hnc): HNC's trees, copies and config read as Accurate's,
and what cannot be carried over. The property test hands the imported cluster to Accurate's own
planner and checks that it adopts HNC's copies in place: nothing deleted, nothing re-created."""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable
from typing import Any

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from libaccurate.actions import CreateObject, DeleteObject
from libaccurate.config import parse_config
from libaccurate.constants import (
    ANNOTATION_FROM,
    ANNOTATION_PROPAGATE,
    ANNOTATION_PROPAGATE_NONE,
    ANNOTATION_PROPAGATE_SELECT,
    ANNOTATION_PROPAGATE_TREE_SELECT,
    ANNOTATION_SOURCE_HASH,
    LABEL_PARENT,
    LABEL_TYPE,
)
from libaccurate.hnc import (
    ANNOTATION_SUBNAMESPACE_OF,
    EXCEPTION_ALL,
    EXCEPTION_NONE,
    EXCEPTION_SELECT,
    EXCEPTION_TREE_SELECT,
    HNC_QUOTA_LABEL,
    HNC_QUOTA_NAME,
    LABEL_INHERITED_FROM,
    HncSnapshot,
    Kinds,
    NewSubNamespace,
    Plan,
    PropagatedKind,
    hnc_still_running,
    plan_import,
    propagated_kinds,
)
from libaccurate.planner import plan as accurate_plan
from libaccurate.quota import ANNOTATION_HRQ, LABEL_HRQ_NAMESPACE
from tests.unit.planner_world import ROLE, SECRET, World, settle

Obj = dict[str, Any]
ROLES = PropagatedKind(ROLE, "roles", "Propagate")
KINDS = Kinds((ROLES,), ())
RULES = [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}]
DISCOVERY = [
    {
        "groupVersion": "rbac.authorization.k8s.io/v1",
        "resources": [
            {"name": "roles", "kind": "Role", "namespaced": True},
            {"name": "rolebindings", "kind": "RoleBinding", "namespaced": True},
            {"name": "clusterroles", "kind": "ClusterRole", "namespaced": False},
        ],
    },
    {
        "groupVersion": "v1",
        "resources": [
            {"name": "secrets", "kind": "Secret", "namespaced": True},
            {"name": "configmaps", "kind": "ConfigMap", "namespaced": True},
            {"name": "secrets/status", "kind": "Secret", "namespaced": True},
        ],
    },
    {
        "groupVersion": "networking.k8s.io/v1",
        "resources": [{"name": "networkpolicies", "kind": "NetworkPolicy", "namespaced": True}],
    },
]


class Hnc:
    """A cluster as HNC leaves it, built on the planner tests' in-memory world."""

    def __init__(self) -> None:
        self.world = World()
        self.hierarchies: list[Obj] = []
        self.anchors: list[Obj] = []
        self.quotas: list[Obj] = []
        # For the property test: each source's exceptions as the lineages HNC copies it into.
        self.admits: dict[str, Callable[[list[str]], bool]] = {}
        self.lineages: dict[str, list[str]] = {}
        # For the property test: the managed labels HNC gave each namespace.
        self.managed: dict[str, dict[str, str]] = {}

    def namespace(
        self,
        name: str,
        labels: dict[str, str] | None = None,
        annotations: dict[str, str] | None = None,
    ) -> str:
        self.world.add_namespace(name, labels, annotations)
        return name

    def full(self, name: str, parent: str, **spec: Any) -> str:
        """A full namespace HNC placed under ``parent`` (HierarchyConfiguration only)."""
        self.namespace(name)
        self.hierarchy(name, parent, **spec)
        return name

    def hierarchy(self, namespace: str, parent: str | None, **spec: Any) -> None:
        body = {**({"parent": parent} if parent else {}), **spec}
        self.hierarchies.append(
            {"metadata": {"name": "hierarchy", "namespace": namespace}, "spec": body}
        )

    def sub(
        self,
        name: str,
        parent: str,
        labels: dict[str, str] | None = None,
        annotations: dict[str, str] | None = None,
    ) -> str:
        """A subnamespace made through an anchor in ``parent``."""
        self.namespace(name, annotations={ANNOTATION_SUBNAMESPACE_OF: parent})
        self.hierarchy(name, parent)
        self.anchor(parent, name, labels, annotations)
        return name

    def anchor(
        self,
        parent: str,
        name: str,
        labels: dict[str, str] | None = None,
        annotations: dict[str, str] | None = None,
    ) -> None:
        spec = {"labels": pairs(labels or {}), "annotations": pairs(annotations or {})}
        meta = {"name": name, "namespace": parent, "finalizers": ["hnc.x-k8s.io"]}
        self.anchors.append({"metadata": meta, "spec": spec})

    def written(
        self, name: str, labels: dict[str, str], annotations: dict[str, str] | None = None
    ) -> None:
        """Labels and annotations HNC's controller wrote on a namespace: by update, under its
        field manager, which comes to own them."""
        meta = self.world.namespaces[name]["metadata"]
        meta.setdefault("labels", {}).update(labels)
        meta.setdefault("annotations", {}).update(annotations or {})
        fields: Obj = {"f:labels": {".": {}, **{f"f:{k}": {} for k in labels}}}
        if annotations:
            fields["f:annotations"] = {f"f:{k}": {} for k in annotations}
        entry: Obj = {"manager": "manager", "operation": "Update", "apiVersion": "v1"}
        entry |= {"fieldsType": "FieldsV1", "fieldsV1": {"f:metadata": fields}}
        meta.setdefault("managedFields", []).append(entry)

    def role(self, namespace: str, name: str, origin: str | None = None, **annotations: str) -> Obj:
        labels = {LABEL_INHERITED_FROM: origin} if origin else {}
        meta = {"name": name, "namespace": namespace, "labels": labels, "annotations": annotations}
        return self.world.add_object(ROLE, {"metadata": meta, "rules": copy.deepcopy(RULES)})

    def snapshot(self, kinds: Kinds = KINDS) -> HncSnapshot:
        state = self.world.snapshot()
        roles = [o for (gvk, _, _), o in self.world.objects.items() if gvk == ROLE]
        return HncSnapshot(
            namespaces=state.namespaces,
            hierarchies=self.hierarchies,
            anchors=self.anchors,
            quotas=self.quotas,
            subnamespaces=state.subnamespaces,
            objects={kind: roles for kind in kinds.propagated},
        )

    def plan(self, kinds: Kinds = KINDS) -> Plan:
        return plan_import(self.snapshot(kinds), kinds)

    def apply(self, plan: Plan) -> None:
        """Make the import's writes as the API server would store them."""
        for mark in (*plan.copies, *plan.sources):
            stored = self.world.obj(ROLE, mark.namespace, mark.name)
            stored["metadata"].setdefault("annotations", {}).update(mark.annotations)
        for name in plan.roots:
            self.world.label_by_hand(name, LABEL_TYPE, "root")
        for name, parent in plan.parents:
            self.world.label_by_hand(name, LABEL_PARENT, parent)
        for sub in plan.subnamespaces:
            self.world.add_subnamespace(sub.parent, sub.name, sub.labels, sub.annotations)
        for takeover in plan.takeovers:
            meta = self.world.namespaces[takeover.name]["metadata"]
            meta["managedFields"] = takeover.managed_fields(self.world.namespaces[takeover.name])


def pairs(values: dict[str, str]) -> list[dict[str, str]]:
    """A map as HNC's list of ``{key, value}``."""
    return [{"key": key, "value": value} for key, value in values.items()]


def reasons(plan: Plan) -> dict[str, str]:
    return {item.what: item.reason for item in plan.not_carried}


def marks(plan: Plan) -> dict[str, dict[str, str]]:
    return {f"{m.namespace}/{m.name}": dict(m.annotations) for m in (*plan.copies, *plan.sources)}


def team() -> Hnc:
    """team <- dev (anchor, env=dev) <- dev-tools (full namespace); a Role copied down."""
    hnc = Hnc()
    hnc.namespace("team")
    hnc.sub("dev", "team", {"env": "dev"})
    hnc.full("dev-tools", "dev")
    hnc.role("team", "admin")
    hnc.role("dev", "admin", origin="team")
    hnc.role("dev-tools", "admin", origin="team")
    return hnc


def test_trees_become_roots_parent_labels_and_subnamespaces_for_anchors() -> None:
    plan = team().plan()

    assert plan.roots == ("team",)
    assert plan.parents == (("dev", "team"), ("dev-tools", "dev"))
    assert plan.subnamespaces == (NewSubNamespace("team", "dev", {"env": "dev"}, {}),)


def test_sources_opt_in_and_copies_are_marked_as_copies_of_their_parent() -> None:
    plan = team().plan()

    assert marks(plan) == {
        "team/admin": {ANNOTATION_PROPAGATE: "update"},
        "dev/admin": {ANNOTATION_FROM: "team"},
        "dev-tools/admin": {ANNOTATION_FROM: "dev"},
    }
    assert [m.name for m in plan.copies] == ["admin", "admin"]


def test_the_config_watches_the_kinds_and_inherits_the_managed_keys() -> None:
    hnc = team()
    hnc.hierarchy("team", None, labels=[{"key": "cost-center", "value": "42"}])
    document = hnc.plan().config_document()

    assert document == {
        "labelKeys": ["cost-center", "env"],
        "watches": [{"group": "rbac.authorization.k8s.io", "version": "v1", "kind": "Role"}],
    }
    parse_config(yaml.safe_dump(document), "snippet")


def test_managed_keys_are_matched_literally_and_reserved_ones_reported() -> None:
    hnc = team()
    hnc.hierarchy("team", None, annotations=[{"key": "odd*key", "value": "1"}])
    hnc.anchor("team", "dev", {"accurate.cybozu.com/x": "1"})
    plan = hnc.plan()

    assert plan.config.annotation_keys == ("odd\\*key",)
    assert "accurate.cybozu.com/x" not in plan.config.label_keys
    assert "cannot be inherited" in reasons(plan)["managed key accurate.cybozu.com/x"]


def test_an_import_applied_plans_nothing_more() -> None:
    hnc = team()
    hnc.apply(hnc.plan())

    again = hnc.plan()
    assert again.empty
    assert again.config == team().plan().config


PSA = "pod-security.kubernetes.io/enforce"


def test_an_ancestors_managed_value_wins_over_an_anchors_and_the_dropped_one_is_reported() -> None:
    hnc = Hnc()
    hnc.namespace("root")
    hnc.hierarchy(
        "root", None, labels=pairs({PSA: "restricted"}), annotations=pairs({"owner": "ops"})
    )
    hnc.sub("team", "root", {PSA: "privileged", "env": "team"}, {"owner": "me", "note": "x"})
    hnc.full("tools", "team", labels=pairs({"env": "tools"}))
    plan = hnc.plan()

    assert plan.subnamespaces == (NewSubNamespace("root", "team", {"env": "team"}, {"note": "x"}),)
    assert plan.config.sub_namespace_label_keys == ()
    assert plan.config.sub_namespace_annotation_keys == ()
    assert plan.config.label_keys == ("env", PSA)
    assert plan.config.annotation_keys == ("note", "owner")
    found = reasons(plan)
    assert found[f"SubnamespaceAnchor root/team: label {PSA}=privileged"] == (
        f"HNC gives namespace team root's {PSA}=restricted, as an ancestor's managed label "
        "wins over a namespace's own; so does Accurate, which has team inherit it"
    )
    assert "root's owner=ops" in found["SubnamespaceAnchor root/team: annotation owner=me"]
    assert "team's env=team" in found["HierarchyConfiguration tools/hierarchy: label env=tools"]
    tenants = found["managed keys env, note on anchors"]
    assert tenants.startswith("taken from no SubNamespace: in subNamespaceLabelKeys")


def test_an_anchor_without_its_namespace_yet_is_told_its_values_are_not_set() -> None:
    hnc = team()
    hnc.anchor("team", "new", {"env": "new"})

    assert reasons(hnc.plan())["SubnamespaceAnchor team/new"] == (
        "namespace new does not exist yet: Accurate's controller makes it with what it "
        "inherits, without the anchor's label env=new, as no key is taken from a SubNamespace "
        "(see the managed keys)"
    )


def test_hncs_field_manager_loses_the_namespace_keys_accurate_keeps_and_nothing_else() -> None:
    hnc = team()
    tree = {"team.tree.hnc.x-k8s.io/depth": "1", "dev.tree.hnc.x-k8s.io/depth": "0"}
    hnc.written("dev", {**tree, "env": "dev", "hand": "x"}, {ANNOTATION_SUBNAMESPACE_OF: "team"})
    hnc.written("team", {"team.tree.hnc.x-k8s.io/depth": "0"})
    hnc.world.namespaces["team"]["metadata"]["managedFields"].append(
        {"manager": "kubectl", "operation": "Update", "apiVersion": "v1", "fieldsV1": {"x": 1}}
    )
    plan = hnc.plan()

    dev, team_ = sorted(plan.takeovers, key=lambda t: t.name)
    assert dev.labels == ("dev.tree.hnc.x-k8s.io/depth", "env", "team.tree.hnc.x-k8s.io/depth")
    assert dev.annotations == ()
    assert dev.describe() == (
        "take over namespace dev's labels dev.tree.hnc.x-k8s.io/depth, env, "
        "team.tree.hnc.x-k8s.io/depth from HNC's field manager"
    )
    (entry,) = dev.managed_fields(hnc.world.namespaces["dev"])
    assert entry["manager"] == "manager"
    assert entry["fieldsV1"] == {
        "f:metadata": {
            "f:labels": {".": {}, "f:hand": {}},
            "f:annotations": {f"f:{ANNOTATION_SUBNAMESPACE_OF}": {}},
        }
    }
    assert team_.managed_fields(hnc.world.namespaces["team"]) == [
        {
            "manager": "manager",
            "operation": "Update",
            "apiVersion": "v1",
            "fieldsType": "FieldsV1",
            "fieldsV1": {"f:metadata": {"f:labels": {".": {}}}},
        },
        {"manager": "kubectl", "operation": "Update", "apiVersion": "v1", "fieldsV1": {"x": 1}},
    ]
    hnc.apply(plan)
    assert hnc.plan().empty


def test_a_namespace_hnc_alone_owned_loses_every_entry() -> None:
    hnc = team()
    hnc.world.namespaces["dev-tools"]["metadata"].pop("managedFields", None)
    hnc.written("dev-tools", {"env": "dev"})
    hnc.world.namespaces["dev-tools"]["metadata"]["managedFields"][0]["fieldsV1"] = {
        "f:metadata": {"f:labels": {"f:env": {}}}
    }
    (takeover,) = hnc.plan().takeovers

    assert takeover.managed_fields(hnc.world.namespaces["dev-tools"]) == [{}]


def test_hnc_exceptions_become_accurates_on_the_opted_in_source() -> None:
    hnc = team()
    hnc.role("team", "picky", **{EXCEPTION_TREE_SELECT: "dev, !dev-tools"})
    hnc.role("dev", "picky", origin="team")
    hnc.role("team", "chosen", **{EXCEPTION_SELECT: "env=dev"})
    hnc.role("team", "private", **{EXCEPTION_NONE: "true"})
    plan = hnc.plan()

    assert marks(plan)["team/picky"] == {
        ANNOTATION_PROPAGATE: "update",
        ANNOTATION_PROPAGATE_TREE_SELECT: "dev, !dev-tools",
    }
    assert marks(plan)["dev/picky"] == {ANNOTATION_FROM: "team"}
    # HNC copies these nowhere yet (no namespace has env=dev; none): their exceptions say why.
    assert marks(plan)["team/chosen"] == {
        ANNOTATION_PROPAGATE: "update",
        ANNOTATION_PROPAGATE_SELECT: "env=dev",
    }
    assert marks(plan)["team/private"] == {
        ANNOTATION_PROPAGATE: "update",
        ANNOTATION_PROPAGATE_NONE: "true",
    }
    assert not any(what.startswith("Role team/") for what in reasons(plan))


def test_none_is_read_as_go_reads_a_boolean() -> None:
    hnc = team()
    hnc.role("team", "upper", **{EXCEPTION_NONE: "TRUE"})
    hnc.role("team", "off", **{EXCEPTION_NONE: "0"})
    hnc.role("dev", "off", origin="team")
    plan = hnc.plan()

    assert marks(plan)["team/upper"][ANNOTATION_PROPAGATE_NONE] == "true"
    assert marks(plan)["team/off"] == {ANNOTATION_PROPAGATE: "update"}


def test_exceptions_that_cannot_be_translated_are_reported_and_nothing_written() -> None:
    hnc = team()
    hnc.role("team", "unsure", **{EXCEPTION_NONE: "yes"})
    hnc.role("team", "two-trees", **{EXCEPTION_TREE_SELECT: "dev, dev-tools"})
    hnc.role("team", "typo", **{EXCEPTION_SELECT: "env in (dev"})
    hnc.role("dev", "typo", origin="team")
    hnc.role(
        "team",
        "clash",
        **{EXCEPTION_SELECT: "env=dev", ANNOTATION_PROPAGATE_SELECT: "env=prod"},
    )
    plan = hnc.plan()
    found = reasons(plan)

    assert not {"team/unsure", "team/two-trees", "team/typo", "dev/typo", "team/clash"} & set(
        marks(plan)
    )
    assert "'yes'" in found["Role team/unsure"] and "not a boolean" in found["Role team/unsure"]
    assert "more than one namespace without '!'" in found["Role team/two-trees"]
    assert "cannot be translated" in found["Role team/typo"]
    assert "'(' is never closed" in found["Role team/typo"]
    assert "; its copy stays as it is, no longer kept current" in found["Role team/typo"]
    assert "which differ; left as it is" in found["Role team/clash"]


def test_an_import_with_exceptions_applied_plans_nothing_more() -> None:
    hnc = team()
    hnc.role("team", "picky", **{EXCEPTION_TREE_SELECT: "dev"})
    hnc.role("dev", "picky", origin="team")
    hnc.apply(hnc.plan())

    assert hnc.plan().empty


def test_allow_propagate_kinds_carry_over_only_objects_that_say_where() -> None:
    hnc = team()
    hnc.role("team", "shared", **{EXCEPTION_ALL: "true"})
    hnc.role("dev", "shared", origin="team")
    hnc.role("team", "dev-only", **{EXCEPTION_TREE_SELECT: "dev"})
    hnc.role("dev", "dev-only", origin="team")
    hnc.role("team", "kept-home")
    plan = hnc.plan(Kinds((PropagatedKind(ROLE, "roles", "AllowPropagate"),), ()))

    assert marks(plan)["team/shared"] == {ANNOTATION_PROPAGATE: "update"}
    assert marks(plan)["dev/shared"] == {ANNOTATION_FROM: "team"}
    assert marks(plan)["team/dev-only"][ANNOTATION_PROPAGATE_TREE_SELECT] == "dev"
    assert "team/kept-home" not in marks(plan)
    assert "Role team/kept-home" not in reasons(plan)


def test_hnc_tree_labels_turn_on_tree_labels_with_hncs_suffix() -> None:
    hnc = team()
    hnc.world.namespaces["dev"]["metadata"]["labels"]["team.tree.hnc.x-k8s.io/depth"] = "1"
    plan = hnc.plan()

    assert plan.config_document()["treeLabels"] == {"suffix": "tree.hnc.x-k8s.io"}
    assert plan.config_notes[0].startswith("treeLabels: HNC's tree labels")
    assert "are on 1 namespace." in plan.config_notes[0]
    assert "NetworkPolicies" in plan.config_notes[0]
    assert not any("tree labels" in what for what in reasons(plan))
    assert "treeLabels" not in team().plan().config_document()


def test_a_selector_on_hncs_tree_labels_keeps_them_on_after_the_import() -> None:
    hnc = team()
    hnc.role("team", "picky", **{EXCEPTION_SELECT: "!dev-tools.tree.hnc.x-k8s.io/depth"})
    hnc.role("dev", "picky", origin="team")
    plan = hnc.plan()
    assert plan.config.tree_label_suffix == "tree.hnc.x-k8s.io"
    assert "and the selectors of 1 object name them" in plan.config_notes[0]

    hnc.apply(plan)
    again = hnc.plan()
    assert again.empty
    assert again.config == plan.config


def test_a_source_hnc_made_no_copies_of_is_not_opted_in() -> None:
    hnc = team()
    hnc.role("team", "with-finalizer")
    plan = hnc.plan()

    assert "team/with-finalizer" not in marks(plan)
    assert "made no copies" in reasons(plan)["Role team/with-finalizer"]


def test_a_descendant_holding_its_own_object_of_that_name_keeps_the_source_out() -> None:
    hnc = team()
    hnc.role("team", "viewer")
    hnc.role("dev", "viewer", origin="team")
    hnc.role("dev-tools", "viewer")
    plan = hnc.plan()

    assert "team/viewer" not in marks(plan)
    assert "dev/viewer" not in marks(plan)
    assert "dev-tools holds its own Role viewer" in reasons(plan)["Role team/viewer"]


def test_a_copy_whose_source_is_gone_is_left_as_it_is() -> None:
    hnc = team()
    hnc.role("dev", "orphan", origin="team")
    plan = hnc.plan()

    assert "dev/orphan" not in marks(plan)
    assert "HNC would have deleted it" in reasons(plan)["Role dev/orphan"]


def test_two_parents_in_flight_keep_the_namespace_and_its_subtree_out() -> None:
    hnc = team()
    hnc.namespace("other")
    hnc.namespace("split", annotations={ANNOTATION_SUBNAMESPACE_OF: "other"})
    hnc.hierarchy("split", "dev")
    hnc.full("below-split", "split")
    plan = hnc.plan()

    assert "two parents in flight" in reasons(plan)["namespace split"]
    assert reasons(plan)["namespace below-split"] == "its ancestor split is not carried over"
    assert all(name not in ("split", "below-split") for name, _ in plan.parents)


def test_an_accurate_parent_label_that_disagrees_is_two_parents() -> None:
    hnc = team()
    hnc.namespace("elsewhere", {LABEL_TYPE: "root"})
    hnc.namespace("moved", {LABEL_PARENT: "elsewhere"})
    hnc.hierarchy("moved", "dev")
    plan = hnc.plan()

    assert "its accurate.cybozu.com/parent label says elsewhere" in reasons(plan)["namespace moved"]


def test_cycles_and_missing_parents_are_reported() -> None:
    hnc = team()
    hnc.full("a", "b")
    hnc.full("b", "a")
    hnc.full("lost", "gone")
    plan = hnc.plan()

    assert reasons(plan)["namespace a"] == "its parents form a cycle: a -> b -> a"
    assert reasons(plan)["namespace b"] == "its parents form a cycle: a -> b -> a"
    assert reasons(plan)["namespace lost"] == "its parent gone does not exist"


def test_anchors_in_conflict_or_missing_are_reported_and_pending_ones_carried_over() -> None:
    hnc = team()
    hnc.anchor("dev", "dev-tools")
    hnc.namespace("orphan-sub", annotations={ANNOTATION_SUBNAMESPACE_OF: "team"})
    hnc.anchor("dev", "not-yet")
    plan = hnc.plan()

    assert "Conflict" in reasons(plan)["SubnamespaceAnchor dev/dev-tools"]
    assert "its anchor is gone" in reasons(plan)["namespace orphan-sub"]
    assert ("orphan-sub", "team") in plan.parents
    assert NewSubNamespace("dev", "not-yet", {}, {}) in plan.subnamespaces
    assert all(name != "not-yet" for name, _ in plan.parents)


def test_an_anchor_being_deleted_keeps_its_namespace_out() -> None:
    hnc = team()
    hnc.anchors[0]["metadata"]["deletionTimestamp"] = "2024-01-01T00:00:00Z"
    plan = hnc.plan()

    assert "HNC is deleting it" in reasons(plan)["namespace dev"]
    assert plan.subnamespaces == ()
    assert plan.roots == ()


def test_what_accurate_has_no_equivalent_for_is_reported() -> None:
    hnc = team()
    hnc.hierarchy("team", None, allowCascadingDeletion=True)
    hnc.quotas.append({"metadata": {"name": "cpu", "namespace": "team"}})
    found = reasons(hnc.plan())

    assert "allow-cascading-deletion" in found["allowCascadingDeletion on namespace team"]
    assert "hierarchical quotas are not installed" in found["HierarchicalResourceQuota team/cpu"]


def hnc_quota(namespace: str, name: str, **hard: str) -> Obj:
    return {"metadata": {"name": name, "namespace": namespace}, "spec": {"hard": hard}}


def resource_quota(namespace: str, name: str, labels: dict[str, str], **used: str) -> Obj:
    hard = {resource: "1E" for resource in used}
    status = {"status": {"hard": hard, "used": used}} if used else {}
    meta = {"name": name, "namespace": namespace, "labels": labels, "uid": f"uid-{namespace}"}
    return {"metadata": meta, "spec": {"hard": hard}, **status}


def accurate_quota(namespace: str, hrq: tuple[str, str], **used: str) -> Obj:
    obj = resource_quota(namespace, f"hrq.{hrq[0]}.{hrq[1]}", {LABEL_HRQ_NAMESPACE: hrq[0]}, **used)
    obj["metadata"]["annotations"] = {ANNOTATION_HRQ: f"{hrq[0]}/{hrq[1]}"}
    return obj


def hncs_quota(namespace: str, **hard: str) -> Obj:
    obj = resource_quota(namespace, HNC_QUOTA_NAME, {HNC_QUOTA_LABEL: "true"})
    obj["spec"]["hard"] = hard
    return obj


def test_hncs_hrqs_become_accurates_with_the_same_spec_once() -> None:
    hnc = team()
    hnc.quotas.append(hnc_quota("team", "compute", pods="20", **{"requests.cpu": "1.5"}))
    hnc.quotas.append(hnc_quota("team", "broken", pods="lots"))
    snapshot = dataclasses.replace(hnc.snapshot(), accurate_quotas=[])
    plan = plan_import(snapshot, KINDS)

    (created,) = plan.quotas
    assert created.body() == {
        "apiVersion": "quota.accurate.cybozu.com/v1alpha1",
        "kind": "HierarchicalResourceQuota",
        "metadata": {"namespace": "team", "name": "compute"},
        "spec": {"hard": {"pods": "20", "requests.cpu": "1.5"}},
    }
    assert created.describe() == (
        "create HierarchicalResourceQuota team/compute (pods=20, requests.cpu=1.5)"
    )
    assert "cannot be carried over" in reasons(plan)["HierarchicalResourceQuota team/broken"]
    again = dataclasses.replace(snapshot, accurate_quotas=[created.body()])
    assert plan_import(again, KINDS).quotas == ()
    changed = created.body()
    changed["spec"] = {"hard": {"pods": "5"}}
    other = plan_import(dataclasses.replace(snapshot, accurate_quotas=[changed]), KINDS)
    assert other.quotas == ()
    assert "another spec" in reasons(other)["HierarchicalResourceQuota team/compute"]


def test_hncs_resource_quotas_go_only_where_accurates_count_what_they_limit() -> None:
    hnc = team()
    hrq = ("team", "compute")
    snapshot = dataclasses.replace(
        hnc.snapshot(),
        accurate_quotas=[],
        resource_quotas=[
            hncs_quota("team", pods="20", **{"requests.cpu": "1"}),
            hncs_quota("dev", pods="20"),
            hncs_quota("tools", pods="20"),
            accurate_quota("team", hrq, pods="1", **{"requests.cpu": "0"}),
            accurate_quota("dev", hrq, **{"requests.cpu": "0"}),
            resource_quota("tools", "someone-elses", {}, pods="0"),
        ],
    )
    plan = plan_import(snapshot, KINDS)
    assert [(r.namespace, r.name) for r in plan.quota_removals] == [("team", HNC_QUOTA_NAME)]
    assert (
        plan.quota_removals[0]
        .describe()
        .startswith(f"delete ResourceQuota team/{HNC_QUOTA_NAME} (HNC's, for its HRQs")
    )
    assert plan.quotas_waiting == ("dev", "tools")


def test_propagated_kinds_come_from_hnc_config_and_discovery() -> None:
    config = {
        "spec": {
            "resources": [
                {"resource": "secrets", "mode": "Propagate"},
                {"resource": "configmaps", "mode": "Remove"},
                {"group": "networking.k8s.io", "resource": "networkpolicies", "mode": ""},
                {"resource": "widgets", "group": "example.com", "mode": "AllowPropagate"},
                {"group": "rbac.authorization.k8s.io", "resource": "roles", "mode": "Ignore"},
            ]
        }
    }
    kinds = propagated_kinds(config, DISCOVERY)

    assert [(k.gvk.kind, k.plural, k.mode) for k in kinds.propagated] == [
        ("Role", "roles", "Propagate"),
        ("RoleBinding", "rolebindings", "Propagate"),
        ("Secret", "secrets", "Propagate"),
        ("NetworkPolicy", "networkpolicies", "Propagate"),
    ]
    assert kinds.propagated[2].gvk == SECRET
    assert [n.what for n in kinds.not_carried] == ["resource widgets.example.com"]


def test_hnc_counts_as_running_while_its_webhooks_or_pods_are_there() -> None:
    webhook = {
        "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": "hnc-validating-webhook-configuration"},
        "webhooks": [{"name": "objects.hnc.x-k8s.io"}],
    }
    ours = {"kind": "ValidatingWebhookConfiguration", "metadata": {"name": "accurate"}}
    stopped = {"metadata": {"name": "hnc-controller-manager", "namespace": "hnc-system"}}
    scaled_down = copy.deepcopy(stopped) | {"spec": {"replicas": 0}}

    assert hnc_still_running([webhook, ours], [stopped]) == (
        "ValidatingWebhookConfiguration hnc-validating-webhook-configuration",
        "Deployment hnc-system/hnc-controller-manager",
    )
    assert hnc_still_running([ours], [scaled_down]) == ()


# Property: Accurate's controller adopts what the import hands over, in place.

NAMES = ("n0", "n1", "n2", "n3", "n4", "n5")


# HNC's exceptions, and the namespaces (by their lineage: themselves and their ancestors) where
# HNC copies a source that carries them.
EXCEPTION_CASES: tuple[tuple[dict[str, str], Any], ...] = (
    ({}, lambda lineage: True),
    ({EXCEPTION_NONE: "true"}, lambda lineage: False),
    ({EXCEPTION_TREE_SELECT: "n1"}, lambda lineage: "n1" in lineage),
    ({EXCEPTION_TREE_SELECT: "!n1, !n3"}, lambda lineage: not {"n1", "n3"} & set(lineage)),
    ({EXCEPTION_SELECT: "!n2.tree.hnc.x-k8s.io/depth"}, lambda lineage: "n2" not in lineage),
)


# Managed labels: a root's (an administrator's), an anchor's (a tenant's) and a full
# namespace's own values, some for the same key.
ROOT_LABELS: tuple[dict[str, str], ...] = ({}, {"psa": "restricted"})
ANCHOR_LABELS: tuple[dict[str, str], ...] = (
    {},
    {"env": "x"},
    {"psa": "privileged"},
    {"psa": "privileged", "env": "y"},
)
FULL_LABELS: tuple[dict[str, str], ...] = ({}, {"psa": "baseline"}, {"env": "z"})
MANAGED = ("psa", "env")


@st.composite
def hnc_clusters(draw: st.DrawFn) -> Hnc:
    """HNC forests (subnamespaces and full namespaces) with HNC's tree labels and managed
    labels, written under HNC's field manager, Roles copied down from every namespace with
    descendants where their exceptions let HNC copy them, some copies missing, some stale
    copies."""
    hnc = Hnc()
    count = draw(st.integers(2, len(NAMES)))
    parents: dict[str, str] = {}
    own: dict[str, dict[str, str]] = {}
    for index, name in enumerate(NAMES[:count]):
        parent = draw(st.sampled_from([None, *NAMES[:index]])) if index else None
        if parent is None:
            own[name] = draw(st.sampled_from(ROOT_LABELS))
            hnc.namespace(name)
            hnc.hierarchy(name, None, labels=pairs(own[name]))
        elif draw(st.booleans()):
            own[name] = draw(st.sampled_from(ANCHOR_LABELS))
            hnc.sub(name, parent, own[name])
        else:
            own[name] = draw(st.sampled_from(FULL_LABELS))
            hnc.full(name, parent, labels=pairs(own[name]))
        if parent:
            parents[name] = parent
    for name in NAMES[:count]:
        lineage = hnc.lineages[name] = [name, *_ancestors(parents, name)]
        labels = {}
        for depth, ancestor in enumerate(lineage):
            labels[f"{ancestor}.tree.hnc.x-k8s.io/depth"] = str(depth)
            labels.update(own[ancestor])  # HNC sets the highest namespace's value last
        hnc.written(name, labels)
        hnc.managed[name] = {key: labels[key] for key in MANAGED if key in labels}
    for name in NAMES[:count]:
        exception, admits = draw(st.sampled_from(EXCEPTION_CASES))
        hnc.role(name, f"from-{name}", **exception)
        hnc.admits[f"from-{name}"] = admits
        for below in _descendants(parents, name):
            if admits(hnc.lineages[below]) and draw(st.integers(0, 4)):
                hnc.role(below, f"from-{name}", origin=name)
    if draw(st.booleans()):
        hnc.role(NAMES[count - 1], "stale", origin=NAMES[0])
    return hnc


def _descendants(parents: dict[str, str], top: str) -> list[str]:
    return [name for name in parents if top in _ancestors(parents, name)]


def _ancestors(parents: dict[str, str], name: str) -> list[str]:
    found = []
    while name in parents:
        name = parents[name]
        found.append(name)
    return found


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(hnc_clusters())
def test_accurate_adopts_the_imported_copies_in_place_and_the_import_is_idempotent(
    hnc: Hnc,
) -> None:
    plan = hnc.plan()
    before = {key: obj["metadata"]["uid"] for key, obj in hnc.world.objects.items()}
    hnc.apply(plan)
    assert hnc.plan().empty

    hnc.world.config = plan.config
    for _ in range(5):
        passed = accurate_plan(hnc.world.snapshot())
        if not passed.changes():
            break
        for action in passed.actions:
            assert not isinstance(action, DeleteObject), action
            if isinstance(action, CreateObject):
                meta = action.object["metadata"]
                assert (ROLE, meta["namespace"], meta["name"]) not in before, action
                assert hnc.admits[meta["name"]](hnc.lineages[meta["namespace"]]), action
        hnc.world.apply(passed)
    assert not hnc.world.failures

    for key, uid in before.items():
        assert hnc.world.objects[key]["metadata"]["uid"] == uid
    for mark in plan.copies:
        adopted = hnc.world.obj(ROLE, mark.namespace, mark.name)
        annotations = adopted["metadata"]["annotations"]
        assert annotations[ANNOTATION_FROM] == mark.annotations[ANNOTATION_FROM]
        assert ANNOTATION_SOURCE_HASH in annotations
        assert LABEL_INHERITED_FROM not in (adopted["metadata"].get("labels") or {})
        assert adopted["rules"] == RULES
    assert hnc.plan().empty
    _managed_labels_keep_hncs_precedence_and_go_when_removed(hnc)


def _labels(hnc: Hnc, name: str) -> dict[str, str]:
    return dict(hnc.world.namespaces[name]["metadata"].get("labels") or {})


def _managed_labels_keep_hncs_precedence_and_go_when_removed(hnc: Hnc) -> None:
    """Every namespace keeps the managed labels HNC gave it; a tenant's new SubNamespace cannot
    override a value its parent holds (HNC lets the ancestor's win), nor set one HNC would
    not have; a label removed from a root leaves every namespace that had it from the root."""
    for name, managed in hnc.managed.items():
        assert {k: v for k, v in _labels(hnc, name).items() if k in MANAGED} == managed, name
    carried = [name for name in hnc.managed if {LABEL_TYPE, LABEL_PARENT} & set(_labels(hnc, name))]
    for parent in carried:
        hnc.world.add_subnamespace(parent, f"t-{parent}", {"psa": "tenant", "env": "tenant"})
    settle(hnc.world)
    for parent in carried:
        made = _labels(hnc, f"t-{parent}")
        for key in MANAGED:
            assert made.get(key) == _labels(hnc, parent).get(key), (parent, key)
    roots = [name for name in carried if _labels(hnc, name).get(LABEL_TYPE) == "root"]
    for root in roots:
        hnc.world.label_by_hand(root, "psa", None)
    settle(hnc.world)
    for name in hnc.world.namespaces:
        lineage = hnc.lineages.get(name) or hnc.lineages[name.removeprefix("t-")]
        if set(lineage) & set(roots):
            assert _labels(hnc, name).get("psa") != "restricted", name
