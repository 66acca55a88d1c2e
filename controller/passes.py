"""One reconcile pass: take the cache's picture, plan it, apply the plan, say what happened.

Both lanes of the loop (controller.loop's bulk lane and controller.lane's SubNamespace lane) run
their passes through here, so that they plan from the same kind of picture, log alike and keep
one record of the broken namespace chains they found. A pass plans the whole cluster, or only
the namespaces its changes affect (the planner's scope), so that its cost follows the change
rather than the cluster.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TypeVar

from controller.applier import Applier, Report
from controller.cache import HRQ_QUOTAS, NAMESPACES, SUBNAMESPACES, Cache, resource_name
from controller.metrics import LANES, Metrics
from controller.owners import Owners
from controller.quotas import Quotas
from controller.sudoers import Sudoers
from libaccurate.config import Config, WatchedResource
from libaccurate.forest import Forest, Problem
from libaccurate.planner import Plan, Result, Snapshot, about, affected, plan

# The lanes' names in logs and metrics: the bulk of the work, and the SubNamespace lifecycle.
BULK, SUBNAMESPACE_LANE = LANES
Scope = frozenset[str] | None
Changes = Mapping[str, Iterable[tuple[str, str]]]
T = TypeVar("T")

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Outcome:
    """What a pass did: its plan (None when it broke) and what became of the steps (None when
    there was nothing to do)."""

    plan: Plan | None
    report: Report | None

    @property
    def left(self) -> frozenset[str]:
        """The namespaces with steps that did not happen: the next pass must look at them."""
        if self.plan is None or self.report is None:
            return frozenset()
        outcomes = self.report.outcomes
        return frozenset(
            about(step.action)
            for step in self.plan.steps
            if step.index in outcomes and outcomes[step.index].result != "done"
        )

    def count(self, *results: Result) -> int:
        return sum(self.report.count(r) for r in results) if self.report else 0


class Passes:
    """Plans and applies passes for the lanes; the record of problems is shared by them."""

    def __init__(
        self,
        cache: Cache,
        config: Config,
        watched: tuple[WatchedResource, ...],
        metrics: Metrics,
        owners: Owners | None = None,
        sudoers: Sudoers | None = None,
        quotas: Quotas | None = None,
    ) -> None:
        self.cache = cache
        self.config = config
        self.watched = watched
        self.metrics = metrics
        self.owners = owners
        self.sudoers = sudoers
        self.quotas = quotas
        self._problems: Mapping[str, Problem] = {}
        self._label_problems: Mapping[str, tuple[str, ...]] = {}
        self._lock = threading.Lock()

    def run(
        self,
        lane: str,
        applier: Applier,
        changes: Changes | None,
        hold: Callable[[Plan], frozenset[int]] = lambda _: frozenset(),
        on_plan: Callable[[Plan], None] = lambda _: None,
    ) -> Outcome:
        """One pass of ``lane``: of everything (``changes`` None) or of what ``changes``
        affect. ``hold`` picks the steps to leave to the other lane; ``on_plan`` hears of the
        plan before any of it is sent."""
        started = time.monotonic()
        planned = None
        try:
            snapshot = self.snapshot(changes)
            if self.sudoers is not None and lane == BULK:
                self.sudoers.keep(snapshot)
            if self.quotas is not None and lane == BULK and snapshot.forest is not None:
                self.quotas.keep(snapshot.forest, snapshot.scope)
            planned = plan(snapshot)
            self._report_problems(planned)
            if not planned.steps:
                return Outcome(planned, None)
            on_plan(planned)
            held = hold(planned)
            report = applier.apply(planned, held)
            if self.quotas is not None and planned.forest is not None:
                # Namespaces created in this pass get their ResourceQuotas in it, not the next.
                new = {name for name in planned.waiting if name not in (snapshot.forest or ())}
                self.quotas.keep_new(planned.forest, new)
        except Exception:
            # A bug in one pass must not stop the controller; the next pass starts afresh.
            log.exception("reconcile pass failed", extra={"lane": lane})
            return Outcome(None, None)
        finally:
            self.metrics.observe_pass(lane, time.monotonic() - started)
        log.info(
            "reconcile pass done",
            extra={
                "lane": lane,
                "seconds": round(time.monotonic() - started, 3),
                "namespaces": "all" if planned.scope is None else len(planned.scope),
                **{
                    result: report.count(result)
                    for result in ("done", "replan", "failed", "skipped")
                },
                **({"held": len(held)} if held else {}),
            },
        )
        return Outcome(planned, report)

    def snapshot(self, changes: Changes | None = None) -> Snapshot:
        """The cache's picture as the planner takes it: all of it, or what ``changes`` affect."""
        namespaces, forest, index = self.cache.namespaces()
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
            index=index,
            scope=None if changes is None else scope_of(forest, changes),
            parsed_hrqs=self.quotas.parsed() if self.quotas is not None else None,
            kept_quotas=self.quotas.held() if self.quotas is not None else None,
        )

    def _report_problems(self, planned: Plan) -> None:
        with self._lock:
            self._problems = _report(self._problems, planned.problems, planned.scope, _problem_logs)
            self._label_problems = _report(
                self._label_problems, planned.label_problems, planned.scope, _label_logs
            )


def _problem_logs(name: str, problem: Problem | None) -> None:
    """Log broken namespace chains when they appear or go, not in every pass."""
    if problem is None:
        log.info("namespace chain repaired", extra={"namespace": name})
    else:
        log.warning(
            "namespace gets nothing propagated",
            extra={"namespace": name, "problem": problem.message},
        )


def _label_logs(name: str, lines: tuple[str, ...] | None) -> None:
    """Log tree labels that cannot be written when that starts, not in every pass."""
    if lines is not None:
        log.warning("namespace lacks tree labels", extra={"namespace": name, "problem": lines})


def _report(
    previous: Mapping[str, T],
    found: Mapping[str, T],
    scope: Scope,
    tell: Callable[[str, T | None], None],
) -> dict[str, T]:
    """What a plan found about its scope over what earlier passes found elsewhere; ``tell``
    hears of what appeared, changed or went."""
    merged = dict(found)
    if scope is not None:
        merged = {**{k: v for k, v in previous.items() if k not in scope}, **found}
    for name, value in merged.items():
        if previous.get(name) != value:
            tell(name, value)
    for name in previous.keys() - merged.keys():
        tell(name, None)
    return merged


def scope_of(forest: Forest, changes: Changes) -> frozenset[str]:
    """The namespaces a pass of ``changes`` plans: those they affect (each changed namespace
    and everything below it, where what flows in comes from), but a ResourceQuota kept for an
    HRQ concerns its own namespace alone: whether copies may go in there, and the sums of the
    HRQs above it. Nothing below reads it, and with a pod every few milliseconds the subtrees
    of the namespaces counted would make each pass plan the HRQs below them too."""
    counted = {namespace for namespace, _ in changes.get(HRQ_QUOTAS, ())}
    others = {kind: keys for kind, keys in changes.items() if kind != HRQ_QUOTAS}
    return affected(forest, namespaces_of(others)) | counted


def namespaces_of(changes: Changes) -> set[str]:
    """The namespaces that changed objects are about: a namespace itself, the namespace a
    SubNamespace names, the namespace any other object is in."""
    names: set[str] = set()
    for resource, keys in changes.items():
        if resource in (NAMESPACES, SUBNAMESPACES):
            names.update(name for _, name in keys)
        else:
            names.update(namespace for namespace, _ in keys)
    return names
