"""The namespace forest: relations, queries, and the broken states webhooks should prevent."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from libaccurate.constants import LABEL_PARENT, LABEL_TEMPLATE, LABEL_TYPE
from libaccurate.forest import Chain, Forest, Node, Problem, node_from_object


def ns(
    name: str,
    *,
    type: str | None = None,
    parent: str | None = None,
    template: str | None = None,
    **extra: Any,
) -> dict[str, Any]:
    labels = {}
    if type is not None:
        labels[LABEL_TYPE] = type
    if parent is not None:
        labels[LABEL_PARENT] = parent
    if template is not None:
        labels[LABEL_TEMPLATE] = template
    return {"metadata": {"name": name, "labels": labels, **extra}}


@pytest.fixture
def forest() -> Forest:
    """root1 > (sub-b > sub-b1, sub-a); tmpl > (tmpl2 > inst2, inst1, root1); plain."""
    return Forest.build(
        [
            ns("root1", type="root", template="tmpl"),
            ns("sub-b", parent="root1"),
            ns("sub-a", parent="root1"),
            ns("sub-b1", parent="sub-b"),
            ns("tmpl", type="template"),
            ns("tmpl2", type="template", template="tmpl"),
            ns("inst1", template="tmpl"),
            ns("inst2", template="tmpl2"),
            ns("plain"),
        ]
    )


# Nodes


@pytest.mark.parametrize(
    ("labels", "kind"),
    [
        ({LABEL_TYPE: "root"}, "root"),
        ({LABEL_TYPE: "root", LABEL_TEMPLATE: "t"}, "root"),
        ({LABEL_TYPE: "template"}, "template"),
        ({LABEL_PARENT: "p"}, "subnamespace"),
        ({LABEL_PARENT: "p", LABEL_TEMPLATE: "t"}, "subnamespace"),
        ({LABEL_TEMPLATE: "t"}, "instance"),
        ({}, "plain"),
        ({LABEL_TYPE: "other"}, "plain"),
        ({LABEL_PARENT: "", LABEL_TEMPLATE: ""}, "plain"),
    ],
)
def test_kind_of_a_namespace(labels: dict[str, str], kind: str) -> None:
    assert Node("x", labels).kind == kind


def test_parent_wins_over_template_as_the_source() -> None:
    node = Node("x", {LABEL_PARENT: "p", LABEL_TEMPLATE: "t", LABEL_TYPE: "root"})

    assert node.source == "p"
    assert (node.parent, node.template, node.type) == ("p", "t", "root")
    assert not node.is_root
    assert Node("y", {LABEL_TEMPLATE: "t"}).source == "t"
    assert Node("z", {LABEL_PARENT: "", LABEL_TEMPLATE: ""}).source is None


def test_a_sub_namespace_labelled_template_is_not_a_template() -> None:
    assert Node("t", {LABEL_TYPE: "template"}).is_template
    assert not Node("t", {LABEL_TYPE: "template", LABEL_PARENT: "p"}).is_template


def test_node_from_object_reads_labels_and_termination() -> None:
    assert node_from_object({"metadata": {"name": "a"}}) == Node("a", {})
    deleting = node_from_object(ns("a", deletionTimestamp="2024-01-01T00:00:00Z"))
    terminating = node_from_object({**ns("b"), "status": {"phase": "Terminating"}})
    active = node_from_object({**ns("c", type="root"), "status": {"phase": "Active"}})

    assert deleting.terminating
    assert terminating.terminating
    assert not active.terminating
    assert active.is_root


# Building and lookup


def test_build_accepts_objects_and_nodes(forest: Forest) -> None:
    mixed = Forest.build([ns("a", type="root"), Node("b", {LABEL_PARENT: "a"})])

    assert "b" in mixed
    assert "zzz" not in mixed
    assert len(mixed) == 2
    assert {node.name for node in mixed} == {"a", "b"}
    assert mixed.get("b") == Node("b", {LABEL_PARENT: "a"})
    assert mixed.get("zzz") is None
    assert len(forest) == 9


def test_children_instances_and_dependents_are_sorted(forest: Forest) -> None:
    assert forest.children("root1") == ("sub-a", "sub-b")
    assert forest.children("sub-b") == ("sub-b1",)
    assert forest.children("plain") == ()
    assert forest.instances("tmpl") == ("inst1", "root1", "tmpl2")
    assert forest.dependents("root1") == ("sub-a", "sub-b")
    assert forest.dependents("tmpl") == ("inst1", "root1", "tmpl2")


def test_a_sub_namespace_with_a_template_label_is_not_an_instance() -> None:
    forest = Forest.build(
        [ns("t", type="template"), ns("r", type="root"), ns("s", parent="r", template="t")]
    )

    assert forest.instances("t") == ()
    assert forest.children("r") == ("s",)


def test_roots_and_top_level_templates(forest: Forest) -> None:
    assert forest.roots() == ("root1",)
    assert forest.templates() == ("tmpl",)


# Chains and problems


def test_walk_sources_to_the_top(forest: Forest) -> None:
    assert forest.walk_sources("sub-b1") == Chain(("sub-b1", "sub-b", "root1", "tmpl"), "top")
    assert forest.walk_sources("plain") == Chain(("plain",), "top")


def test_walk_sources_with_a_replaced_first_hop(forest: Forest) -> None:
    assert forest.walk_sources("root1", first="sub-b1") == Chain(
        ("root1", "sub-b1", "sub-b", "root1"), "cycle"
    )
    assert forest.walk_sources("new", first="new") == Chain(("new", "new"), "cycle")
    assert forest.walk_sources("new", first="sub-a") == Chain(
        ("new", "sub-a", "root1", "tmpl"), "top"
    )
    assert forest.walk_sources("new", first="gone") == Chain(("new", "gone"), "missing")


def test_cycles_and_missing_references_are_found_and_named() -> None:
    forest = Forest.build(
        [
            ns("a", parent="b"),
            ns("b", parent="a"),
            ns("c", parent="a"),
            ns("d", template="missing"),
            ns("e", parent="d"),
            ns("ok", type="root"),
        ]
    )

    assert forest.problem("a") == Problem("Cycle", ("a", "b", "a"))
    assert forest.problem("c") == Problem("Cycle", ("c", "a", "b", "a"))
    assert forest.problem("e") == Problem("MissingReference", ("e", "d", "missing"))
    assert forest.problem("ok") is None
    assert set(forest.problems()) == {"a", "b", "c", "d", "e"}
    assert Problem("Cycle", ("a", "b", "a")).message == (
        "parent/template references form a cycle: a -> b -> a"
    )
    assert Problem("MissingReference", ("d", "missing")).message == (
        "parent/template reference to a namespace that does not exist: d -> missing"
    )


# Tree queries


def test_ancestors_and_root(forest: Forest) -> None:
    assert forest.ancestors("sub-b1") == ("sub-b", "root1")
    assert forest.ancestors("root1") == ()
    assert forest.root_of("sub-b1") == "root1"
    assert forest.root_of("root1") == "root1"
    assert forest.root_of("plain") is None
    assert forest.root_of("inst1") is None


def test_root_of_a_broken_tree_is_none() -> None:
    forest = Forest.build(
        [
            ns("a", parent="b"),
            ns("b", parent="a"),
            ns("c", parent="gone"),
            ns("d", parent="p"),
            ns("p"),
        ]
    )

    assert forest.ancestors("a") == ("b",)
    assert forest.root_of("a") is None
    assert forest.ancestors("c") == ("gone",)
    assert forest.root_of("c") is None
    assert forest.root_of("d") is None


def test_subtree_and_downstream(forest: Forest) -> None:
    assert forest.subtree("root1") == ("root1", "sub-a", "sub-b", "sub-b1")
    assert forest.subtree("sub-b1") == ("sub-b1",)
    assert forest.downstream("tmpl") == (
        "tmpl",
        "inst1",
        "root1",
        "sub-a",
        "sub-b",
        "sub-b1",
        "tmpl2",
        "inst2",
    )


def test_top_down_lists_sound_namespaces_sources_first(forest: Forest) -> None:
    broken = Forest.build(
        [
            *forest,
            ns("x", parent="y"),
            ns("y", parent="x"),
            ns("z", template="gone"),
        ]
    )

    assert forest.top_down() == (
        "plain",
        "tmpl",
        "inst1",
        "root1",
        "sub-a",
        "sub-b",
        "sub-b1",
        "tmpl2",
        "inst2",
    )
    assert broken.top_down() == forest.top_down()


# Property tests over random label graphs, against a naive recomputation.

NAMES = [f"n{i}" for i in range(7)]
_reference = st.none() | st.sampled_from([*NAMES, "missing"])


@st.composite
def forests(draw: st.DrawFn) -> Forest:
    names = draw(st.lists(st.sampled_from(NAMES), min_size=1, unique=True))
    return Forest.build(
        ns(
            name,
            type=draw(st.sampled_from([None, "root", "template", "other"])),
            parent=draw(_reference),
            template=draw(_reference),
        )
        for name in names
    )


def naive_walk(forest: Forest, name: str, step: str) -> tuple[list[str], str]:
    """Follow one kind of link ('source' or 'parent') from ``name`` with plain loops."""
    seen = [name]
    while True:
        node = forest.nodes.get(seen[-1])
        if node is None:
            return seen, "missing"
        nxt = getattr(node, step)
        if nxt is None:
            return seen, "top"
        if nxt in seen:
            return [*seen, nxt], "cycle"
        seen.append(nxt)


def reaches(forest: Forest, start: str, target: str, step: str) -> bool:
    chain, _ = naive_walk(forest, start, step)
    return target in chain[: len(set(chain))]


@given(forests())
def test_problem_is_none_exactly_when_the_chain_reaches_a_top(forest: Forest) -> None:
    for name in forest.nodes:
        chain, end = naive_walk(forest, name, "source")
        problem = forest.problem(name)
        assert (problem is None) == (end == "top")
        assert forest.walk_sources(name) == Chain(tuple(chain), end)  # type: ignore[arg-type]
        if problem is not None:
            assert problem.namespaces == tuple(chain)
            assert problem.reason == ("Cycle" if end == "cycle" else "MissingReference")


@given(forests())
def test_top_down_puts_every_sound_namespace_after_its_source(forest: Forest) -> None:
    order = forest.top_down()

    assert len(order) == len(set(order))
    assert set(order) == {name for name in forest.nodes if forest.problem(name) is None}
    position = {name: index for index, name in enumerate(order)}
    for name in order:
        source = forest.nodes[name].source
        if source is not None:
            assert position[source] < position[name]


@given(forests())
def test_subtree_and_downstream_match_a_naive_recomputation(forest: Forest) -> None:
    for name in forest.nodes:
        for query, step in ((forest.subtree, "parent"), (forest.downstream, "source")):
            result = query(name)
            expected = {other for other in forest.nodes if reaches(forest, other, name, step)}
            assert result[0] == name
            assert len(result) == len(set(result))
            assert set(result) == expected | {name}
            for member in result[1:]:
                link = getattr(forest.nodes[member], step)
                assert result.index(link) < result.index(member)


@given(forests())
def test_ancestors_and_root_of_match_a_naive_recomputation(forest: Forest) -> None:
    for name in forest.nodes:
        chain, end = naive_walk(forest, name, "parent")
        expected = chain[1:-1] if end == "cycle" else chain[1:]
        assert forest.ancestors(name) == tuple(expected)
        top = forest.nodes.get((chain[:-1] if end == "cycle" else chain)[-1])
        expected_root = top.name if top is not None and top.is_root else None
        assert forest.root_of(name) == expected_root
        for child in forest.children(name):
            assert forest.nodes[child].parent == name
        for instance in forest.instances(name):
            node = forest.nodes[instance]
            assert node.template == name and node.parent is None


# A forest kept current one namespace at a time answers as one built from the same namespaces.


@st.composite
def nodes(draw: st.DrawFn) -> Node:
    return node_from_object(
        ns(
            draw(st.sampled_from(NAMES)),
            type=draw(st.sampled_from([None, "root", "template", "other"])),
            parent=draw(_reference),
            template=draw(_reference),
        )
    )


_changes = st.lists(nodes() | st.sampled_from([*NAMES, "missing"]), max_size=30)


def answers(forest: Forest) -> dict[str, Any]:
    """Everything a forest tells about every name it may be asked about."""
    names = [*NAMES, "missing"]
    return {
        "nodes": dict(forest.nodes),
        "dependents": {name: forest.dependents(name) for name in names},
        "problems": {name: forest.problem(name) for name in names},
        "roots": forest.roots(),
        "templates": forest.templates(),
        "top_down": forest.top_down(),
    }


@given(forests(), _changes)
def test_upserts_and_removals_match_a_forest_built_from_the_result(
    forest: Forest, changes: list[Node | str]
) -> None:
    held = dict(forest.nodes)
    forest.problems()  # memoised answers must not outlive the changes below
    for change in changes:
        if isinstance(change, Node):
            forest.upsert(change)
            held[change.name] = change
        else:
            forest.remove(change)
            held.pop(change, None)
        assert answers(forest) == answers(Forest.build(held.values()))


def test_moving_a_namespace_updates_both_parents_and_what_breaks_below() -> None:
    forest = Forest.build([ns("a", type="root"), ns("b", type="root"), ns("c", parent="a")])
    forest.upsert(node_from_object(ns("c", parent="b")))
    assert (forest.children("a"), forest.children("b")) == ((), ("c",))
    forest.remove("b")
    assert forest.problem("c") == Problem("MissingReference", ("c", "b"))


@given(forests(), st.lists(st.sampled_from([*NAMES, "missing"])))
def test_top_down_within_an_upward_closed_set_is_the_whole_walk_restricted(
    forest: Forest, names: list[str]
) -> None:
    within = forest.upward(names)

    assert set(names) <= within
    for name in within:
        assert set(forest.walk_sources(name).names) <= within
    assert forest.top_down(within) == tuple(n for n in forest.top_down() if n in within)


@given(forests(), _changes)
def test_a_copy_changes_apart_from_its_original(forest: Forest, changes: list[Node | str]) -> None:
    before = answers(forest)
    copied = forest.copy()
    assert answers(copied) == before
    for change in changes:
        if isinstance(change, Node):
            copied.upsert(change)
        else:
            copied.remove(change)
    assert answers(forest) == before
