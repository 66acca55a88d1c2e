"""The order the controller's writes go out in (issue 31, point 4): every kind's rate-limit
bucket working at once, and a SubNamespace's status as soon as its namespace's own writes are
done, never before.

A write here is a stub that records it and, for the namespaces a test holds, waits until the
test lets it go: the stand-in for a bucket that is empty. What is tested is the real
dispatcher and applier around it. The end-to-end behaviour, with the controller's real flag, is
in tests/e2e/test_controller_statuses.py; the time it saves is in bench/ (scenario 8).
"""

from __future__ import annotations

import threading
from collections.abc import Collection, Iterator
from functools import partial

import pytest

from accurate_testbed.waiting import wait_for
from controller.applier import Applier
from controller.dispatcher import Dispatcher
from controller.metrics import Metrics
from controller.writes import Known, Writer, Written
from libaccurate.actions import Action, CreateObject, PatchSubNamespaceStatus
from libaccurate.network.kube import ApiError
from libaccurate.planner import Plan, about, plan
from tests.unit.planner_world import ROLE
from tests.unit.test_planner import make_world, role

# Long enough for a loaded machine; a test that passes never waits for it.
DEADLINE = 10.0


@pytest.fixture
def dispatcher() -> Iterator[Dispatcher]:
    running = Dispatcher(2, "test")
    try:
        yield running
    finally:
        running.close()


def test_a_kind_gets_a_writer_while_another_kind_keeps_every_writer_it_had(
    dispatcher: Dispatcher,
) -> None:
    """Two writers, each stuck at the copies' bucket, and more copies queued before a status:
    the status still goes out, as a free writer takes the kind with nothing in flight."""
    bucket = threading.Event()
    copies = [dispatcher.submit("secrets", lambda: bucket.wait(DEADLINE)) for _ in range(5)]
    status = dispatcher.submit("subnamespaces", lambda: "sent")
    try:
        assert status.result(DEADLINE) == "sent"
        assert not any(copy.done() for copy in copies)
    finally:
        bucket.set()
    assert all(copy.result(DEADLINE) for copy in copies)


def test_a_kind_s_requests_go_out_in_the_order_given() -> None:
    sent: list[int] = []
    one = Dispatcher(1, "test")
    futures = [one.submit("secrets", partial(sent.append, i)) for i in range(20)]
    one.close()
    assert all(future.done() for future in futures)
    assert sent == list(range(20))


def test_closing_runs_what_is_queued_and_a_failure_reaches_the_waiter() -> None:
    one = Dispatcher(1, "test")
    fails = one.submit("secrets", lambda: 1 / 0)
    after = one.submit("secrets", lambda: "ran")
    one.close()
    with pytest.raises(ZeroDivisionError):
        fails.result()
    assert after.result() == "ran"
    with pytest.raises(RuntimeError):
        one.submit("secrets", lambda: None)


class Recording(Writer):
    """A writer that sends nothing: it records each write when it is done, fails those into
    ``failing`` namespaces, and holds those into ``held`` namespaces until ``released`` is set."""

    def __init__(
        self, held: Collection[str] = frozenset(), failing: Collection[str] = frozenset()
    ) -> None:
        self.held, self.failing = held, failing
        self.released = threading.Event()
        self.sent: list[Action] = []
        self.lock = threading.Lock()
        self.may_write = lambda: True

    def kind(self, action: Action) -> str:
        return "statuses" if isinstance(action, PatchSubNamespaceStatus) else "copies"

    def write(self, action: Action, known: Known) -> Written:
        if action.namespace in self.held and isinstance(action, CreateObject):
            assert self.released.wait(DEADLINE)
        if action.namespace in self.failing and isinstance(action, CreateObject):
            raise ApiError(403, {"message": "forbidden"})
        with self.lock:
            self.sent.append(action)
        return ()

    def written(self, namespace: str) -> list[str]:
        """The writes about ``namespace`` so far, in the order they were done."""
        with self.lock:
            return [action.describe() for action in self.sent if about(action) == namespace]

    def statuses(self) -> dict[str, str]:
        """The Ready condition of each status sent so far, by namespace."""
        with self.lock:
            return {
                action.name: f"{ready.status} {ready.reason}"
                for action in self.sent
                if isinstance(action, PatchSubNamespaceStatus)
                and (ready := action.status.condition("Ready")) is not None
            }


def two_new_subnamespaces() -> Plan:
    """A root holding two update-mode Roles and two new SubNamespaces, ``a`` and ``b``: a plan
    that creates both namespaces, copies both Roles into each, and says each is Ready."""
    world = make_world()
    world.add_object(ROLE, role("root1", mode="update"))
    world.add_object(ROLE, role("root1", name="viewer", mode="update"))
    world.add_subnamespace("root1", "a")
    world.add_subnamespace("root1", "b")
    return plan(world.snapshot())


def test_a_status_goes_out_when_its_namespace_is_done_while_others_are_still_written() -> None:
    """``b``'s copies are held: ``a`` is Ready meanwhile, each status comes after every write
    to its namespace."""
    planned = two_new_subnamespaces()
    writer = Recording(held={"b"})
    applier = Applier(writer, Metrics(), 4)
    running = threading.Thread(target=applier.apply, args=(planned,))
    try:
        running.start()
        ready = wait_for(lambda: writer.statuses().get("a"), DEADLINE, "a status for a")
        assert ready == "True Synced"
        assert writer.written("b") == ["create namespace b"]
        writer.released.set()
        running.join(DEADLINE)
    finally:
        writer.released.set()
        applier.close()
    assert writer.statuses() == {"a": "True Synced", "b": "True Synced"}
    for name in ("a", "b"):
        written = writer.written(name)
        assert len(written) == 4, written
        assert written[-1].startswith(f"set status of SubNamespace root1/{name}:"), written


def test_a_namespace_whose_copy_failed_is_reported_not_ready_and_the_other_ready() -> None:
    planned = two_new_subnamespaces()
    writer = Recording(failing={"a"})
    applier = Applier(writer, Metrics(), 4)
    try:
        report = applier.apply(planned)
    finally:
        applier.close()
    assert writer.statuses() == {"a": "False ApplyFailed", "b": "True Synced"}
    assert report.count("failed") == 2
