"""Runs a plan: its stages in order, the steps of a stage concurrently, each step only when the
steps it needs happened.

A failure holds up only what depends on it, so one broken namespace never blocks the others.
Statuses and events come last, when it is known what happened: a SubNamespace whose namespace
could not be brought in line reports ``Ready=False`` with the reason instead of the status the
planner expected, and events tell what was created, replaced, deleted or failed.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import partial
from typing import Literal

from controller.cache import Expectation
from controller.metrics import Metrics
from controller.writes import Aborted, Known, Replan, Writer
from libaccurate.actions import (
    Action,
    AddFinalizer,
    AnnotateObject,
    Condition,
    CreateObject,
    DeleteObject,
    EmitEvent,
    PatchSubNamespaceStatus,
    RemoveFinalizer,
    ReplaceObject,
    SubNamespaceStatus,
)
from libaccurate.constants import CONDITION_READY
from libaccurate.kube import KubeError
from libaccurate.lifecycle import status_differs
from libaccurate.planner import Plan, Snapshot, Step

Result = Literal["done", "replan", "failed", "skipped", "aborted"]
REASON_APPLY_FAILED = "ApplyFailed"
# Actions on a SubNamespace object itself rather than on its namespace or what is in it.
_SUBNAMESPACE_ACTIONS = (AddFinalizer, RemoveFinalizer, PatchSubNamespaceStatus)
_LAST = (PatchSubNamespaceStatus, EmitEvent)

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Outcome:
    """What became of one step."""

    result: Result
    error: str = ""
    expectations: tuple[Expectation, ...] = ()
    notices: tuple[EmitEvent, ...] = ()


@dataclass(frozen=True)
class Report:
    """What became of every step of a pass, by step index."""

    outcomes: Mapping[int, Outcome]

    @property
    def expectations(self) -> tuple[Expectation, ...]:
        return tuple(e for o in self.outcomes.values() for e in o.expectations)

    def count(self, result: Result) -> int:
        return sum(1 for o in self.outcomes.values() if o.result == result)


@dataclass
class _Pass:
    plan: Plan
    known: Known
    outcomes: dict[int, Outcome] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def outcome(self, index: int) -> Outcome:
        with self.lock:
            return self.outcomes[index]


class Applier:
    """Runs plans with a pool of ``workers`` threads; one plan at a time."""

    def __init__(self, writer: Writer, metrics: Metrics, workers: int) -> None:
        self.writer = writer
        self.metrics = metrics
        self.pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="apply")

    def close(self) -> None:
        """Wait for the writes in flight, then let the workers go."""
        self.pool.shutdown(wait=True)

    def apply(self, plan: Plan, snapshot: Snapshot) -> Report:
        """Carry out ``plan``, made from ``snapshot``; returns what became of every step."""
        state = _Pass(plan, Known(snapshot.namespaces, snapshot.subnamespaces))
        last: list[Step] = []
        for stage in plan.stages():
            last.extend(s for s in stage if isinstance(s.action, _LAST))
            self._run(state, [s for s in stage if not isinstance(s.action, _LAST)])
        self._finish(state, last)
        return Report(dict(state.outcomes))

    def _run(self, state: _Pass, steps: list[Step]) -> None:
        futures: list[tuple[Step, Future[Outcome]]] = []
        for step in steps:
            blocked = self._blocked(state, step)
            if blocked is not None:
                self._record(state, step, blocked)
            else:
                job = partial(self._attempt, state, step.action)
                futures.append((step, self.pool.submit(job)))
        for step, future in futures:
            self._record(state, step, future.result())

    def _blocked(self, state: _Pass, step: Step) -> Outcome | None:
        """Why a step must not run: the controller may not write, or a step it needs did not
        happen (a failure there makes this one skipped, a stale picture makes it wait)."""
        if not self.writer.may_write():
            return Outcome("aborted")
        missing = [i for i in step.after if state.outcome(i).result != "done"]
        if not missing:
            return None
        results = {state.outcome(i).result for i in missing}
        result: Result = "skipped" if results & {"failed", "skipped"} else "replan"
        return Outcome(result, f"{state.plan.steps[missing[0]].action.describe()} did not happen")

    def _attempt(self, state: _Pass, action: Action) -> Outcome:
        """Carry out one action and say what became of it; never raises."""
        try:
            written = self.writer.write(action, state.known)
        except Replan as stale:
            return Outcome("replan", str(stale))
        except Aborted:
            return Outcome("aborted")
        except KubeError as error:
            return Outcome(
                "failed", str(error), notices=self._failure_notices(state, action, error)
            )
        return Outcome("done", expectations=written.expectations, notices=written.notices)

    def _record(self, state: _Pass, step: Step, outcome: Outcome) -> None:
        with state.lock:
            state.outcomes[step.index] = outcome
        self.metrics.count_action(type(step.action).__name__, outcome.result)
        fields = {"action": step.action.describe(), "result": outcome.result}
        if outcome.result == "done":
            log.info("applied", extra=fields)
        elif outcome.result == "failed":
            log.warning("action failed", extra={**fields, "error": outcome.error})
        else:
            log.info("action not applied", extra={**fields, "error": outcome.error})

    def _failure_notices(
        self, state: _Pass, action: Action, error: KubeError
    ) -> tuple[EmitEvent, ...]:
        """A Warning on the object concerned; for a namespace, on the SubNamespaces for it."""
        message = f"could not {action.describe()}: {error}"
        if isinstance(action, (CreateObject, ReplaceObject, DeleteObject, AnnotateObject)):
            return (EmitEvent(action.ref, "Warning", REASON_APPLY_FAILED, message),)
        if isinstance(action, _SUBNAMESPACE_ACTIONS):
            involved = state.known.ref(action.namespace, action.name)
            return (EmitEvent(involved, "Warning", REASON_APPLY_FAILED, message),)
        return tuple(
            EmitEvent(state.known.ref(*key), "Warning", REASON_APPLY_FAILED, message)
            for key in state.plan.statuses
            if key[1] == action.namespace
        )

    # -- the end of a pass ----------------------------------------------------------------------

    def _finish(self, state: _Pass, last: list[Step]) -> None:
        """Statuses, planned events and the events telling what the pass did, concurrently."""
        jobs: list[tuple[Step | None, Callable[[], Outcome]]] = []
        jobs.extend(self._status_jobs(state, last))
        for step in last:
            if isinstance(step.action, EmitEvent):
                blocked = self._blocked(state, step)
                if blocked is not None:
                    self._record(state, step, blocked)
                else:
                    jobs.append((step, partial(self._attempt, state, step.action)))
        with state.lock:
            notices = [n for o in state.outcomes.values() for n in o.notices]
        jobs.extend((None, partial(self._tell, n)) for n in notices)
        futures = [(owner, self.pool.submit(job)) for owner, job in jobs]
        for owner, future in futures:
            outcome = future.result()
            if owner is not None:
                self._record(state, owner, outcome)

    def _status_jobs(
        self, state: _Pass, last: list[Step]
    ) -> list[tuple[Step | None, Callable[[], Outcome]]]:
        """The planned statuses, with Ready=False where a namespace's writes failed; left
        for the next pass where they could not be done yet."""
        troubled, pending = self._left_over(state)
        planned = {
            (s.action.namespace, s.action.name): s
            for s in last
            if isinstance(s.action, PatchSubNamespaceStatus)
        }
        jobs: list[tuple[Step | None, Callable[[], Outcome]]] = []
        for key, status in state.plan.statuses.items():
            step, name = planned.get(key), key[1]
            if name in troubled:
                status = _failed(status, troubled[name])
                sub = state.known.subnamespace(*key)
                if sub is None or not status_differs(sub, status):
                    if step is not None:
                        self._record(state, step, Outcome("done"))
                    continue
            elif step is None:
                continue
            elif name in pending:
                self._record(state, step, Outcome("replan", f"writes to {name} are pending"))
                continue
            action = PatchSubNamespaceStatus(key[0], key[1], status)
            jobs.append((step, partial(self._attempt, state, action)))
        return jobs

    def _tell(self, notice: EmitEvent) -> Outcome:
        self.writer.tell(notice)
        return Outcome("done")

    def _left_over(self, state: _Pass) -> tuple[dict[str, str], set[str]]:
        """Namespaces with a failed or skipped write (with the first reason), and namespaces
        with writes left for the next pass."""
        troubled: dict[str, str] = {}
        pending: set[str] = set()
        for step in state.plan.steps:
            action = step.action
            outcome = state.outcomes.get(step.index)
            if outcome is None or isinstance(action, (*_SUBNAMESPACE_ACTIONS, EmitEvent)):
                continue
            if outcome.result in ("failed", "skipped"):
                reason = f"could not {action.describe()}: {outcome.error}"
                troubled.setdefault(action.namespace, reason)
            elif outcome.result in ("replan", "aborted"):
                pending.add(action.namespace)
        return troubled, pending


def _failed(status: SubNamespaceStatus, why: str) -> SubNamespaceStatus:
    """``status`` with Ready=False for ``why``."""
    ready = Condition(CONDITION_READY, "False", REASON_APPLY_FAILED, why)
    others = tuple(c for c in status.conditions if c.type != CONDITION_READY)
    return SubNamespaceStatus(status.observed_generation, (*others, ready))
