"""The reconcile loop: plan from the cache, apply the difference, again whenever anything changed.

The loop is level-based: a pass compares the whole picture of what it plans with what should
be, never trusting an event to say what to do, so a missed or merged event can delay work but
never lose it. A pass runs when the cache changed (after a short quiet spell, so that a burst of
changes is planned once), when the resync period is up, and sooner after a pass that left work
behind, with growing pauses while it keeps failing. A pass prompted by changes plans only the
namespaces they affect (the planner's scope), so that its cost follows the change rather than
the cluster; the first pass, a pass after one that failed, left work behind or met work due
outside its scope, and the resync pass plan everything. Before planning again it waits until the
cache shows the controller's own writes of the previous pass, so that it does not act twice on
the same stale picture. Only the leader plans and writes; a pass with nothing to do sends no
request at all.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TypeVar

from controller.applier import Applier, Report
from controller.cache import NAMESPACES, SUBNAMESPACES, Cache, Expectation, resource_name
from controller.metrics import Metrics
from controller.owners import Owners
from controller.quotas import Quotas
from controller.sudoers import Sudoers
from controller.throttle import Backoff
from libaccurate.config import Config, WatchedResource
from libaccurate.forest import Problem
from libaccurate.planner import Snapshot, affected, plan

Scope = frozenset[str] | None
T = TypeVar("T")

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
        quotas: Quotas | None = None,
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
        self.quotas = quotas
        self._problems: Mapping[str, Problem] = {}
        self._label_problems: Mapping[str, tuple[str, ...]] = {}
        # Whether the next pass must plan everything: nothing planned yet, or a pass left work
        # behind that the changes since would not lead back to.
        self._whole = True

    def run(self, stop: threading.Event) -> None:
        pause = Backoff(first=0.5, limit=60.0)
        expectations: tuple[Expectation, ...] = ()
        seen: int | None = None
        due = time.monotonic()
        while not stop.is_set():
            if not self.leadership.is_leader():
                if not self.leadership.wait(stop):
                    return
                seen, due, self._whole = None, time.monotonic(), True
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
            self._whole = self._whole or time.monotonic() >= due
            report = self._pass()
            expectations = report.expectations if report else ()
            done = report is None or report.count("done") == len(report.outcomes)
            if done and not self._whole:
                pause.reset()
                due = time.monotonic() + self.resync_period
            else:
                self._whole = True
                due = time.monotonic() + pause.next()

    def _pass(self) -> Report | None:
        """Plan from the cache and apply; None when there was nothing to do (or it broke)."""
        started = time.monotonic()
        whole, self._whole = self._whole, False
        try:
            snapshot = self.snapshot(whole)
            if self.sudoers is not None:
                self.sudoers.keep(snapshot)
            if self.quotas is not None and snapshot.forest is not None:
                self.quotas.keep(snapshot.forest)
            planned = plan(snapshot)
            # Writes due outside the scope (a source above it not yet marked, say): soon, all.
            self._whole = planned.beyond_scope
            self._report_problems(planned.problems, planned.scope)
            self._report_label_problems(planned.label_problems, planned.scope)
            if not planned.steps:
                return None
            report = self.applier.apply(planned, snapshot)
            if self.quotas is not None and planned.forest is not None:
                # Namespaces created in this pass get their ResourceQuotas in it, not the next.
                new = {name for name in planned.waiting if name not in (snapshot.forest or ())}
                self.quotas.keep_new(planned.forest, new)
        except Exception:
            # A bug in one pass must not stop the controller; the next pass starts afresh.
            log.exception("reconcile pass failed")
            self._whole = True
            return None
        finally:
            self.metrics.observe_pass(time.monotonic() - started)
        log.info(
            "reconcile pass done",
            extra={
                "seconds": round(time.monotonic() - started, 3),
                "namespaces": "all" if planned.scope is None else len(planned.scope),
                **{
                    result: report.count(result)
                    for result in ("done", "replan", "failed", "skipped")
                },
            },
        )
        return report

    def snapshot(self, whole: bool = True) -> Snapshot:
        """The cache's picture as the planner takes it: all of it, or (``whole`` False) what
        changed since the last snapshot and what that affects."""
        changes = self.cache.take_changes()
        namespaces, forest = self.cache.namespaces()
        objects = {
            w.gvk: self.cache.items(resource_name(w.gvk.group, w.plural)) for w in self.watched
        }
        owners = {}
        if self.owners is not None:
            owners = self.owners.lookup(o for items in objects.values() for o in items)
        return Snapshot(
            config=self.config,
            namespaces=namespaces,
            subnamespaces=self.cache.items(SUBNAMESPACES),
            objects=objects,
            owners=owners,
            propagate_generated=self.owners is not None,
            forest=forest,
            scope=None if whole else affected(forest, _namespaces_of(changes)),
            hrqs=self.quotas.hrqs() if self.quotas is not None else (),
            hrq_quotas=self.quotas.kept() if self.quotas is not None else (),
        )

    def _report_problems(self, problems: Mapping[str, Problem], scope: Scope) -> None:
        """Log broken namespace chains when they appear or go, not in every pass."""
        found = _merged(self._problems, problems, scope)
        for name, problem in found.items():
            if self._problems.get(name) != problem:
                log.warning(
                    "namespace gets nothing propagated",
                    extra={"namespace": name, "problem": problem.message},
                )
        for name in self._problems.keys() - found.keys():
            log.info("namespace chain repaired", extra={"namespace": name})
        self._problems = found

    def _report_label_problems(self, problems: Mapping[str, tuple[str, ...]], scope: Scope) -> None:
        """Log tree labels that cannot be written when that starts, not in every pass."""
        found = _merged(self._label_problems, problems, scope)
        for name, lines in found.items():
            if self._label_problems.get(name) != lines:
                log.warning(
                    "namespace lacks tree labels", extra={"namespace": name, "problem": lines}
                )
        self._label_problems = found


def _namespaces_of(changes: Mapping[str, Iterable[tuple[str, str]]]) -> set[str]:
    """The namespaces that changed objects are about: a namespace itself, the namespace a
    SubNamespace names, the namespace any other object is in."""
    names: set[str] = set()
    for resource, keys in changes.items():
        if resource in (NAMESPACES, SUBNAMESPACES):
            names.update(name for _, name in keys)
        else:
            names.update(namespace for namespace, _ in keys)
    return names


def _merged(previous: Mapping[str, T], found: Mapping[str, T], scope: Scope) -> dict[str, T]:
    """What a plan found about its scope, over what earlier passes found elsewhere."""
    if scope is None:
        return dict(found)
    return {**{k: v for k, v in previous.items() if k not in scope}, **found}
