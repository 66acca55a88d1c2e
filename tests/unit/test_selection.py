"""Per-object propagation exceptions (issue 14 item 2): selectors, and what the planner copies."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from libaccurate.actions import CreateObject, EmitEvent, ReplaceObject
from libaccurate.constants import (
    ANNOTATION_PROPAGATE_NONE,
    ANNOTATION_PROPAGATE_SELECT,
    ANNOTATION_PROPAGATE_TREE_SELECT,
    LABEL_PARENT,
    LABEL_TYPE,
)
from libaccurate.forest import Forest
from libaccurate.planner import plan
from libaccurate.selection import selection_of
from libaccurate.selectors import SelectorError, parse_selector
from tests.unit.planner_world import SECRET, World, settle
from tests.unit.test_planner import CONFIG, secret
from tests.unit.test_treelabels import SUFFIX, TREE_CONFIG

# --- selectors --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "labels", "matches"),
    [
        ("", {}, True),
        ("env=prod", {"env": "prod"}, True),
        ("env==prod", {"env": "dev"}, False),
        ("env!=prod", {}, True),
        ("env!=prod", {"env": "prod"}, False),
        ("env in (prod, staging)", {"env": "staging"}, True),
        ("env notin (prod,staging)", {}, True),
        ("env notin (prod,staging)", {"env": "prod"}, False),
        ("team", {"team": ""}, True),
        ("!team", {"team": "a"}, False),
        (f"!a.{SUFFIX}/depth, env=prod", {"env": "prod"}, True),
        (f"!a.{SUFFIX}/depth, env=prod", {"env": "prod", f"a.{SUFFIX}/depth": "1"}, False),
    ],
)
def test_a_selector_matches_as_kubectl_l_does(text: str, labels: dict, matches: bool) -> None:
    assert parse_selector(text).matches(labels) is matches


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("env=prod,", "an empty requirement"),
        ("env in (a", "never closed"),
        ("env in ()", "in needs at least one value"),
        ("env=Not Valid!", "invalid label"),
        ("-bad-key", "invalid label key '-bad-key'"),
        ("a)", "unbalanced"),
    ],
)
def test_a_bad_selector_is_refused_with_the_part_named(text: str, fragment: str) -> None:
    with pytest.raises(SelectorError) as caught:
        parse_selector(text)
    assert fragment in str(caught.value)


def test_bad_annotations_block_the_source_and_name_the_annotation() -> None:
    def error(annotations: dict[str, str]) -> str:
        found = selection_of({"metadata": {"annotations": annotations}}).error
        assert found is not None
        return found

    assert ANNOTATION_PROPAGATE_SELECT in error({ANNOTATION_PROPAGATE_SELECT: "env in (a"})
    assert "'Team_A' is not a namespace name" in error({ANNOTATION_PROPAGATE_TREE_SELECT: "Team_A"})
    assert ANNOTATION_PROPAGATE_NONE in error({ANNOTATION_PROPAGATE_NONE: "yes"})
    assert not selection_of({"metadata": {}}).narrowed


# --- the planner ------------------------------------------------------------------------------


def world(config=TREE_CONFIG) -> World:
    """r -> a -> a1, r -> b -> b1, with labels env on a (prod) and b (dev)."""
    made = World(config=config)
    made.add_namespace("r", {LABEL_TYPE: "root"})
    made.add_namespace("a", {LABEL_PARENT: "r", "env": "prod"})
    made.add_namespace("a1", {LABEL_PARENT: "a"})
    made.add_namespace("b", {LABEL_PARENT: "r", "env": "dev"})
    made.add_namespace("b1", {LABEL_PARENT: "b", "env": "prod"})
    return made


def copies(made: World) -> set[str]:
    return {namespace for (gvk, namespace, _) in made.objects if gvk == SECRET} - {"r"}


def source(made: World, mode: str = "update", **annotations: str) -> None:
    obj = secret("r", {"k": "dg=="}, mode)
    obj["metadata"]["annotations"].update(annotations)
    made.add_object(SECRET, obj)


def annotate(made: World, **annotations: str | None) -> None:
    meta = made.obj(SECRET, "r", "s")["metadata"]
    for key, value in annotations.items():
        if value is None:
            meta["annotations"].pop(key, None)
        else:
            meta["annotations"][key] = value


@pytest.mark.parametrize(
    ("annotations", "expected"),
    [
        ({}, {"a", "a1", "b", "b1"}),
        ({ANNOTATION_PROPAGATE_SELECT: "env=prod"}, {"a", "b1"}),
        ({ANNOTATION_PROPAGATE_SELECT: f"!a.{SUFFIX}/depth"}, {"b", "b1"}),
        ({ANNOTATION_PROPAGATE_TREE_SELECT: "a, b1"}, {"a", "a1", "b1"}),
        ({ANNOTATION_PROPAGATE_TREE_SELECT: "!b"}, {"a", "a1"}),
        ({ANNOTATION_PROPAGATE_NONE: "true"}, set()),
        ({ANNOTATION_PROPAGATE_NONE: "false"}, {"a", "a1", "b", "b1"}),
    ],
)
def test_exceptions_choose_the_namespaces_copies_go_to(annotations, expected) -> None:
    made = world()
    source(made, **annotations)
    settle(made)
    assert copies(made) == expected


def test_update_mode_copies_where_the_source_stops_matching_are_deleted() -> None:
    made = world()
    source(made)
    settle(made)
    annotate(made, **{ANNOTATION_PROPAGATE_SELECT: "env=prod"})
    settle(made)
    assert copies(made) == {"a", "b1"}


def test_create_mode_copies_where_the_source_stops_matching_are_left() -> None:
    made = world()
    source(made, "create")
    settle(made)
    annotate(made, **{ANNOTATION_PROPAGATE_TREE_SELECT: "a"})
    settle(made)
    assert copies(made) == {"a", "a1", "b", "b1"}


def test_a_move_out_of_a_selected_subtree_deletes_the_copy() -> None:
    made = world()
    source(made, **{ANNOTATION_PROPAGATE_SELECT: f"a.{SUFFIX}/depth"})
    settle(made)
    assert copies(made) == {"a", "a1"}
    made.label_by_hand("a1", LABEL_PARENT, "b")
    settle(made)
    assert copies(made) == {"a"}


def test_a_typo_copies_nothing_more_deletes_nothing_and_warns_on_the_source() -> None:
    made = world()
    source(made)
    settle(made)
    made.add_namespace("a2", {LABEL_PARENT: "a"})
    annotate(made, **{ANNOTATION_PROPAGATE_SELECT: "env in (prod"})
    planned = plan(made.snapshot())
    assert not [a for a in planned.changes() if isinstance(a, (CreateObject, ReplaceObject))]
    warnings = [a for a in planned.actions if isinstance(a, EmitEvent)]
    assert len(warnings) == 1 and warnings[0].involved.name == "s"
    assert f"annotation {ANNOTATION_PROPAGATE_SELECT} cannot be parsed" in warnings[0].message
    settle(made)
    assert copies(made) == {"a", "a1", "b", "b1"}


def test_without_exceptions_and_tree_labels_the_plan_is_todays() -> None:
    made = world(CONFIG)
    source(made)
    settle(made)
    assert copies(made) == {"a", "a1", "b", "b1"}


# --- property: a plan never copies outside the selected set ---------------------------------

NAMES = ("n0", "n1", "n2", "n3", "n4", "n5")
selectors = st.sampled_from(
    ("env=prod", "env!=prod", "!env", f"!n1.{SUFFIX}/depth", f"n2.{SUFFIX}/depth", "env in (a,b)")
)
tree_selects = st.lists(
    st.tuples(st.booleans(), st.sampled_from(NAMES)), min_size=1, max_size=3
).map(lambda terms: ", ".join(("!" if negative else "") + name for negative, name in terms))


@settings(max_examples=60, deadline=None)
@given(
    parents=st.lists(st.integers(min_value=-1, max_value=5), min_size=6, max_size=6),
    envs=st.lists(st.sampled_from((None, "prod", "dev", "a")), min_size=6, max_size=6),
    select=st.none() | selectors,
    tree=st.none() | tree_selects,
    mode=st.sampled_from(("update", "create")),
)
def test_a_plan_never_copies_outside_the_selected_set(parents, envs, select, tree, mode) -> None:
    made = World(config=TREE_CONFIG)
    made.add_namespace("root", {LABEL_TYPE: "root"})
    for index, name in enumerate(NAMES):
        parent = "root" if parents[index] < 0 or parents[index] >= index else NAMES[parents[index]]
        labels = {LABEL_PARENT: parent}
        if envs[index] is not None:
            labels["env"] = envs[index]
        made.add_namespace(name, labels)
    obj = secret("root", {"k": "dg=="}, mode)
    if select is not None:
        obj["metadata"]["annotations"][ANNOTATION_PROPAGATE_SELECT] = select
    if tree is not None:
        obj["metadata"]["annotations"][ANNOTATION_PROPAGATE_TREE_SELECT] = tree
    made.add_object(SECRET, obj)
    settle(made)
    selection = selection_of(obj)
    forest = Forest.build(made.namespaces.values())
    for name in NAMES:
        labels = made.namespaces[name]["metadata"]["labels"]
        assert ((SECRET, name, "s") in made.objects) == selection.allows(name, labels, forest)
