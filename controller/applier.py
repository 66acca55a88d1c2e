"""Runs a plan: its stages in order, the steps of a stage concurrently, each step only when the
steps it needs happened, then what the end of the pass sends (libaccurate.closing decides it).

A failure holds up only what depends on it, so one broken namespace never blocks the others.
Statuses and events come last, when it is known what happened. Steps the caller defers (work
another lane is doing) are not sent: they count as left for the next pass, and so does what
needs them.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import partial

from controller.cache import Expectation
from controller.metrics import Metrics
from controller.writes import Aborted, Known, Replan, Writer
from libaccurate.actions import Action
from libaccurate.closing import close
from libaccurate.network.kube import KubeError
from libaccurate.planner import Plan, Result, Step

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Outcome:
    """What became of one step."""

    result: Result
    error: str = ""
    expectations: tuple[Expectation, ...] = ()


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


class Applier:
    """Runs plans with a pool of ``workers`` threads; one plan at a time."""

    # What a deferred step comes out as.
    DEFERRED = Outcome("replan", "left to the pass under way in the other lane")

    def __init__(self, writer: Writer, metrics: Metrics, workers: int) -> None:
        self.writer = writer
        self.metrics = metrics
        self.pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="apply")

    def close(self) -> None:
        """Wait for the writes in flight, then let the workers go."""
        self.pool.shutdown(wait=True)

    def apply(self, plan: Plan, deferred: frozenset[int] = frozenset()) -> Report:
        """Carry out ``plan`` but for the steps ``deferred`` (by index); returns what became
        of every step."""
        state = _Pass(plan, Known(plan.namespaces, plan.subnamespaces))
        for index in deferred:
            state.outcomes[index] = self.DEFERRED
        for stage in plan.stages():
            self._run(state, [(step.action, step) for step in stage if step.index not in deferred])
        with state.lock:
            closing = close(plan, dict(state.outcomes))
        for index, finding in closing.settled.items():
            if index not in deferred:
                step = plan.steps[index]
                self._record(state, step.action, step, Outcome(finding.result, finding.error))
        sends = [send for send in closing.sends if send.step not in deferred]
        self._run(state, [(send.action, _step(plan, send.step)) for send in sends])
        return Report(dict(state.outcomes))

    def _run(self, state: _Pass, work: list[tuple[Action, Step | None]]) -> None:
        """Send ``work`` concurrently; an action that carries out a step records its outcome.

        A single write is sent from the calling thread: a pass for one SubNamespace is a few
        stages of one write each, and handing each to a worker and back costs two thread
        switches, which on a loaded machine is most of the wait.
        """
        ready: list[tuple[Action, Step | None]] = []
        for action, step in work:
            blocked = self._blocked(state, step)
            if blocked is not None:
                self._record(state, action, step, blocked)
            else:
                ready.append((action, step))
        if len(ready) == 1:
            action, step = ready[0]
            self._record(state, action, step, self._attempt(state, action))
            return
        futures: list[tuple[Action, Step | None, Future[Outcome]]] = [
            (action, step, self.pool.submit(partial(self._attempt, state, action)))
            for action, step in ready
        ]
        for action, step, future in futures:
            self._record(state, action, step, future.result())

    def _blocked(self, state: _Pass, step: Step | None) -> Outcome | None:
        """Why a step must not run: the controller may not write, or a step it needs did not
        happen."""
        if not self.writer.may_write():
            return Outcome("aborted")
        if step is None:
            return None
        with state.lock:
            hindrance = state.plan.hindrance(step, state.outcomes)
        return None if hindrance is None else Outcome(hindrance.result, hindrance.error)

    def _attempt(self, state: _Pass, action: Action) -> Outcome:
        """Carry out one action and say what became of it; never raises."""
        try:
            written = self.writer.write(action, state.known)
        except Replan as stale:
            return Outcome("replan", str(stale))
        except Aborted:
            return Outcome("aborted")
        except KubeError as error:
            return Outcome("failed", str(error))
        return Outcome("done", expectations=written)

    def _record(self, state: _Pass, action: Action, step: Step | None, outcome: Outcome) -> None:
        if step is not None:
            with state.lock:
                state.outcomes[step.index] = outcome
        self.metrics.count_action(type(action).__name__, outcome.result)
        fields = {"action": action.describe(), "result": outcome.result}
        if outcome.result == "done":
            log.info("applied", extra=fields)
        elif outcome.result == "failed":
            log.warning("action failed", extra={**fields, "error": outcome.error})
        else:
            log.info("action not applied", extra={**fields, "error": outcome.error})


def _step(plan: Plan, index: int | None) -> Step | None:
    return None if index is None else plan.steps[index]
