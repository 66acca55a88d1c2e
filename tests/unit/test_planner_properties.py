"""Properties of the planner over generated clusters (DESIGN.md 7).

Clusters are generated in arbitrary states (including cycles, dangling references, stale
copies, conflicts and deletions in progress) and in settled states disturbed by a user; plans
are applied by the in-memory world, which behaves like the API server.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from libaccurate.actions import (
    Action,
    AnnotateObject,
    DeleteNamespace,
    DeleteObject,
    ReplaceObject,
)
from libaccurate.cloning import clone, copied_from, propagate_mode
from libaccurate.config import Config
from libaccurate.constants import (
    ANNOTATION_FROM,
    ANNOTATION_PROPAGATE,
    FIELD_MANAGER,
    LABEL_PARENT,
    LABEL_TEMPLATE,
    LABEL_TYPE,
    PROPAGATE_UPDATE,
)
from libaccurate.forest import Forest
from libaccurate.index import NAMESPACES, SUBNAMESPACES, Index, Indexes, Kind
from libaccurate.ownership import owned_keys, updated_by_go_controller
from libaccurate.planner import Plan, Snapshot, about, affected, plan
from tests.unit.planner_world import ROLE, SECRET, World, settle

CONFIG = Config(
    label_keys=("team",),
    annotation_keys=("memo",),
    sub_namespace_label_keys=("env",),
    watches=(ROLE, SECRET),
)
NAMES = ("a", "b", "c", "d", "e", "f")
MODES = st.sampled_from([None, "create", "update"])
VALUES = st.sampled_from(["1", "2"])


@st.composite
def namespaces(draw, world: World) -> list[str]:
    count = draw(st.integers(1, len(NAMES)))
    names = list(NAMES[:count])
    for index, name in enumerate(names):
        labels: dict[str, str] = {}
        role = draw(st.sampled_from(["root", "template", "sub", "instance", "plain"]))
        if role in ("root", "template"):
            labels[LABEL_TYPE] = role
        if role in ("sub", "instance"):
            earlier = names[:index]
            upper = (
                draw(st.sampled_from(earlier))
                if earlier and draw(st.integers(0, 4))
                else draw(st.sampled_from([*names, "gone"]))
            )
            labels[LABEL_PARENT if role == "sub" else LABEL_TEMPLATE] = upper
        if draw(st.booleans()):
            labels["team"] = draw(VALUES)
        applied = {"team": draw(VALUES)} if draw(st.booleans()) else None
        memo = {"memo": draw(VALUES)} if draw(st.booleans()) else None
        # Written by a Go Accurate older than v1.4, by update.
        by_go = {key: draw(VALUES) for key in draw(st.sets(st.sampled_from(["team", "env"])))}
        world.add_namespace(
            name,
            labels,
            memo,
            applied=applied,
            by_go=by_go,
            terminating=draw(st.integers(0, 9)) == 0,
        )
    return names


def _has_dependents(world: World, name: str) -> bool:
    return any(
        (ns["metadata"].get("labels") or {}).get(LABEL_PARENT) == name
        or (ns["metadata"].get("labels") or {}).get(LABEL_TEMPLATE) == name
        for ns in world.namespaces.values()
    ) or any(key[0] == name for key in world.subnamespaces)


@st.composite
def subnamespaces(draw, world: World, names: list[str]) -> None:
    for _ in range(draw(st.integers(0, 4))):
        parent = draw(st.sampled_from(names))
        name = draw(st.sampled_from([*names, "n1", "n2"]))
        if (parent, name) in world.subnamespaces or parent == name:
            continue
        deleting = draw(st.integers(0, 4)) == 0
        world.add_subnamespace(
            parent,
            name,
            {"env": draw(VALUES)} if draw(st.booleans()) else None,
            finalizer=draw(st.integers(0, 4)) > 0,
            deleting=deleting,
            created=f"2024-01-0{draw(st.integers(1, 9))}T00:00:00Z",
        )
    for (_, name), sub in world.subnamespaces.items():
        if _has_dependents(world, name):
            # Admission denies deleting a SubNamespace whose namespace has children.
            sub["metadata"].pop("deletionTimestamp", None)


@st.composite
def objects(draw, world: World, names: list[str]) -> None:
    for gvk in (ROLE, SECRET):
        for _ in range(draw(st.integers(0, 5))):
            annotations: dict[str, str] = {}
            mode = draw(MODES)
            if mode:
                annotations[ANNOTATION_PROPAGATE] = mode
            if draw(st.booleans()):
                annotations[ANNOTATION_FROM] = draw(st.sampled_from(names))
            meta = {
                "namespace": draw(st.sampled_from(names)),
                "name": draw(st.sampled_from(["x", "y"])),
                "annotations": annotations,
            }
            body = (
                {"rules": [{"verbs": [draw(VALUES)]}] * draw(st.integers(0, 2))}
                if gvk == ROLE
                else {"data": {draw(VALUES): draw(VALUES)} if draw(st.booleans()) else {}}
            )
            obj: dict[str, Any] = {"metadata": meta, **body}
            if draw(st.integers(0, 3)) == 0 and annotations.get(ANNOTATION_FROM):
                obj = clone(world.add_object(gvk, obj), meta["namespace"], CONFIG)
                obj["metadata"]["annotations"][ANNOTATION_FROM] = annotations[ANNOTATION_FROM]
            world.add_object(gvk, obj)


@st.composite
def worlds(draw) -> World:
    world = World(config=CONFIG)
    names = draw(namespaces(world))
    draw(subnamespaces(world, names))
    draw(objects(world, names))
    return world


def _cycles(world: World) -> set[str]:
    """Namespaces on a cycle (not those merely below one)."""
    forest = Forest.build(world.namespaces.values())
    members: set[str] = set()
    for problem in forest.problems().values():
        if problem.reason == "Cycle":
            chain = problem.namespaces
            members.update(chain[chain.index(chain[-1]) : -1])
    return members


PROPERTY_SETTINGS = settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)


@PROPERTY_SETTINGS
@given(worlds())
def test_applying_a_plan_reaches_a_fixpoint_in_one_pass(world):
    """One pass does everything, except claiming a name that the same pass freed: a
    SubNamespace whose namespace name is held by one being deleted gets it in the next pass,
    as on a cluster, where the deletion takes a while."""
    first = plan(world.snapshot())
    world.apply(first)
    assert world.failures == []
    freed = {a.name for a in first.changes() if isinstance(a, DeleteNamespace)}
    second = plan(world.snapshot())
    assert {about(a) for a in second.changes()} <= freed
    world.apply(second)
    assert world.failures == []
    assert plan(world.snapshot()).changes() == ()


@PROPERTY_SETTINGS
@given(worlds())
def test_no_key_the_controller_keeps_stays_with_the_go_controllers_update_entries(world):
    """Once settled, a namespace that inherits holds no inherited key through an entry of a Go
    Accurate older than v1.4, so the key goes when its source loses it."""
    settle(world)
    forest = Forest.build(world.namespaces.values())
    for name, namespace in world.namespaces.items():
        node = forest.nodes[name]
        if node.source is None or node.terminating or forest.problem(name) is not None:
            continue
        held = owned_keys(
            namespace["metadata"].get("managedFields") or (), updated_by_go_controller
        )
        kept = {"team", "env"} if node.parent is not None else {"team"}
        assert not held.labels & kept, name


@PROPERTY_SETTINGS
@given(worlds())
def test_a_plan_never_creates_a_cycle(world):
    before = _cycles(world)
    world.apply(plan(world.snapshot()))
    assert _cycles(world) <= before


@PROPERTY_SETTINGS
@given(worlds())
def test_objects_without_from_are_only_ever_replaced_by_update_mode_copies(world):
    originals = {
        (gvk.api_version, gvk.kind, ns, name): obj
        for (gvk, ns, name), obj in world.objects.items()
        if copied_from(obj) is None
    }
    for action in plan(world.snapshot()).actions:
        assert not isinstance(action, AnnotateObject)
        if isinstance(action, DeleteObject):
            assert action.ref.key not in originals
        if isinstance(action, ReplaceObject) and action.ref.key in originals:
            assert propagate_mode(action.object) == PROPAGATE_UPDATE


@PROPERTY_SETTINGS
@given(worlds(), st.data())
def test_a_settled_cluster_disturbed_by_a_user_settles_in_one_pass(world, data):
    world.apply(plan(world.snapshot()))
    world.failures.clear()
    copies = [key for key, obj in world.objects.items() if copied_from(obj) is not None]
    if copies:
        key = data.draw(st.sampled_from(copies))
        if data.draw(st.booleans()):
            del world.objects[key]
        else:
            world.objects[key].setdefault("metadata", {})["labels"] = {"edited": "yes"}
    sources = [key for key, obj in world.objects.items() if propagate_mode(obj) is not None]
    if sources:
        source = world.objects[data.draw(st.sampled_from(sources))]
        if "rules" in source:
            source["rules"] = [{"verbs": ["changed"]}]
        else:
            source.pop("data", None)
    names = sorted(world.namespaces)
    world.label_by_hand(
        data.draw(st.sampled_from(names)), "team", data.draw(st.sampled_from([None, "1", "9"]))
    )
    world.apply(plan(world.snapshot()))
    assert world.failures == []
    assert plan(world.snapshot()).changes() == ()


def _scoped(snapshot: Snapshot, scope: Iterable[str]) -> Snapshot:
    """The snapshot as a controller that keeps a forest plans what changed."""
    forest = Forest.build(snapshot.namespaces)
    return dataclasses.replace(snapshot, forest=forest, scope=frozenset(scope))


def _steps(planned: Plan) -> list[tuple[int, Action, tuple[Action, ...]]]:
    """Each step with what it waits for, by action rather than by index."""
    return [
        (step.stage, step.action, tuple(planned.steps[i].action for i in step.after))
        for step in planned.steps
    ]


@PROPERTY_SETTINGS
@given(worlds(), st.data())
def test_a_scoped_plan_is_the_whole_plan_about_its_scope(world, data):
    """Whatever the scope, planning only it gives what the whole plan says about it, in the
    same order and with the same prerequisites among those steps."""
    scope = set(data.draw(st.lists(st.sampled_from([*NAMES, "n1", "n2", "gone"]))))
    snapshot = world.snapshot()
    whole = plan(snapshot)
    part = plan(_scoped(snapshot, scope))
    assert [action for _, action, _ in _steps(part)] == [
        a for a in whole.actions if about(a) in scope
    ]
    kept = {id(a) for a in whole.actions if about(a) in scope}
    assert _steps(part) == [
        (stage, action, tuple(a for a in after if id(a) in kept))
        for stage, action, after in _steps(whole)
        if id(action) in kept
    ]
    assert part.statuses == {k: v for k, v in whole.statuses.items() if k[1] in scope}
    assert part.problems == {k: v for k, v in whole.problems.items() if k in scope}
    # Writes due on the chains the scope inherits through are told, and only real ones.
    elsewhere = {about(a) for a in whole.changes()} - scope
    if elsewhere & Forest.build(snapshot.namespaces).upward(scope):
        assert part.beyond_scope
    if part.beyond_scope:
        assert elsewhere


@PROPERTY_SETTINGS
@given(worlds(), st.data())
def test_planning_only_what_changed_settles_a_disturbed_cluster(world, data):
    """A settled cluster disturbed by a user settles when the controller plans only what the
    change affects: the namespaces written and everything downstream of them."""
    settle(world)
    world.failures.clear()
    changed: set[str] = set()
    copies = [key for key, obj in world.objects.items() if copied_from(obj) is not None]
    if copies and data.draw(st.booleans()):
        key = data.draw(st.sampled_from(copies))
        del world.objects[key]
        changed.add(key[1])
    sources = [key for key, obj in world.objects.items() if propagate_mode(obj) is not None]
    if sources and data.draw(st.booleans()):
        key = data.draw(st.sampled_from(sources))
        world.objects[key].pop("data", None)
        world.objects[key]["rules"] = [{"verbs": ["changed"]}]
        changed.add(key[1])
    name = data.draw(st.sampled_from(sorted(world.namespaces)))
    world.label_by_hand(name, "team", data.draw(st.sampled_from([None, "1", "9"])))
    changed.add(name)
    snapshot = world.snapshot()
    world.apply(plan(_scoped(snapshot, affected(Forest.build(snapshot.namespaces), changed))))
    assert world.failures == []
    assert plan(world.snapshot()).changes() == ()


def _state(world: World) -> dict[Kind, dict[tuple[str, str], Any]]:
    """Every object of the world by kind and (namespace, name), as a watch would see it."""
    snapshot = world.snapshot()
    state: dict[Kind, dict[tuple[str, str], Any]] = {
        NAMESPACES: {("", ns["metadata"]["name"]): ns for ns in snapshot.namespaces},
        SUBNAMESPACES: {
            (sub["metadata"]["namespace"], sub["metadata"]["name"]): sub
            for sub in snapshot.subnamespaces
        },
    }
    for gvk, items in snapshot.objects.items():
        state[gvk] = {(o["metadata"]["namespace"], o["metadata"]["name"]): o for o in items}
    return state


def _watch(kept: Indexes, before: dict, after: dict) -> set[str]:
    """Feed ``kept`` the events between two states, one object at a time, as the cache does;
    the namespaces they are about (controller.passes.namespaces_of)."""
    changed: set[str] = set()
    for kind, objects in after.items():
        earlier = before.get(kind, {})
        for key in earlier.keys() - objects.keys():
            kept.forget(kind, *key)
        for key, obj in objects.items():
            if earlier.get(key) != obj:
                kept.put(kind, obj)
        moved = {k for k in earlier.keys() | objects.keys() if earlier.get(k) != objects.get(k)}
        changed.update(key[1] if kind in (NAMESPACES, SUBNAMESPACES) else key[0] for key in moved)
    return changed


def _seen(planned: Plan) -> tuple[Any, ...]:
    """What a plan says, but for its forest (a working copy that has no equality)."""
    return (
        _steps(planned),
        planned.statuses,
        planned.problems,
        planned.label_problems,
        planned.beyond_scope,
        planned.waiting,
        dict(planned.subnamespaces),
        dict(planned.namespaces),
    )


@PROPERTY_SETTINGS
@given(worlds(), st.data())
def test_an_index_kept_one_event_at_a_time_plans_as_the_lists_do(world, data):
    """The controller keeps the planner's index from watch events rather than building it
    each pass: after any mix of its own passes and a user's changes, that index is the
    snapshot's, and plans made with it (of everything, or of what changed) are the ones the
    lists give."""
    kept = Indexes()
    state = _state(world)
    for kind, objects in state.items():
        kept.reset(kind, objects.values())
    for _ in range(data.draw(st.integers(1, 3))):
        if data.draw(st.booleans()):
            world.apply(plan(world.snapshot()))
        else:
            _disturb(world, data)
        state, before = _state(world), state
        changed = _watch(kept, before, state)
        snapshot = world.snapshot()
        index = kept.index()
        assert index == Index.of(snapshot.namespaces, snapshot.subnamespaces, snapshot.objects)
        for scope in (None, affected(Forest.build(snapshot.namespaces), changed)):
            listed = dataclasses.replace(_scoped(snapshot, scope or ()), scope=scope)
            indexed = dataclasses.replace(listed, index=index)
            assert _seen(plan(indexed)) == _seen(plan(listed))


def _disturb(world: World, data: Any) -> None:
    """A user's change: a copy deleted, a source edited, a label set by hand, a SubNamespace
    deleted or made."""
    copies = [key for key, obj in world.objects.items() if copied_from(obj) is not None]
    if copies and data.draw(st.booleans()):
        del world.objects[data.draw(st.sampled_from(copies))]
    sources = [key for key, obj in world.objects.items() if propagate_mode(obj) is not None]
    if sources and data.draw(st.booleans()):
        world.objects[data.draw(st.sampled_from(sources))]["data"] = {"9": "9"}
    names = sorted(world.namespaces)
    if data.draw(st.booleans()):
        world.label_by_hand(data.draw(st.sampled_from(names)), "team", "9")
    if world.subnamespaces and data.draw(st.booleans()):
        sub = world.subnamespaces[data.draw(st.sampled_from(sorted(world.subnamespaces)))]
        sub["metadata"]["deletionTimestamp"] = "2024-01-04T00:00:00Z"
    if data.draw(st.booleans()):
        world.add_subnamespace(data.draw(st.sampled_from(names)), "n3")


def test_the_simulator_records_ownership_like_the_server():
    world = World(config=CONFIG)
    world.add_namespace("r", {LABEL_TYPE: "root", "team": "1"})
    world.add_namespace("s", {LABEL_PARENT: "r"})
    assert settle(world) == 1
    entries = world.namespaces["s"]["metadata"]["managedFields"]
    mine = [e for e in entries if e["manager"] == FIELD_MANAGER and e["operation"] == "Apply"]
    assert set(mine[0]["fieldsV1"]["f:metadata"]["f:labels"]) == {
        "f:team",
        f"f:{LABEL_PARENT}",
        "f:app.kubernetes.io/created-by",
    }
