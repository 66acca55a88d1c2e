"""Per-subtree cascading deletion (issue 14 item 3): the annotation on a SubNamespace, the
webhook's refusal without it, and the planner deleting the subtree leaves first."""

from __future__ import annotations

from libaccurate.actions import DeleteNamespace
from libaccurate.admission import DELETE, review_subnamespace
from libaccurate.constants import ANNOTATION_ALLOW_CASCADING_DELETION, LABEL_TYPE
from libaccurate.forest import Forest
from libaccurate.planner import plan
from tests.unit.planner_world import World, settle
from tests.unit.test_planner import CONFIG, condition


def tree() -> World:
    """root -> a -> b -> c, and a -> d, every one made by a SubNamespace."""
    made = World(config=CONFIG)
    made.add_namespace("root", {LABEL_TYPE: "root"})
    for parent, name in (("root", "a"), ("a", "b"), ("b", "c"), ("a", "d")):
        made.add_subnamespace(parent, name)
        settle(made)
    return made


def cascade(made: World, parent: str, name: str) -> None:
    meta = made.subnamespaces[(parent, name)]["metadata"]
    meta["annotations"] = {ANNOTATION_ALLOW_CASCADING_DELETION: "true"}


def one_pass(made: World) -> list[str]:
    """Plan and apply once, then let the namespace controller finish empty namespaces;
    returns the namespaces the pass deleted."""
    planned = plan(made.snapshot())
    made.apply(planned)
    for name, ns in list(made.namespaces.items()):
        held = any(key[0] == name for key in made.subnamespaces)
        if ns["metadata"].get("deletionTimestamp") and not held:
            del made.namespaces[name]
    return sorted(a.name for a in planned.actions if isinstance(a, DeleteNamespace))


def test_the_webhook_refuses_without_the_annotation_and_names_it() -> None:
    made = tree()
    forest = Forest.build(made.namespaces.values())
    sub = made.subnamespaces[("root", "a")]
    verdict = review_subnamespace(DELETE, None, sub, forest, (), False)
    assert not verdict.allowed
    assert f'annotate the SubNamespace with {ANNOTATION_ALLOW_CASCADING_DELETION}="true"' in (
        verdict.message
    )
    cascade(made, "root", "a")
    assert review_subnamespace(DELETE, None, sub, forest, (), False).allowed


def test_a_subtree_is_deleted_leaves_first_with_progress_in_the_status() -> None:
    made = tree()
    cascade(made, "root", "a")
    made.subnamespaces[("root", "a")]["metadata"]["deletionTimestamp"] = "2024-01-05T00:00:00Z"
    assert one_pass(made) == ["c", "d"]
    ready = condition(made, "root", "a", "Ready")
    assert ready["reason"] == "DeletingSubtree"
    assert "deleting the subtree of a, leaves first: 3 left (b, c, d)" in ready["message"]
    rounds = [one_pass(made) for _ in range(6)]
    assert [r for r in rounds if r] == [["b"], ["a"]]
    assert set(made.namespaces) == {"root"}
    assert made.subnamespaces == {}


def test_without_the_annotation_a_deleted_subnamespace_with_children_is_left_as_today() -> None:
    made = tree()
    made.subnamespaces[("b", "c")]["metadata"]["deletionTimestamp"] = "2024-01-05T00:00:00Z"
    assert one_pass(made) == ["c"]
    assert "b" in made.namespaces and ("a", "b") in made.subnamespaces


def test_a_cascade_that_started_completes_when_the_annotation_is_removed() -> None:
    """The deletion was admitted with the annotation; taking it away afterwards does not stop
    the cascade halfway (Kubernetes never takes back an admitted deletion), and the status
    says why it goes on."""
    made = tree()
    cascade(made, "root", "a")
    made.subnamespaces[("root", "a")]["metadata"]["deletionTimestamp"] = "2024-01-05T00:00:00Z"
    assert one_pass(made) == ["c", "d"]
    del made.subnamespaces[("root", "a")]["metadata"]["annotations"]

    assert one_pass(made) == ["b"]
    ready = condition(made, "root", "a", "Ready")
    assert ready["reason"] == "DeletingSubtree"
    assert ready["message"] == (
        "deleting the subtree of a, leaves first: 1 left (b); "
        f"{ANNOTATION_ALLOW_CASCADING_DELETION} was removed after the deletion was admitted, "
        "and an admitted deletion is carried out to the end"
    )
    rounds = [one_pass(made) for _ in range(6)]
    assert [r for r in rounds if r] == [["a"]]
    assert set(made.namespaces) == {"root"}
    assert made.subnamespaces == {}
    assert made.failures == []
