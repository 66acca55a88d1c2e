"""The SubNamespace lane: a tenant's SubNamespace is answered at once, however long the bulk
lane's pass.

Changes to SubNamespaces come here, as the Go controller reconciles SubNamespaces on a queue
of their own. A pass of this lane plans the namespaces those SubNamespaces name (and what lies
below them) and sends its writes from a small pool of its own, while the bulk lane
(controller.loop) may be in the middle of a pass of thousands of writes. What the bulk lane's
plan already holds is left to it: the lane's steps about a namespace the bulk pass is writing
wait for the bulk lane, but for the SubNamespace lifecycle (add or remove the finalizer, create
or delete the namespace), which never waits unless the bulk pass has that very step; while the
bulk lane is planning, every other step waits for it. What the lane leaves, or could not do, it
hands over to the bulk lane's next pass.
"""

from __future__ import annotations

import threading

from controller.applier import Applier
from controller.cache import Expectation, Feed
from controller.loop import EXPECTATION_TIMEOUT, Busy, Leadership, Loop, Pacing, Traffic
from controller.passes import SUBNAMESPACE_LANE, Passes
from libaccurate.actions import AddFinalizer, CreateNamespace, DeleteNamespace, RemoveFinalizer
from libaccurate.planner import Plan, about

# Steps that never wait for the bulk lane's pass, unless it holds the same one.
LIFECYCLE = (AddFinalizer, RemoveFinalizer, CreateNamespace, DeleteNamespace)
# How often an idle lane looks whether it still leads.
IDLE_POLL = 1.0


def held_for(busy: Busy | None, plan: Plan) -> frozenset[int]:
    """The steps of ``plan`` to leave to the bulk lane, which is sending ``busy``."""
    if busy is None:
        return frozenset()
    held = set()
    for step in plan.steps:
        action = step.action
        if isinstance(action, LIFECYCLE):
            # Were the bulk lane's plan, still in the making, to hold it too, the one sent
            # second finds the SubNamespace changed or gone and is planned again.
            if action.describe() in busy.steps:
                held.add(step.index)
        elif busy.everything or about(action) in busy.namespaces:
            held.add(step.index)
    return frozenset(held)


class SubNamespaceLane:
    """Runs passes for SubNamespace changes until ``stop`` is set; start ``run`` on a thread."""

    def __init__(
        self,
        passes: Passes,
        applier: Applier,
        feed: Feed,
        leadership: Leadership,
        traffic: Traffic,
        bulk: Loop,
    ) -> None:
        self.passes = passes
        self.applier = applier
        self.feed = feed
        self.leadership = leadership
        self.traffic = traffic
        self.bulk = bulk

    def run(self, stop: threading.Event) -> None:
        written: tuple[Expectation, ...] = ()
        pacing = Pacing()
        while not stop.is_set():
            if not self.leadership.is_leader():
                if not self.leadership.wait(stop):
                    return
                continue
            if not self.passes.cache.synced:
                self.passes.cache.wait_for_change(self.passes.cache.version, IDLE_POLL)
                continue
            if not self.feed.wait(IDLE_POLL):
                continue
            pacing.wait(stop)
            self.passes.cache.wait_for_expectations(written, EXPECTATION_TIMEOUT, stop)
            busy = self.traffic.lane_starting(stop)
            written = ()
            try:
                if not stop.is_set():
                    written = self._pass(busy)
            finally:
                self.traffic.lane_done(written)

    def _pass(self, busy: Busy | None) -> tuple[Expectation, ...]:
        """Plan what the SubNamespace changes affect, send what the bulk lane is not sending,
        hand the rest over; the writes it made."""
        changes = self.feed.take()
        if not changes:
            # A whole pass of the bulk lane took them: it plans them.
            return ()
        outcome = self.passes.run(
            SUBNAMESPACE_LANE, self.applier, changes, hold=lambda plan: held_for(busy, plan)
        )
        whole = outcome.plan is None or outcome.plan.beyond_scope
        if outcome.left or whole:
            self.bulk.hand_over(outcome.left, whole)
        return outcome.report.expectations if outcome.report else ()
