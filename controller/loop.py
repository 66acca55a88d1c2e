"""The reconcile loop: plan from the cache, apply the difference, again whenever anything changed.

The loop is level-based: a pass never looks at what changed, only at the whole picture, so a
missed or merged event can delay work but never lose it. A pass runs when the cache changed
(after a short quiet spell, so that a burst of changes is planned once), when the resync period
is up, and sooner after a pass that left work behind, with growing pauses while it keeps
failing. Before planning again it waits until the cache shows the controller's own writes of the
previous pass, so that it does not act twice on the same stale picture. Only the leader plans
and writes; a pass with nothing to do sends no request at all.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from controller.applier import Applier, Report
from controller.cache import NAMESPACES, SUBNAMESPACES, Cache, Expectation, resource_name
from controller.metrics import Metrics
from controller.owners import Owners
from controller.sudoers import Sudoers
from controller.throttle import Backoff
from libaccurate.config import Config, WatchedResource
from libaccurate.forest import Problem
from libaccurate.planner import Snapshot, plan

# A burst of changes (kubectl apply -f of a folder) lands within this quiet spell...
QUIET = 0.05
# ...but a cluster that never stops changing is still planned this often.
QUIET_LIMIT = 1.0
# How long to wait for the cache to show the previous pass's writes before planning anyway.
EXPECTATION_TIMEOUT = 10.0

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Leadership:
    """Whether this replica may write now, and a way to wait until it may."""

    is_leader: Callable[[], bool]
    wait: Callable[[threading.Event], bool]


class Loop:
    """Runs passes until ``stop`` is set; ``run`` blocks, so start it on a thread."""

    def __init__(
        self,
        cache: Cache,
        config: Config,
        watched: tuple[WatchedResource, ...],
        applier: Applier,
        metrics: Metrics,
        leadership: Leadership,
        resync_period: float,
        owners: Owners | None = None,
        sudoers: Sudoers | None = None,
    ) -> None:
        self.cache = cache
        self.config = config
        self.watched = watched
        self.applier = applier
        self.metrics = metrics
        self.leadership = leadership
        self.resync_period = resync_period
        self.owners = owners
        self.sudoers = sudoers
        self._problems: Mapping[str, Problem] = {}
        self._label_problems: Mapping[str, tuple[str, ...]] = {}

    def run(self, stop: threading.Event) -> None:
        pause = Backoff(first=0.5, limit=60.0)
        expectations: tuple[Expectation, ...] = ()
        seen: int | None = None
        due = time.monotonic()
        while not stop.is_set():
            if not self.leadership.is_leader():
                if not self.leadership.wait(stop):
                    return
                seen, due = None, time.monotonic()
            if not self.cache.synced:
                self.cache.wait_for_change(self.cache.version, timeout=0.5)
                continue
            if seen is not None:
                version = self.cache.wait_for_change(seen, due - time.monotonic())
                if stop.is_set() or (version == seen and time.monotonic() < due):
                    continue
            self.cache.wait_for_quiet(QUIET, QUIET_LIMIT)
            unseen = self.cache.wait_for_expectations(expectations, EXPECTATION_TIMEOUT, stop)
            if unseen and not stop.is_set():
                log.info(
                    "planning before the cache shows every write of the last pass",
                    extra={
                        "unseen": [f"{e.resource} {e.namespace}/{e.name} {e.state}" for e in unseen]
                    },
                )
            seen = self.cache.version
            report = self._pass()
            expectations = report.expectations if report else ()
            if report is None or report.count("done") == len(report.outcomes):
                pause.reset()
                due = time.monotonic() + self.resync_period
            else:
                due = time.monotonic() + pause.next()

    def _pass(self) -> Report | None:
        """Plan from the cache and apply; None when there was nothing to do (or it broke)."""
        started = time.monotonic()
        try:
            snapshot = self.snapshot()
            if self.sudoers is not None:
                self.sudoers.keep(snapshot)
            planned = plan(snapshot)
            self._report_problems(planned.problems)
            self._report_label_problems(planned.label_problems)
            if not planned.steps:
                return None
            report = self.applier.apply(planned, snapshot)
        except Exception:
            # A bug in one pass must not stop the controller; the next pass starts afresh.
            log.exception("reconcile pass failed")
            return None
        finally:
            self.metrics.observe_pass(time.monotonic() - started)
        log.info(
            "reconcile pass done",
            extra={
                "seconds": round(time.monotonic() - started, 3),
                **{
                    result: report.count(result)
                    for result in ("done", "replan", "failed", "skipped")
                },
            },
        )
        return report

    def snapshot(self) -> Snapshot:
        """The cache's picture as the planner takes it."""
        objects = {
            w.gvk: self.cache.items(resource_name(w.gvk.group, w.plural)) for w in self.watched
        }
        owners = {}
        if self.owners is not None:
            owners = self.owners.lookup(o for items in objects.values() for o in items)
        return Snapshot(
            config=self.config,
            namespaces=self.cache.items(NAMESPACES),
            subnamespaces=self.cache.items(SUBNAMESPACES),
            objects=objects,
            owners=owners,
            propagate_generated=self.owners is not None,
        )

    def _report_problems(self, problems: Mapping[str, Problem]) -> None:
        """Log broken namespace chains when they appear or go, not in every pass."""
        for name, problem in problems.items():
            if self._problems.get(name) != problem:
                log.warning(
                    "namespace gets nothing propagated",
                    extra={"namespace": name, "problem": problem.message},
                )
        for name in self._problems.keys() - problems.keys():
            log.info("namespace chain repaired", extra={"namespace": name})
        self._problems = dict(problems)

    def _report_label_problems(self, problems: Mapping[str, tuple[str, ...]]) -> None:
        """Log tree labels that cannot be written when that starts, not in every pass."""
        for name, lines in problems.items():
            if self._label_problems.get(name) != lines:
                log.warning(
                    "namespace lacks tree labels", extra={"namespace": name, "problem": lines}
                )
        self._label_problems = dict(problems)
