"""The planner holds copies out of a namespace below a hierarchical quota until its quota counts.

A RoleBinding copied into a new sub-namespace is the tenant's only right there; if it landed
before the ResourceQuotas that make kube-apiserver charge the HRQs above, the tenant could
write there uncharged and overshoot the HRQ (docs/hierarchical-quotas.md, "A namespace joins
a subtree"). The world applies plans like the API server, runs the quota keeper between passes
and fills the ResourceQuotas' status the way kube-controller-manager does, when told to.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from controller.quota_admission import ParsedHrqs
from libaccurate import quota
from libaccurate.actions import CreateObject, DeleteObject, ReplaceObject
from libaccurate.constants import (
    ANNOTATION_PROPAGATE,
    CONDITION_READY,
    LABEL_PARENT,
    LABEL_TYPE,
)
from libaccurate.forest import Forest, Node
from libaccurate.lifecycle import REASON_WAITING_FOR_QUOTA
from libaccurate.planner import Plan, plan
from tests.unit.planner_world import ROLE_BINDING, World, settle
from tests.unit.test_planner import CONFIG
from tests.unit.test_planner_properties import NAMES, PROPERTY_SETTINGS, worlds

RBAC = "rbac.authorization.k8s.io"


def hrq(namespace: str, name: str = "compute", **hard: str) -> dict[str, Any]:
    return {
        "apiVersion": quota.API_VERSION,
        "kind": quota.KIND,
        "metadata": {"namespace": namespace, "name": name},
        "spec": {"hard": hard or {"pods": "3"}},
    }


def binding(namespace: str) -> dict[str, Any]:
    return {
        "metadata": {
            "namespace": namespace,
            "name": "tenant",
            "annotations": {ANNOTATION_PROPAGATE: "update"},
        },
        "roleRef": {
            "kind": "ClusterRole",
            "name": "admin",
            "apiGroup": "rbac.authorization.k8s.io",
        },
        "subjects": [{"kind": "User", "name": "alice", "apiGroup": "rbac.authorization.k8s.io"}],
    }


def ready(world: World, parent: str, name: str) -> dict[str, Any]:
    conditions = (world.subnamespaces[(parent, name)].get("status") or {}).get("conditions") or ()
    return next(c for c in conditions if c["type"] == CONDITION_READY)


def copies_into(planned: Plan, namespace: str) -> list[Any]:
    return [
        a
        for a in planned.changes()
        if isinstance(a, (CreateObject, ReplaceObject)) and a.namespace == namespace
    ]


def quota_root() -> World:
    world = World(config=CONFIG)
    world.add_namespace("team", {LABEL_TYPE: "root"})
    world.add_object(ROLE_BINDING, binding("team"))
    world.hrqs.append(hrq("team"))
    world.keep_quotas()
    world.count_quotas()
    return world


def test_a_new_sub_namespace_gets_no_rolebinding_until_its_quota_counts() -> None:
    world = quota_root()
    world.add_subnamespace("team", "dev")

    first = plan(world.snapshot())
    world.apply(first)
    assert "dev" in world.namespaces
    assert world.find(ROLE_BINDING, "dev", "tenant") is None
    waiting = ready(world, "team", "dev")
    assert (waiting["status"], waiting["reason"]) == ("False", REASON_WAITING_FOR_QUOTA)
    assert "hrq.team.compute (for team/compute)" in waiting["message"]

    made = world.keep_quotas()
    assert [(q["metadata"]["namespace"], q["metadata"]["name"]) for q in made] == [
        ("dev", "hrq.team.compute")
    ]
    # Created, but kube's quota controller has not filled status.hard in: admission would not
    # charge it yet, so still nothing.
    assert copies_into(plan(world.snapshot()), "dev") == []

    world.count_quotas()
    settle(world)
    assert world.find(ROLE_BINDING, "dev", "tenant") is not None
    assert ready(world, "team", "dev")["status"] == "True"


def test_the_plan_says_which_namespaces_wait_and_gives_the_forest_after_it() -> None:
    world = quota_root()
    world.add_subnamespace("team", "dev")
    planned = plan(world.snapshot())
    assert set(planned.waiting) == {"dev"}
    assert planned.forest is not None and planned.forest.nodes["dev"].parent == "team"
    # What the keeper makes for the namespace in the same pass, from the plan's forest.
    wanted = quota.desired_quotas(planned.forest, quota.read_hrqs(world.hrqs)[0])
    assert ("dev", "hrq.team.compute") in wanted


def test_a_namespace_under_no_hrq_gets_its_copies_at_once() -> None:
    world = quota_root()
    world.add_namespace("other", {LABEL_TYPE: "root"})
    world.add_object(ROLE_BINDING, binding("other"))
    world.add_subnamespace("other", "free")
    world.apply(plan(world.snapshot()))
    assert world.find(ROLE_BINDING, "free", "tenant") is not None
    assert ready(world, "other", "free")["status"] == "True"


def test_a_new_resource_in_the_hrq_holds_new_copies_until_it_is_counted_too() -> None:
    world = quota_root()
    world.add_subnamespace("team", "dev")
    for _ in range(3):
        world.apply(plan(world.snapshot()))
        world.keep_quotas()
        world.count_quotas()
    assert world.find(ROLE_BINDING, "dev", "tenant") is not None
    world.hrqs[0]["spec"]["hard"]["services"] = "2"
    world.keep_quotas()  # the spec is replaced; status.hard lags behind it until kube counts
    second = binding("team")
    second["metadata"]["name"] = "second"
    world.add_object(ROLE_BINDING, second)
    assert copies_into(plan(world.snapshot()), "dev") == []
    world.count_quotas()
    settle(world)
    assert world.find(ROLE_BINDING, "dev", "second") is not None


def test_stale_copies_are_still_deleted_in_a_waiting_namespace() -> None:
    """A namespace moved under an HRQ keeps no copy its new parent does not have: taking
    rights away never waits."""
    world = quota_root()
    world.add_namespace("old", {LABEL_TYPE: "root"})
    from_old = binding("old")
    from_old["metadata"]["name"] = "from-old"
    world.add_object(ROLE_BINDING, from_old)
    world.add_namespace("moved", {"accurate.cybozu.com/parent": "old"})
    settle(world)
    assert world.find(ROLE_BINDING, "moved", "from-old") is not None
    world.label_by_hand("moved", "accurate.cybozu.com/parent", "team")
    planned = plan(world.snapshot())
    assert "moved" in planned.waiting
    assert any(isinstance(a, DeleteObject) and a.namespace == "moved" for a in planned.changes())
    assert copies_into(planned, "moved") == []


def _waiting_by_the_rules(world: World, planned: Plan) -> set[str]:
    """The namespaces below an HRQ, after the pass, where no ResourceQuota kept for an HRQ
    above them counts yet (every HRQ here limits pods, unscoped, so the one of any HRQ above
    counts for all): worked out from the HRQs and the stored ResourceQuotas, not by the
    planner."""
    assert planned.forest is not None
    forest = planned.forest
    tops = {obj["metadata"]["namespace"]: obj for obj in world.hrqs}
    found = set()
    for namespace in forest.nodes:
        if forest.nodes[namespace].terminating:
            continue
        chain = [n for n in (namespace, *forest.ancestors(namespace)) if n in tops]
        names = {quota.quota_name((n, tops[n]["metadata"]["name"])) for n in chain}
        counting = [
            q
            for (where, name), q in world.quotas.items()
            if where == namespace
            and name in names
            and "pods" in ((q.get("status") or {}).get("hard") or {})
        ]
        if chain and not counting:
            found.add(namespace)
    return found


@PROPERTY_SETTINGS
@given(worlds(), st.sets(st.sampled_from(NAMES), max_size=2), st.data())
def test_no_copy_lands_where_an_hrq_does_not_count_yet_and_the_tree_still_settles(
    world, tops, data
) -> None:
    """Whatever the tree and whenever kube's quota controller gets round to counting, no pass
    copies into a namespace whose quotas do not count, and once they all count the cluster
    settles as it would without HRQs."""
    world.hrqs.extend(hrq(top) for top in sorted(tops) if top in world.namespaces)
    for _ in range(6):
        planned = plan(world.snapshot())
        waiting = _waiting_by_the_rules(world, planned)
        assert not [
            a
            for a in planned.changes()
            if isinstance(a, (CreateObject, ReplaceObject)) and a.namespace in waiting
        ]
        world.apply(planned)
        world.keep_quotas()
        if data.draw(st.booleans(), label="kube counts the new quotas now"):
            world.count_quotas()
    for _ in range(8):
        world.keep_quotas()
        world.count_quotas()
        settle(world)
        if not world.keep_quotas():
            break
    assert plan(world.snapshot()).changes() == ()
    forest = Forest.build(world.namespaces.values())
    usable = quota.HrqIndex(quota.read_hrqs(world.hrqs)[0])
    assert (
        quota.awaiting(forest, usable, quota.held_quotas(world.quotas.values()), forest.nodes) == {}
    )
    for key, sub in world.subnamespaces.items():
        reasons = {c.get("reason") for c in (sub.get("status") or {}).get("conditions") or ()}
        assert REASON_WAITING_FOR_QUOTA not in reasons, key


# Namespaces of the generated forests, and one that a parent label names but that is not there.
FOREST = ("r", "s", "t", "u", "v")
GONE = "gone"
RESOURCES = ("pods", "requests.cpu")


def scanning_hold(
    forest: Forest, hrq_objects: list[dict[str, Any]], kept: list[dict[str, Any]], names: set[str]
) -> dict[str, str]:
    """The hold check as it was before the planner got indexes: for each namespace, every HRQ
    object parsed and every kept ResourceQuota looked through (an HRQ counts there once its own
    ResourceQuota, or that of an HRQ that serves it there, counts)."""
    found = {}
    for namespace in sorted(names):
        node = forest.get(namespace)
        if node is None or node.terminating:
            continue
        limits = []
        for above in (namespace, *forest.ancestors(namespace)):
            here = [o for o in hrq_objects if o["metadata"]["namespace"] == above]
            for obj in sorted(here, key=lambda o: o["metadata"]["name"]):
                try:
                    limits.append(quota.read_hrq(obj))
                except quota.QuotaError:
                    continue
        missing = []
        for limit in limits:
            # The ResourceQuota of any HRQ above that counts the same objects (no scope here)
            # and every resource it limits, its own included, counts for it.
            chain = quota.chain_of(limits)
            serving = [o for o in limits if o.hard.keys() >= limit.hard.keys()]
            counted = False
            for other in serving:
                name = quota.quota_name(other.key)
                ours = [
                    q
                    for q in kept
                    if (q["metadata"]["namespace"], q["metadata"]["name"]) == (namespace, name)
                    and quota.hrq_of_quota(q) is not None
                ]
                # A missing one counts nothing (an HRQ that limits nothing waits for none).
                counted = counted or quota.counting(ours[-1] if ours else {}, limit)
            if not counted:
                missing.append(f"{quota.quota_name(chain.server(limit).key)} (for {limit.ref})")
        if missing:
            found[namespace] = (
                f"waiting until the ResourceQuotas counting for the hierarchical quotas above "
                f"namespace {namespace} exist and are counted: {', '.join(missing)}"
            )
    return found


@st.composite
def hold_cases(draw: st.DrawFn) -> tuple[Forest, list[Any], list[Any], set[str]]:
    """A forest (cycles, missing parents and terminating namespaces included), HRQs in it and
    beside it (some not usable), the ResourceQuotas kept for them in every state kube's quota
    controller and others may leave them in, and the namespaces a pass asks about."""
    nodes = []
    for name in FOREST:
        parent = draw(st.sampled_from([None, *FOREST, GONE]), label=f"parent of {name}")
        labels = {LABEL_PARENT: parent} if parent else {LABEL_TYPE: "root"}
        nodes.append(Node(name, labels, draw(st.booleans(), label=f"{name} terminating")))
    forest = Forest.build(nodes)
    hrqs = []
    for namespace, name in draw(
        st.sets(st.tuples(st.sampled_from([*FOREST, GONE]), st.sampled_from("ab")), max_size=5)
    ):
        hard = {r: "3" for r in draw(st.sets(st.sampled_from(RESOURCES)), label="resources")}
        if draw(st.sampled_from([False, False, True]), label="unusable spec") and hard:
            hard[sorted(hard)[0]] = "lots"
        hrqs.append(hrq(namespace, name))
        hrqs[-1]["spec"]["hard"] = hard
    kept = []
    for obj in hrqs:
        usable = quota.read_hrqs([obj])[0]
        for namespace in FOREST:
            state = draw(st.sampled_from(["none", "other", "new", "part", "unused", "counted"]))
            if state == "none" or not usable:
                continue
            kept_quota = quota.desired_quota(usable[0], namespace)
            if state == "other":
                kept_quota["metadata"]["labels"] = {}
            counted = dict(obj["spec"]["hard"])
            if state == "part" and counted:
                counted.pop(sorted(counted)[0])
            if state in ("part", "unused", "counted"):
                used = {r: "0" for r in counted if state != "unused"}
                kept_quota["status"] = {"hard": counted, "used": used}
            kept.append(kept_quota)
    names = draw(st.sets(st.sampled_from([*FOREST, GONE, "elsewhere"])), label="scope")
    return forest, hrqs, kept, names


@PROPERTY_SETTINGS
@given(hold_cases())
def test_the_hold_check_from_indexes_answers_as_scanning_every_hrq_did(case) -> None:
    """Whether the HRQs come parsed by the controller (once per spec) or from a snapshot's
    lists, and the ResourceQuotas from a lookup by namespace and name, the namespaces held and
    why are exactly those that looking through every HRQ and ResourceQuota finds."""
    forest, hrqs, kept, names = case
    expected = scanning_hold(forest, hrqs, kept, names)
    held = quota.held_quotas(kept)
    parsed = ParsedHrqs()
    parsed.update(hrqs)
    from_lists = quota.HrqIndex(quota.read_hrqs(hrqs)[0])
    assert quota.awaiting(forest, parsed.index, held, names) == expected
    assert quota.awaiting(forest, from_lists, held, names) == expected
