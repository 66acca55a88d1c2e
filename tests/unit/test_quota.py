"""The hierarchical quota rules: which ResourceQuotas the HRQs need, their statuses, verdicts."""

from __future__ import annotations

from typing import Any

from libaccurate.constants import LABEL_PARENT, LABEL_TEMPLATE, LABEL_TYPE
from libaccurate.forest import Forest
from libaccurate.quantity import parse
from libaccurate.quota import (
    API_VERSION,
    COUNT_SUBNAMESPACES,
    Hrq,
    QuotaTable,
    desired_quota,
    hrq_of_quota,
    hrqs_counted_by,
    plan_quotas,
    quota_name,
    read_hrq,
    review_move,
    review_usage,
    scope_key,
    tree_used,
)


def namespace(name: str, **labels: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": labels}}


def tree() -> Forest:
    """team (root) -> a -> a1, team -> b; tmpl (template) -> inst (instance); other (root)."""
    return Forest.build(
        [
            namespace("team", **{LABEL_TYPE: "root"}),
            namespace("a", **{LABEL_PARENT: "team"}),
            namespace("a1", **{LABEL_PARENT: "a"}),
            namespace("b", **{LABEL_PARENT: "team"}),
            namespace("tmpl", **{LABEL_TYPE: "template"}),
            namespace("inst", **{LABEL_TEMPLATE: "tmpl"}),
            namespace("other", **{LABEL_TYPE: "root"}),
        ]
    )


def hrq_object(ns: str, name: str, **hard: str) -> dict[str, Any]:
    return {
        "apiVersion": API_VERSION,
        "kind": "HierarchicalResourceQuota",
        "metadata": {"namespace": ns, "name": name},
        "spec": {"hard": hard},
    }


def with_used(quota: dict[str, Any], **used: str) -> dict[str, Any]:
    metadata = {**quota["metadata"], "uid": f"uid-{quota['metadata']['namespace']}"}
    return {**quota, "metadata": metadata, "status": {"hard": quota["spec"]["hard"], "used": used}}


def test_every_namespace_of_the_subtree_gets_a_quota_naming_the_hrq() -> None:
    hrq = read_hrq(hrq_object("team", "compute", pods="10", **{"requests.cpu": "1.5"}))
    planned = plan_quotas(tree(), [hrq_object("team", "compute", pods="10")], [])
    assert sorted(q["metadata"]["namespace"] for q in planned.create) == ["a", "a1", "b", "team"]
    quota = desired_quota(hrq, "a1")
    assert quota["metadata"]["name"] == "hrq.team.compute"
    assert quota["spec"]["hard"] == {"pods": "1P", "requests.cpu": "1P"}
    assert hrq_of_quota(quota) == ("team", "compute")


def test_instances_of_a_template_are_not_below_it() -> None:
    planned = plan_quotas(tree(), [hrq_object("tmpl", "q", pods="1")], [])
    assert [q["metadata"]["namespace"] for q in planned.create] == ["tmpl"]


def test_a_quota_left_behind_by_a_move_or_a_deleted_hrq_is_deleted() -> None:
    hrq = read_hrq(hrq_object("team", "compute", pods="10"))
    moved = with_used(desired_quota(hrq, "other"), pods="3")
    gone = with_used(desired_quota(read_hrq(hrq_object("b", "old", pods="1")), "b"), pods="0")
    planned = plan_quotas(tree(), [hrq_object("team", "compute", pods="10")], [moved, gone])
    # The one in b still counts b's pods, the only one there that does: it stays until the
    # one made for team/compute counts.
    assert sorted(planned.delete) == [("other", "hrq.team.compute", "uid-other")]
    assert ("b", "hrq.team.compute") in [
        (q["metadata"]["namespace"], q["metadata"]["name"]) for q in planned.create
    ]
    counted = with_used(desired_quota(hrq, "b"), pods="0")
    later = plan_quotas(tree(), [hrq_object("team", "compute", pods="10")], [gone, counted])
    assert later.delete == (("b", "hrq.b.old", "uid-b"),)


def test_an_hrq_served_by_another_gets_no_quota_of_its_own_once_that_one_counts() -> None:
    """``inner`` limits pods, ``root`` pods and more, counting the same objects: the quota kept
    for ``root`` serves ``inner`` in every namespace of its subtree. One kept before for
    ``inner`` goes once ``root``'s there counts, never before."""
    objects = [hrq_object("team", "compute", pods="4", cpu="2"), hrq_object("a", "more", pods="3")]
    root, inner = read_hrq(objects[0]), read_hrq(objects[1])
    planned = plan_quotas(tree(), objects, [])
    names = sorted((q["metadata"]["namespace"], q["metadata"]["name"]) for q in planned.create)
    assert names == [(n, "hrq.team.compute") for n in ("a", "a1", "b", "team")]
    kept = [with_used(desired_quota(inner, n), pods="1") for n in ("a", "a1")]
    counting = with_used(desired_quota(root, "a"), pods="1", cpu="0")
    waiting = plan_quotas(tree(), objects, [*kept, counting])
    assert waiting.delete == (("a", "hrq.a.more", "uid-a"),)
    statuses = {o["metadata"]["name"]: s for o, s in waiting.statuses}
    assert {c.type: c.status for c in statuses["more"].conditions}["Counted"] == "True"


def test_the_quota_that_serves_other_hrqs_names_them() -> None:
    """So a tenant who may not read an HRQ above their tree still learns it limits them."""
    objects = [hrq_object("team", "compute", pods="4", cpu="2"), hrq_object("a", "more", pods="3")]
    created = {q["metadata"]["namespace"]: q for q in plan_quotas(tree(), objects, []).create}
    assert hrqs_counted_by(created["a1"]) == [("team", "compute"), ("a", "more")]
    assert hrqs_counted_by(created["b"]) == [("team", "compute")]
    assert "accurate.cybozu.com/hrq-serves" not in created["b"]["metadata"]["annotations"]


def test_a_scope_reads_alike_with_or_without_an_empty_values_list() -> None:
    """The API server writes a ResourceQuota back without an empty list: not a new scope."""
    bare = {"matchExpressions": [{"scopeName": "BestEffort", "operator": "Exists"}]}
    empty = {"matchExpressions": [{"operator": "Exists", "scopeName": "BestEffort", "values": []}]}
    assert scope_key(bare) == scope_key(empty) != scope_key(None) == ""


def test_someone_elses_quota_of_that_name_is_left_alone() -> None:
    hrq = read_hrq(hrq_object("team", "compute", pods="10"))
    foreign = desired_quota(hrq, "a")
    foreign["metadata"]["labels"] = {}
    planned = plan_quotas(tree(), [hrq_object("team", "compute", pods="10")], [foreign])
    assert "a" in [q["metadata"]["namespace"] for q in planned.create]
    assert planned.delete == ()


def test_a_changed_or_edited_quota_is_put_back() -> None:
    hrq = read_hrq(hrq_object("team", "compute", pods="10"))
    quotas = [with_used(desired_quota(hrq, n), pods="1") for n in ("team", "a", "a1", "b")]
    quotas[0]["metadata"]["resourceVersion"] = "7"
    quotas[0]["spec"]["hard"] = {"pods": "100"}
    planned = plan_quotas(tree(), [hrq_object("team", "compute", pods="12")], quotas)
    assert [q["metadata"]["namespace"] for q in planned.replace] == ["team"]
    assert planned.replace[0]["spec"]["hard"] == {"pods": "1P"}
    assert planned.replace[0]["metadata"]["resourceVersion"] == "7"
    counted = plan_quotas(tree(), [hrq_object("team", "compute", cpu="1")], quotas[1:])
    assert len(counted.replace) == 3
    assert counted.replace[0]["spec"]["hard"] == {"cpu": "1P"}


def test_status_sums_the_subtree_and_says_when_over_and_what_binds_it() -> None:
    root = read_hrq(hrq_object("team", "compute", pods="4", **{"requests.cpu": "2"}))
    inner = read_hrq(hrq_object("a", "more", pods="10"))
    quotas = [
        with_used(desired_quota(root, "team"), pods="1", **{"requests.cpu": "500m"}),
        with_used(desired_quota(root, "a"), pods="2", **{"requests.cpu": "1.5"}),
        with_used(desired_quota(root, "a1"), pods="2", **{"requests.cpu": "0"}),
        with_used(desired_quota(root, "b"), pods="0", **{"requests.cpu": "250m"}),
        with_used(desired_quota(inner, "a"), pods="2"),
    ]
    objects = [
        hrq_object("team", "compute", pods="4", **{"requests.cpu": "2"}),
        hrq_object("a", "more", pods="10"),
    ]
    statuses = {o["metadata"]["name"]: s for o, s in plan_quotas(tree(), objects, quotas).statuses}
    top = statuses["compute"]
    assert top.used == {"pods": "5", "requests.cpu": "2250m"}
    assert top.summary == "pods: 5/4, requests.cpu: 2250m/2"
    exceeded = {c.type: c for c in top.conditions}["Exceeded"]
    assert exceeded.status == "True"
    assert "pods used 5 of 4" in exceeded.message
    assert "requests.cpu used 2250m of 2" in exceeded.message
    more = {c.type: c for c in statuses["more"].conditions}
    # a1 keeps no ResourceQuota for "more": the one for "compute" counts its pods for both.
    assert statuses["more"].used == {"pods": "4"}
    assert more["LimitedAbove"].status == "True"
    assert "team/compute allows pods=4" in more["LimitedAbove"].message
    assert more["Counted"].status == "True"


def test_usage_may_grow_while_the_tree_stays_within_hard() -> None:
    forest = tree()
    hrq = read_hrq(hrq_object("team", "compute", pods="3"))
    usage = QuotaTable(
        [
            with_used(desired_quota(hrq, "a"), pods="1"),
            with_used(desired_quota(hrq, "b"), pods="1"),
        ]
    )
    pods = {"pods": parse("1")}
    assert review_usage(forest, [hrq], usage, "a1", "", {}, pods) is None
    denial = review_usage(forest, [hrq], usage, "a", "", pods, {"pods": parse("3")})
    assert denial == (
        "exceeded hierarchical quota: team/compute (namespace team and every namespace below it),"
        " requested: pods=2, used: pods=2, limited: pods=3"
    )


def test_shrinking_or_unchanged_usage_passes_even_over_a_lowered_hard() -> None:
    forest = tree()
    hrq = read_hrq(hrq_object("team", "compute", pods="1"))
    usage = QuotaTable([with_used(desired_quota(hrq, "b"), pods="5")])
    five, four = {"pods": parse("5")}, {"pods": parse("4")}
    assert review_usage(forest, [hrq], usage, "b", "", five, four) is None
    assert review_usage(forest, [hrq], usage, "b", "", five, five) is None


def test_the_tightest_hrq_on_the_chain_refuses_in_the_first_update() -> None:
    forest = tree()
    root = read_hrq(hrq_object("team", "compute", pods="2"))
    inner = read_hrq(hrq_object("a", "loose", pods="10"))
    usage = QuotaTable([with_used(desired_quota(root, "b"), pods="2")])
    denial = review_usage(forest, [root, inner], usage, "a1", "", {}, {"pods": parse("1")})
    assert denial is not None
    assert denial.startswith("exceeded hierarchical quota: team/compute")


def test_an_hrq_of_another_scope_is_not_charged_for_this_write() -> None:
    forest = tree()
    scope = {
        "matchExpressions": [{"scopeName": "PriorityClass", "operator": "In", "values": ["high"]}]
    }
    scoped = Hrq("team", "high", {"pods": parse("1")}, scope)
    plain = read_hrq(hrq_object("a", "all", pods="5"))
    usage = QuotaTable([with_used(desired_quota(scoped, "b"), pods="1")])
    one = {"pods": parse("1")}
    assert review_usage(forest, [scoped, plain], usage, "a", "", {}, one) is None
    denial = review_usage(forest, [scoped, plain], usage, "a", scope_key(scope), {}, one)
    assert denial is not None and "team/high" in denial


def test_sub_namespaces_count_where_their_subnamespace_is() -> None:
    forest = tree()
    hrq = read_hrq(hrq_object("team", "subs", **{COUNT_SUBNAMESPACES: "3"}))
    assert quota_name(hrq.key) == "hrq.team.subs"
    # team holds the SubNamespaces of a and b, a the one of a1: three in the tree.
    usage = QuotaTable(
        [
            with_used(desired_quota(hrq, "team"), **{COUNT_SUBNAMESPACES: "2"}),
            with_used(desired_quota(hrq, "a"), **{COUNT_SUBNAMESPACES: "1"}),
        ]
    )
    one = {COUNT_SUBNAMESPACES: parse("1")}
    denial = review_usage(forest, [hrq], usage, "b", "", {}, one)
    assert denial is not None
    assert f"requested: {COUNT_SUBNAMESPACES}=1, used: {COUNT_SUBNAMESPACES}=3" in denial


def test_a_move_into_a_full_subtree_is_refused_with_the_numbers() -> None:
    forest = tree()
    full = read_hrq(hrq_object("team", "compute", pods="3"))
    own = read_hrq(hrq_object("other", "own", pods="10"))
    usage = QuotaTable(
        [
            with_used(desired_quota(full, "a"), pods="2"),
            with_used(desired_quota(own, "other"), pods="2"),
        ]
    )
    denial = review_move(forest, [full, own], usage, "other", "b")
    assert denial is not None
    assert denial.startswith("namespace other cannot move under b: exceeded hierarchical quota")
    assert "requested: pods=2, used: pods=2, limited: pods=3" in denial
    assert review_move(forest, [full, own], usage, "a1", "b") is None


def test_a_namespace_counts_for_an_hrq_in_the_quota_of_one_that_serves_it() -> None:
    """a1 keeps only the ResourceQuota of ``root``, which counts pods and more: it counts a1's
    pods for ``inner`` too, and where both are kept the one a write reached first counts."""
    forest = tree()
    root = read_hrq(hrq_object("team", "compute", pods="4", **{"requests.cpu": "2"}))
    inner = read_hrq(hrq_object("a", "more", pods="3"))
    usage = QuotaTable(
        [
            with_used(desired_quota(root, "b"), pods="2"),
            with_used(desired_quota(root, "a1"), pods="1"),
            with_used(desired_quota(root, "a"), pods="1"),
            with_used(desired_quota(inner, "a"), pods="2"),
        ]
    )
    assert str(tree_used(forest, inner, usage)["pods"]) == "3"
    assert str(tree_used(forest, root, usage)["pods"]) == "5"


def test_a_write_already_counted_for_one_hrq_is_not_charged_twice_for_it() -> None:
    """kube-apiserver updates the namespace's quota for ``inner`` first (0 -> 500m), then the
    one for ``root``: judging the second, the first already shows the same write."""
    forest = tree()
    root = read_hrq(hrq_object("team", "cpu", **{"requests.cpu": "1.5"}))
    inner = read_hrq(hrq_object("a", "cpu", **{"requests.cpu": "1"}))
    half = {"requests.cpu": parse("500m")}
    usage = QuotaTable(
        [
            with_used(desired_quota(root, "a1"), **{"requests.cpu": "500m"}),
            with_used(desired_quota(inner, "a1"), **{"requests.cpu": "500m"}),
            with_used(desired_quota(inner, "a"), **{"requests.cpu": "500m"}),
        ]
    )
    assert review_usage(forest, [root, inner], usage, "a", "", {}, half) is None
    more = {"requests.cpu": parse("600m")}
    denial = review_usage(forest, [root, inner], usage, "a", "", {}, more)
    assert denial is not None and denial.startswith("exceeded hierarchical quota: a/cpu")


def test_an_hrq_that_cannot_be_enforced_says_so_in_its_status() -> None:
    broken = hrq_object("team", "broken", pods="-1")
    planned = plan_quotas(tree(), [broken], [])
    assert planned.create == ()
    ((obj, status),) = planned.statuses
    assert obj is broken
    (condition,) = status.conditions
    assert (condition.type, condition.status, condition.reason) == (
        "Counted",
        "False",
        "InvalidSpec",
    )
    assert "spec.hard.pods" in condition.message
    assert "must be greater than or equal to 0" in condition.message
