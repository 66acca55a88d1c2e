"""The end of a pass: the events and statuses it sends, from what became of its writes.

Each scenario plans and applies in the in-memory world (which closes a pass as the controller
does) and looks at the events a user would find: one per source or new namespace for
routine copying, one per object for what needs a person.
"""

from __future__ import annotations

from libaccurate.actions import EmitEvent
from libaccurate.closing import close
from libaccurate.constants import LABEL_PARENT
from libaccurate.planner import Finding, plan
from tests.unit.planner_world import ROLE, World
from tests.unit.test_planner import make_world, role, tree


def events(world: World) -> list[tuple[str, str, str, str]]:
    return [(e.type, e.reason, str(e.involved), e.message) for e in world.events]


def test_copies_into_existing_namespaces_get_one_event_on_the_source():
    world = make_world()
    tree(world, *(("root1", f"sub{i}") for i in range(5)), ("sub0", "deep"))
    world.events.clear()
    world.add_object(ROLE, role("root1", mode="update"))
    world.apply(plan(world.snapshot()))
    assert events(world) == [
        (
            "Normal",
            "Propagated",
            "Role root1/admin",
            "copied to 6 namespaces: deep, sub0, sub1, ... and 3 more",
        )
    ]
    (event,) = world.events
    assert event.involved.uid == world.obj(ROLE, "root1", "admin")["metadata"]["uid"]


def test_a_new_subnamespace_gets_one_event_for_its_namespace_and_what_it_received():
    world = make_world()
    world.add_object(ROLE, role("root1", mode="update"))
    world.add_object(ROLE, role("root1", name="viewer", mode="create"))
    world.add_subnamespace("root1", "team")
    world.apply(plan(world.snapshot()))
    assert events(world) == [
        (
            "Normal",
            "NamespaceCreated",
            "SubNamespace root1/team",
            "created namespace team; copied into it: Role admin, Role viewer",
        )
    ]


def test_an_empty_new_namespace_is_told_without_a_list():
    world = make_world()
    world.add_subnamespace("root1", "team")
    world.apply(plan(world.snapshot()))
    assert [e.message for e in world.events] == ["created namespace team"]


def test_copies_deleted_down_a_tree_get_one_event_on_their_source():
    world = make_world()
    world.add_object(ROLE, role("root1", mode="update"))
    tree(world, ("root1", "a"), ("a", "b"), ("root1", "c"))
    world.events.clear()
    world.objects.pop((ROLE, "root1", "admin"))
    world.apply(plan(world.snapshot()))
    assert events(world) == [
        (
            "Normal",
            "CopiesDeleted",
            "Role root1/admin",
            "deleted the copies in 3 namespaces: a, b, c: "
            "the source is gone or no longer propagates there",
        )
    ]
    assert world.events[0].involved.uid is None


def test_a_steady_cluster_hears_nothing():
    world = make_world()
    world.add_object(ROLE, role("root1", mode="update"))
    tree(world, ("root1", "a"))
    world.events.clear()
    world.apply(plan(world.snapshot()))
    assert world.events == []


def test_every_failed_write_gets_its_own_warning_and_the_status_says_why():
    world = make_world()
    world.add_object(ROLE, role("root1", mode="update"))
    world.add_object(ROLE, role("root1", name="viewer", mode="update"))
    world.add_subnamespace("root1", "team")
    planned = plan(world.snapshot())
    creates = [s.index for s in planned.steps if s.action.describe().startswith("create Role")]
    failed = {i: Finding("failed", "forbidden") for i in creates}
    done = {s.index: Finding("done") for s in planned.steps if s.index not in failed}
    closing = close(planned, {**done, **failed})
    sent = [s.action for s in closing.sends]
    warnings = [a for a in sent if isinstance(a, EmitEvent) and a.type == "Warning"]
    assert sorted(str(w.involved) for w in warnings) == ["Role team/admin", "Role team/viewer"]
    assert {w.reason for w in warnings} == {"ApplyFailed"}
    told = [a for a in sent if isinstance(a, EmitEvent) and a.reason == "NamespaceCreated"]
    assert [t.message for t in told] == ["created namespace team"]
    (status,) = [a for a in sent if not isinstance(a, EmitEvent)]
    ready = status.status.condition("Ready")
    assert ready is not None and (ready.status, ready.reason) == ("False", "ApplyFailed")


def test_a_subnamespace_falling_into_conflict_gets_one_warning():
    world = make_world()
    world.add_namespace("taken")
    world.add_subnamespace("root1", "taken")
    world.apply(plan(world.snapshot()))
    assert [(e.type, e.reason, str(e.involved)) for e in world.events] == [
        ("Warning", "Conflict", "SubNamespace root1/taken")
    ]
    world.events.clear()
    world.apply(plan(world.snapshot()))
    assert world.events == []


def test_a_subnamespace_under_a_broken_chain_gets_one_warning():
    world = make_world()
    world.add_namespace("a", {LABEL_PARENT: "b"})
    world.add_namespace("b", {LABEL_PARENT: "a"})
    world.add_subnamespace("a", "child")
    world.apply(plan(world.snapshot()))
    warnings = [e for e in world.events if e.type == "Warning"]
    assert [(e.reason, str(e.involved)) for e in warnings] == [("Cycle", "SubNamespace a/child")]
    conditions = world.subnamespaces[("a", "child")]["status"]["conditions"]
    assert [c["message"] for c in conditions if c["type"] == "Ready"] == [warnings[0].message]
    world.events.clear()
    world.apply(plan(world.snapshot()))
    assert world.events == []


def test_a_copy_made_below_existing_copies_is_told_on_the_source_at_the_top():
    world = make_world()
    world.add_object(ROLE, role("root1", mode="update"))
    tree(world, ("root1", "a"))
    world.events.clear()
    world.add_namespace("grafted", {LABEL_PARENT: "a"})
    world.apply(plan(world.snapshot()))
    assert events(world) == [
        ("Normal", "Propagated", "Role root1/admin", "copied to 1 namespace: grafted")
    ]
