"""The reconcile loop's bulk lane: plan from the cache, apply the difference, again whenever
anything changed.

The loop is level-based: a pass compares the whole picture of what it plans with what should
be, never trusting an event to say what to do, so a missed or merged event can delay work but
never lose it. An idle loop starts a pass the moment a change arrives; changes that arrive
while a pass runs, or within 50 ms of its start, are gathered and planned together by the next
one, so a burst is batched when the loop is busy and nothing waits when it is not (but for
a kept ResourceQuota's usage, which settles first: a stream of counted writes starts a pass
about once a second, controller.cache). A pass also
runs when the resync period is up, and after a pass that left work behind: the namespaces of
the steps that did not happen are planned again after a growing pause (or at the next change),
and after a failure everything is. A pass prompted by changes plans only the namespaces they
affect (the planner's scope); the first pass, a pass after a failure or after one that met work
due outside its scope, and the resync pass plan everything. Before planning again the loop
waits until the cache shows the writes of the previous pass (its own and the SubNamespace
lane's), so that it does not act twice on the same stale picture. SubNamespace changes go to
the SubNamespace lane (controller.lane), which works beside a long pass of this one;
``Traffic`` keeps the two from sending the same writes. Only the leader plans and writes; a
pass with nothing to do sends no request at all.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from controller.applier import Applier
from controller.cache import NAMESPACES, Cache, Expectation, Feed
from controller.passes import BULK, Outcome, Passes
from controller.throttle import Backoff
from libaccurate.planner import Plan, about

# How long to wait for the cache to show the previous pass's writes before planning anyway.
EXPECTATION_TIMEOUT = 10.0
# How often a lane waiting for the other looks whether the controller is stopping.
STOP_POLL = 0.5
# A lane's passes start no closer together than this: the first change after a quiet spell is
# planned at once, a stream of them (200 namespaces created one after the other) in batches.
SPACING = 0.05

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Leadership:
    """Whether this replica may write now, and a way to wait until it may."""

    is_leader: Callable[[], bool]
    wait: Callable[[threading.Event], bool]


@dataclass(frozen=True)
class Busy:
    """What the bulk lane is sending: the namespaces its plan's steps are about, and the
    steps themselves (as described); ``everything`` while it has no plan yet."""

    namespaces: frozenset[str] = frozenset()
    steps: frozenset[str] = frozenset()
    everything: bool = False

    @classmethod
    def of(cls, plan: Plan) -> Busy:
        return cls(
            frozenset(about(step.action) for step in plan.steps),
            frozenset(step.action.describe() for step in plan.steps),
        )


class Traffic:
    """Who is writing: the bulk lane's plan and whether a SubNamespace pass is under way.

    The bulk lane plans only while no SubNamespace pass runs, and takes in the writes of the
    last one first; a SubNamespace pass leaves to the bulk lane what its plan holds, and while
    it plans, everything but the SubNamespace lifecycle.
    """

    def __init__(self) -> None:
        self._changed = threading.Condition()
        self._bulk: Busy | None = None
        self._lane_busy = False
        self._lane_written: tuple[Expectation, ...] = ()
        # Until the bulk lane's first whole pass has its picture, the lane has nothing to do:
        # that pass plans every SubNamespace.
        self._whole_pending = True

    def bulk_planning(self, whole: bool) -> tuple[Expectation, ...]:
        """Wait until no SubNamespace pass runs, then hold the lane off until ``bulk_plan``;
        returns the writes of the lane's last pass."""
        with self._changed:
            self._changed.wait_for(lambda: not self._lane_busy)
            self._bulk = Busy(everything=True)
            if whole:
                self._whole_pending = False
            return self._lane_written

    def bulk_plan(self, plan: Plan) -> None:
        with self._changed:
            self._bulk = Busy.of(plan)
            self._changed.notify_all()

    def bulk_done(self) -> None:
        with self._changed:
            self._bulk = None
            self._changed.notify_all()

    def whole_pending(self) -> None:
        """The bulk lane will plan everything before the lane has anything to do."""
        with self._changed:
            self._whole_pending = True

    def lane_starting(self, stop: threading.Event) -> Busy | None:
        """Wait until the bulk lane's first whole pass has its picture, then mark a
        SubNamespace pass under way; what the bulk lane is sending (``everything`` while it
        plans), None when nothing."""
        with self._changed:
            while not stop.is_set() and self._whole_pending:
                self._changed.wait(STOP_POLL)
            self._lane_busy = True
            return self._bulk

    def lane_done(self, written: tuple[Expectation, ...]) -> None:
        with self._changed:
            self._lane_busy = False
            self._lane_written = written
            self._changed.notify_all()


class Pacing:
    """When a lane's next pass may start: at once after a quiet spell, else ``SPACING`` after
    the last one started, gathering what arrives meanwhile into one pass."""

    def __init__(self, spacing: float = SPACING) -> None:
        self.spacing = spacing
        self._last = -spacing

    def wait(self, stop: threading.Event) -> None:
        """Block until the next pass may start (or ``stop`` is set), then count it started."""
        if (delay := self._last + self.spacing - time.monotonic()) > 0:
            stop.wait(delay)
        self._last = time.monotonic()


class Loop:
    """Runs the bulk lane's passes until ``stop`` is set; ``run`` blocks, so start it on a
    thread."""

    def __init__(
        self,
        passes: Passes,
        applier: Applier,
        feed: Feed,
        leadership: Leadership,
        resync_period: float,
        traffic: Traffic | None = None,
        lane_feed: Feed | None = None,
    ) -> None:
        self.passes = passes
        self.cache: Cache = passes.cache
        self.applier = applier
        self.feed = feed
        self.leadership = leadership
        self.resync_period = resync_period
        self.traffic = traffic or Traffic()
        self.lane_feed = lane_feed
        # Whether the next pass must plan everything: nothing planned yet, a pass failed, or
        # the lane or a scoped plan met work outside what it could plan.
        self._whole = True
        self._lock = threading.Lock()

    def hand_over(self, namespaces: frozenset[str], whole: bool) -> None:
        """Work the SubNamespace lane left: these namespaces (or everything) in the next pass."""
        if whole:
            with self._lock:
                self._whole = True
        self.feed.give(NAMESPACES, (("", name) for name in namespaces))

    def run(self, stop: threading.Event) -> None:
        pause = Backoff(first=0.5, limit=60.0)
        pacing = Pacing()
        expectations: tuple[Expectation, ...] = ()
        left: frozenset[str] = frozenset()
        due = time.monotonic()
        leading = False
        while not stop.is_set():
            if not self.leadership.is_leader():
                leading = False
                if not self.leadership.wait(stop):
                    return
            if not leading:
                leading, due = True, time.monotonic()
                with self._lock:
                    self._whole = True
                self.traffic.whole_pending()
            if not self.cache.synced:
                self.cache.wait_for_change(self.cache.version, timeout=0.5)
                continue
            if (wait := due - time.monotonic()) > 0 and not self.feed.wait(wait):
                continue
            pacing.wait(stop)
            if stop.is_set():
                return
            with self._lock:
                whole, self._whole = self._whole or time.monotonic() >= due, False
            written = self.traffic.bulk_planning(whole)
            try:
                self._wait_for(expectations + written, stop)
                outcome = self._pass(whole, left)
            finally:
                self.traffic.bulk_done()
            expectations = outcome.report.expectations if outcome.report else ()
            left = frozenset()
            planned = outcome.plan
            if planned is None or outcome.count("failed", "skipped") or planned.beyond_scope:
                # Broken, failing writes, or work outside the scope: everything, after a pause.
                with self._lock:
                    self._whole = True
                due = time.monotonic() + pause.next()
            elif outcome.count("replan", "aborted"):
                # Planned from a picture gone stale: those namespaces again, soon.
                left = outcome.left
                due = time.monotonic() + pause.next()
            else:
                pause.reset()
                due = time.monotonic() + self.resync_period

    def _wait_for(self, expectations: tuple[Expectation, ...], stop: threading.Event) -> None:
        unseen = self.cache.wait_for_expectations(expectations, EXPECTATION_TIMEOUT, stop)
        if unseen and not stop.is_set():
            log.info(
                "planning before the cache shows every write of the last pass",
                extra={
                    "unseen": [f"{e.resource} {e.namespace}/{e.name} {e.state}" for e in unseen]
                },
            )

    def _pass(self, whole: bool, left: frozenset[str]) -> Outcome:
        """Plan everything (``whole``) or what changed and the namespaces ``left`` by the last
        pass; a whole pass takes the SubNamespace lane's changes too, as it plans them."""
        changes = self.feed.take()
        if whole:
            if self.lane_feed is not None:
                self.lane_feed.take()
            return self.passes.run(BULK, self.applier, None, on_plan=self.traffic.bulk_plan)
        if left:
            changes = {
                **changes,
                NAMESPACES: {*changes.get(NAMESPACES, ()), *(("", n) for n in left)},
            }
        return self.passes.run(BULK, self.applier, changes, on_plan=self.traffic.bulk_plan)
