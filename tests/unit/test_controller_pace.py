"""The controller's pace (issue 31): no client-side limit unless asked for, a given limit held
per resource kind as the Go controller holds it, and what the SubNamespace lane leaves to a
bulk pass that is sending the same work. The reaction itself is timed in bench/ (scenarios 14
and 15) and shown by order in tests/e2e/test_controller_reaction.py."""

from __future__ import annotations

import threading

from controller.lane import held_for
from controller.loop import Busy
from controller.options import parse
from controller.throttle import Throttles
from libaccurate.actions import (
    Action,
    ApplyNamespaceMetadata,
    Condition,
    DeleteNamespace,
    PatchSubNamespaceStatus,
    RemoveFinalizer,
    SubNamespaceStatus,
)
from libaccurate.planner import Plan, Step

READY = SubNamespaceStatus(1, (Condition("Ready", "True", "Synced", "ok"),))


def test_no_client_side_limit_unless_the_flag_is_given() -> None:
    assert parse([]).qps == 0
    assert parse(["--apiserver-qps-throttle", "50"]).qps == 50


def test_a_limit_holds_for_each_kind_on_its_own() -> None:
    """At one request a second (a burst of one), a second namespace write must wait while a
    SubNamespace write, another kind, goes at once. ``stop`` is set, so a request that would
    have to wait is refused instead of waited for."""
    throttles = Throttles(1)
    stop = threading.Event()
    stop.set()
    assert throttles.of("namespaces").wait(stop)
    assert not throttles.of("namespaces").wait(stop)
    assert throttles.of("subnamespaces.accurate.cybozu.com").wait(stop)


def test_without_a_limit_nothing_waits() -> None:
    throttles = Throttles(0)
    running = threading.Event()
    assert all(throttles.of("secrets").wait(running) for _ in range(1000))


def _plan(*actions: Action) -> Plan:
    steps = tuple(Step(i, 0, action) for i, action in enumerate(actions))
    return Plan(steps, {}, {})


def test_the_lane_sends_lifecycle_steps_beside_a_bulk_pass_on_the_same_namespace() -> None:
    remove = RemoveFinalizer("old", "child", "7")
    status = PatchSubNamespaceStatus("new", "child", READY)
    metadata = ApplyNamespaceMetadata("child", {"team": "a"}, {})
    elsewhere = ApplyNamespaceMetadata("other", {"team": "a"}, {})
    plan = _plan(remove, status, metadata, elsewhere)
    busy = Busy(frozenset({"child"}), frozenset({"copy something into child"}))
    assert held_for(busy, plan) == {1, 2}
    assert held_for(None, plan) == set()


def test_the_lane_leaves_a_step_the_bulk_pass_holds_and_all_but_lifecycle_while_it_plans() -> None:
    delete = DeleteNamespace("child", "uid-1")
    plan = _plan(delete, ApplyNamespaceMetadata("other", {}, {}))
    assert held_for(Busy(frozenset({"child"}), frozenset({delete.describe()})), plan) == {0}
    assert held_for(Busy(everything=True), plan) == {1}
