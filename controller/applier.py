"""Runs a plan: its stages in order, the steps of a stage concurrently, each step only when the
steps it needs happened; each SubNamespace's status as soon as its namespace's own steps are
done, beside the rest of the pass; the events at the end (libaccurate.closing decides both).

A failure holds up only what depends on it, so one broken namespace never blocks the others.
A status says what happened to its namespace's writes, so it waits for those and no others: in a
pass of thousands of copies the first namespaces are Ready long before the last copy is written,
and the SubNamespaces' rate-limit bucket works beside the copies' (controller.dispatcher).
Steps the caller defers (work another lane is doing) are not sent: they count as left for the
next pass, and so does what needs them.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable, Mapping
from concurrent.futures import Future
from dataclasses import dataclass, field
from functools import partial

from controller.cache import Expectation
from controller.dispatcher import Dispatcher
from controller.metrics import Metrics
from controller.writes import Aborted, Known, Replan, Writer
from libaccurate.actions import Action
from libaccurate.closing import Closing, Part, close_events, close_part, parts
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
    """One plan being carried out: what became of its steps so far, and which namespaces'
    statuses still wait for how many of their steps."""

    plan: Plan
    known: Known
    deferred: frozenset[int]
    parts: dict[str, Part]
    outcomes: dict[int, Outcome] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)
    # The part each awaited step belongs to, and how many steps each part still waits for.
    part_of: dict[int, str] = field(default_factory=dict)
    awaited: dict[str, int] = field(default_factory=dict)
    # The final writes sent so far (the statuses of parts done).
    closers: list[Future[None]] = field(default_factory=list)

    def __post_init__(self) -> None:
        for name, part in self.parts.items():
            self.awaited[name] = len(part.steps)
            self.part_of.update(dict.fromkeys(part.steps, name))

    def settle(self, index: int, outcome: Outcome) -> Part | None:
        """Record what became of step ``index``; the part it completed, if any."""
        with self.lock:
            self.outcomes[index] = outcome
            name = self.part_of.pop(index, None)
            if name is None:
                return None
            self.awaited[name] -= 1
            return self.parts[name] if self.awaited[name] == 0 else None


class Applier:
    """Runs plans with ``workers`` threads; one plan at a time."""

    # What a deferred step comes out as.
    DEFERRED = Outcome("replan", "left to the pass under way in the other lane")

    def __init__(self, writer: Writer, metrics: Metrics, workers: int) -> None:
        self.writer = writer
        self.metrics = metrics
        self.dispatcher = Dispatcher(workers, "apply")

    def close(self) -> None:
        """Wait for the writes in flight, then let the workers go."""
        self.dispatcher.close()

    def apply(self, plan: Plan, deferred: frozenset[int] = frozenset()) -> Report:
        """Carry out ``plan`` but for the steps ``deferred`` (by index); returns what became
        of every step."""
        state = _Pass(plan, Known(plan.namespaces, plan.subnamespaces), deferred, parts(plan))
        done = [part for index in deferred if (part := state.settle(index, self.DEFERRED))]
        done.extend(part for part in state.parts.values() if not part.steps)
        for part in done:
            self._close_part(state, part)
        for stage in plan.stages():
            self._wait(self._run(state, [(s.action, s) for s in stage if s.index not in deferred]))
        # Every step before the final stage has come out, so every part has been closed.
        self._wait(state.closers)
        with state.lock:
            closing = close_events(plan, dict(state.outcomes))
        self._wait(self._close(state, closing))
        return Report(dict(state.outcomes))

    @staticmethod
    def _wait(futures: Iterable[Future[None]]) -> None:
        """Wait for every write ``futures`` stand for; raises what a write raised."""
        for future in list(futures):
            future.result()

    def _close_part(self, state: _Pass, part: Part) -> None:
        """Send the statuses of ``part``, whose steps have all come out."""
        with state.lock:
            closing = close_part(state.plan, part, state.outcomes)
        sent = self._close(state, closing)
        with state.lock:
            state.closers.extend(sent)

    def _close(self, state: _Pass, closing: Closing) -> list[Future[None]]:
        """Record the final steps ``closing`` settled and send its writes (not those of
        deferred steps)."""
        for index, finding in closing.settled.items():
            if index not in state.deferred:
                step = state.plan.steps[index]
                self._record(state, step.action, step, Outcome(finding.result, finding.error))
        sends = [send for send in closing.sends if send.step not in state.deferred]
        return self._run(state, [(send.action, _step(state.plan, send.step)) for send in sends])

    def _run(self, state: _Pass, work: list[tuple[Action, Step | None]]) -> list[Future[None]]:
        """Start ``work`` on the writers, each request under its kind; an action that carries
        out a step records its outcome. The futures of what went to the writers.

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
            self._carry_out(state, *ready[0])
            return []
        return [
            self.dispatcher.submit(
                self.writer.kind(action), partial(self._carry_out, state, action, step)
            )
            for action, step in ready
        ]

    def _carry_out(self, state: _Pass, action: Action, step: Step | None) -> None:
        self._record(state, action, step, self._attempt(state, action))

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
        """Keep and log what became of ``action``; close the part it was the last step of."""
        completed = None if step is None else state.settle(step.index, outcome)
        self.metrics.count_action(type(action).__name__, outcome.result)
        fields = {"action": action.describe(), "result": outcome.result}
        if outcome.result == "done":
            log.info("applied", extra=fields)
        elif outcome.result == "failed":
            log.warning("action failed", extra={**fields, "error": outcome.error})
        else:
            log.info("action not applied", extra={**fields, "error": outcome.error})
        if completed is not None:
            self._close_part(state, completed)


def _step(plan: Plan, index: int | None) -> Step | None:
    return None if index is None else plan.steps[index]
