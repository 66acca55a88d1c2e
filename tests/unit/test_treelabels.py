"""Tree labels (issue 14 item 1): config, what the planner keeps, and what admission refuses."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from libaccurate.admission import CREATE, UPDATE, review_namespace
from libaccurate.config import (
    Config,
    ConfigError,
    TreeLabelSettings,
    config_to_dict,
    parse_config,
)
from libaccurate.constants import LABEL_CREATED_BY, LABEL_PARENT, LABEL_TEMPLATE, LABEL_TYPE
from libaccurate.forest import Forest
from libaccurate.planner import plan
from tests.unit.planner_world import World, settle
from tests.unit.test_planner import CONFIG, ns_labels

SUFFIX = "tree.accurate.cybozu.com"
TREE_CONFIG = dataclasses.replace(CONFIG, tree_labels=TreeLabelSettings(SUFFIX))


def depth(ancestor: str) -> str:
    return f"{ancestor}.{SUFFIX}/depth"


def tree_of(world: World, name: str) -> dict[str, str]:
    """The tree labels a user sees on a namespace."""
    return {k: v for k, v in ns_labels(world, name).items() if k.endswith(f".{SUFFIX}/depth")}


def grafted_world(config=TREE_CONFIG) -> World:
    """root1 -> a -> b -> c, grafted by hand; root2 alone; t a template with instance i."""
    world = World(config=config)
    world.add_namespace("root1", {LABEL_TYPE: "root"})
    world.add_namespace("root2", {LABEL_TYPE: "root"})
    world.add_namespace("a", {LABEL_PARENT: "root1"})
    world.add_namespace("b", {LABEL_PARENT: "a"})
    world.add_namespace("c", {LABEL_PARENT: "b"})
    world.add_namespace("t", {LABEL_TYPE: "template"})
    world.add_namespace("i", {LABEL_TEMPLATE: "t"})
    world.add_namespace("plain")
    settle(world)
    return world


# --- config ---------------------------------------------------------------------------------


def test_the_config_turns_tree_labels_on_with_a_suffix_and_round_trips() -> None:
    config = parse_config("treeLabels:\n  suffix: tree.hnc.x-k8s.io\n", "config.yaml")
    assert config.tree_label_suffix == "tree.hnc.x-k8s.io"
    assert config_to_dict(config) == {"treeLabels": {"suffix": "tree.hnc.x-k8s.io"}}
    assert parse_config("{}", "config.yaml").tree_label_suffix is None


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("treeLabels: {suffix: Not_A_Domain}", "treeLabels.suffix: must be a DNS subdomain"),
        ("treeLabels: {suffix: " + "x" * 300 + "}", "treeLabels.suffix: must be a DNS subdomain"),
        ("treeLabels: {}", "treeLabels.suffix: is required"),
        ("treeLabels: {suffix: a.b, depth: 3}", "treeLabels.depth: unknown field(s) depth"),
        ("treeLabels: on", "treeLabels: must be a mapping with suffix"),
    ],
)
def test_a_bad_tree_label_setting_is_refused_and_named(text: str, fragment: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_config(text, "config.yaml")
    assert fragment in str(caught.value)


# --- what the controller keeps ---------------------------------------------------------------


def test_every_namespace_of_a_tree_carries_one_label_per_ancestor_and_itself() -> None:
    world = grafted_world()
    assert tree_of(world, "root1") == {depth("root1"): "0"}
    assert tree_of(world, "c") == {
        depth("c"): "0",
        depth("b"): "1",
        depth("a"): "2",
        depth("root1"): "3",
    }
    assert tree_of(world, "root2") == {depth("root2"): "0"}


def test_namespaces_outside_trees_get_none_and_are_not_written() -> None:
    world = grafted_world()
    for name in ("t", "i", "plain"):
        assert tree_of(world, name) == {}
    assert "managedFields" not in world.namespaces["plain"]["metadata"]


def test_a_subnamespace_gets_its_tree_labels_when_it_is_created() -> None:
    world = grafted_world()
    world.add_subnamespace("c", "d")
    settle(world)
    assert tree_of(world, "d")[depth("root1")] == "4"
    assert ns_labels(world, "d")[LABEL_CREATED_BY] == "accurate"


def test_a_move_rewrites_the_moved_subtree_only() -> None:
    world = grafted_world()
    versions = {n: ns["metadata"]["resourceVersion"] for n, ns in world.namespaces.items()}
    world.label_by_hand("b", LABEL_PARENT, "root2")
    settle(world)
    assert tree_of(world, "c") == {depth("c"): "0", depth("b"): "1", depth("root2"): "2"}
    assert tree_of(world, "a") == {depth("a"): "0", depth("root1"): "1"}
    untouched = {"root1", "root2", "a", "t", "i", "plain"}
    assert {
        n for n in untouched if world.namespaces[n]["metadata"]["resourceVersion"] != versions[n]
    } == set()


def test_a_cut_namespace_becomes_the_top_of_its_own_tree() -> None:
    world = grafted_world()
    world.label_by_hand("b", LABEL_PARENT, None)
    world.label_by_hand("b", LABEL_TYPE, "root")
    settle(world)
    assert tree_of(world, "b") == {depth("b"): "0"}
    assert tree_of(world, "c") == {depth("c"): "0", depth("b"): "1"}


def test_a_namespace_leaving_every_tree_loses_its_tree_labels_and_keeps_the_rest() -> None:
    world = grafted_world()
    world.label_by_hand("c", LABEL_PARENT, None)
    settle(world)
    assert tree_of(world, "c") == {}
    assert ns_labels(world, "c")[LABEL_CREATED_BY] == "accurate"
    world.label_by_hand("root2", LABEL_TYPE, None)
    settle(world)
    assert tree_of(world, "root2") == {}


def test_a_hand_edit_of_a_tree_label_is_reverted_and_tree_labels_are_never_inherited() -> None:
    config = dataclasses.replace(TREE_CONFIG, label_keys=("*/*", "*"))
    world = grafted_world(config)
    world.label_by_hand("a", depth("root1"), "7")
    world.label_by_hand("a", depth("elsewhere"), "0")
    settle(world)
    assert tree_of(world, "a") == {depth("a"): "0", depth("root1"): "1", depth("elsewhere"): "0"}
    assert depth("elsewhere") not in ns_labels(world, "b")


def test_a_tree_label_too_long_to_be_a_key_is_reported_not_truncated() -> None:
    long_name = "r" * 63
    suffix = ".".join(["x" * 60] * 3) + ".example.com"
    world = World(config=Config(tree_labels=TreeLabelSettings(suffix)))
    world.add_namespace(long_name, {LABEL_TYPE: "root"})
    world.add_namespace("a", {LABEL_PARENT: long_name})
    settle(world)
    assert ns_labels(world, "a")[f"a.{suffix}/depth"] == "0"
    assert [key for key in ns_labels(world, "a") if key.endswith("/depth")] == [f"a.{suffix}/depth"]
    problems = plan(world.snapshot()).label_problems
    assert set(problems) == {long_name, "a"}
    assert f"tree label {long_name}.{suffix}/depth is not a valid label key" in problems["a"][0]
    assert "must be no more than 253 characters" in problems["a"][0]


def test_with_tree_labels_off_roots_are_not_written_and_nothing_is_reported() -> None:
    world = grafted_world(CONFIG)
    assert "managedFields" not in world.namespaces["root1"]["metadata"]
    assert all(tree_of(world, name) == {} for name in world.namespaces)
    assert plan(world.snapshot()).label_problems == {}


def _any_tree_labels(world: World, name: str) -> dict[str, str]:
    return {k: v for k, v in ns_labels(world, name).items() if k.endswith("/depth")}


@pytest.mark.parametrize(
    "after",
    [CONFIG, dataclasses.replace(CONFIG, tree_labels=TreeLabelSettings("tree.hnc.x-k8s.io"))],
)
def test_turning_tree_labels_off_or_changing_the_suffix_removes_the_controllers_own(after) -> None:
    """Roots, sub-namespaces and namespaces that left a tree alike lose the tree labels the
    controller wrote; a tree label set by hand (so not the controller's) stays."""
    world = grafted_world()
    world.label_by_hand("root2", depth("elsewhere"), "3")
    world.label_by_hand("c", LABEL_PARENT, None)
    settle(world)
    assert tree_of(world, "c") == {}
    world.label_by_hand("c", depth("c"), "0")
    world.config = after

    settle(world)

    new_suffix = after.tree_label_suffix
    by_hand = {"root2": {depth("elsewhere")}, "c": {depth("c")}}
    for name in ("root1", "a", "b", "root2", "c"):
        old = {k for k in _any_tree_labels(world, name) if not k.endswith(f".{new_suffix}/depth")}
        assert old == by_hand.get(name, set()), name
    assert ns_labels(world, "c")[LABEL_CREATED_BY] == "accurate"
    if new_suffix is not None:
        assert ns_labels(world, "b")[f"root1.{new_suffix}/depth"] == "2"
    assert plan(world.snapshot()).changes() == ()


def test_a_settled_forest_needs_no_write() -> None:
    world = grafted_world()
    assert plan(world.snapshot()).changes() == ()


# --- property: tree labels follow the forest ---------------------------------------------------

NAMES = ("n0", "n1", "n2", "n3", "n4", "n5", "n6", "n7")
ROOTS = ("r0", "r1")
moves = st.lists(
    st.tuples(st.sampled_from(NAMES), st.sampled_from((*NAMES, *ROOTS, None))), max_size=12
)


def _in_subtree(world: World, top: str, name: str) -> bool:
    current: str | None = name
    while current is not None:
        if current == top:
            return True
        current = ns_labels(world, current).get(LABEL_PARENT)
    return False


def _expected(world: World, name: str) -> dict[str, str]:
    """Walk the parent labels up; a tree ends at a root label."""
    chain = [name]
    parent = ns_labels(world, name).get(LABEL_PARENT)
    while parent is not None:
        chain.append(parent)
        parent = ns_labels(world, parent).get(LABEL_PARENT)
    if ns_labels(world, chain[-1]).get(LABEL_TYPE) != "root":
        return {}
    return {depth(ancestor): str(distance) for distance, ancestor in enumerate(chain)}


@settings(max_examples=40, deadline=None)
@given(moves)
def test_tree_labels_equal_the_forest_ancestry_after_any_moves(steps) -> None:
    world = World(config=TREE_CONFIG)
    for root in ROOTS:
        world.add_namespace(root, {LABEL_TYPE: "root"})
    for name in NAMES:
        world.add_namespace(name, {LABEL_PARENT: "r0"})
    settle(world)
    for name, parent in steps:
        if parent is not None and _in_subtree(world, name, parent):
            continue  # admission refuses cycles
        world.label_by_hand(name, LABEL_PARENT, parent)
        settle(world)
        for each in world.namespaces:
            assert tree_of(world, each) == _expected(world, each)


# --- admission --------------------------------------------------------------------------------


def _admission_forest(world: World) -> Forest:
    return Forest.build(world.namespaces.values())


def test_a_hand_edit_of_a_tree_label_is_refused_with_the_label_named() -> None:
    world = grafted_world()
    old = world.namespaces["b"]
    new = {
        **old,
        "metadata": {**old["metadata"], "labels": {**ns_labels(world, "b"), depth("a"): "5"}},
    }
    verdict = review_namespace(UPDATE, new, old, _admission_forest(world), False, SUFFIX)
    assert not verdict.allowed
    assert f"label {depth('a')} of namespace b is a tree label" in verdict.message
    assert "it must be '1'" in verdict.message
    removed = {k: v for k, v in ns_labels(world, "b").items() if k != depth("root1")}
    gone = {**old, "metadata": {**old["metadata"], "labels": removed}}
    assert not review_namespace(UPDATE, gone, old, _admission_forest(world), False, SUFFIX).allowed
    planted = {"metadata": {"name": "new", "labels": {depth("root1"): "1"}}}
    verdict = review_namespace(CREATE, planted, None, _admission_forest(world), False, SUFFIX)
    assert not verdict.allowed and "it must not be set" in verdict.message


def test_the_controllers_update_after_a_move_is_allowed_and_off_means_unchecked() -> None:
    world = grafted_world()
    world.label_by_hand("b", LABEL_PARENT, "root2")
    old = world.namespaces["c"]
    labels = {k: v for k, v in ns_labels(world, "c").items() if not k.endswith("/depth")}
    labels.update({depth("c"): "0", depth("b"): "1", depth("root2"): "2"})
    new = {**old, "metadata": {**old["metadata"], "labels": labels}}
    assert review_namespace(UPDATE, new, old, _admission_forest(world), False, SUFFIX).allowed
    wrong = {**new, "metadata": {**new["metadata"], "labels": {**labels, depth("x"): "9"}}}
    assert review_namespace(UPDATE, wrong, old, _admission_forest(world), False, None).allowed


def test_a_tree_label_outside_every_tree_is_refused_and_its_removal_allowed() -> None:
    world = grafted_world()
    old = world.namespaces["plain"]
    forest = _admission_forest(world)

    def with_labels(obj: dict, labels: dict[str, str]) -> dict:
        return {**obj, "metadata": {**obj["metadata"], "labels": labels}}

    for key, value in ((depth("root1"), "1"), (depth("plain"), "0")):
        added = with_labels(old, {**ns_labels(world, "plain"), key: value})
        verdict = review_namespace(UPDATE, added, old, forest, False, SUFFIX)
        assert not verdict.allowed
        assert f"label {key} of namespace plain is a tree label" in verdict.message
        assert "it must not be set" in verdict.message
        assert review_namespace(UPDATE, old, added, forest, False, SUFFIX).allowed
