"""controller.leader: leader election on a Lease, between electors of ours and against a Lease
written the way the Go Accurate (controller-runtime / client-go) writes it.

Each elector gets a clock of its own that moves only when the test says so: expiry is judged by
that clock, so "not yet expired" is certain rather than a race with real time. Electors talk to
the API with their own User-Agent, so the server's request log can tell when one has read the
Lease again (those tests need the in-memory server).
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from accurate_testbed.apiserver.server import ApiServer
from accurate_testbed.cluster import Cluster
from accurate_testbed.waiting import wait_for
from controller.leader import LeaderElector
from libaccurate.network.kube import ApiError, ConnectionOptions, Kube, resource_path

MICRO_TIME = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$")
TIMINGS = {"lease_duration": 3.0, "renew_deadline": 2.0, "retry_period": 0.05}


class FakeClock:
    """A monotonic clock that stands still until advanced."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@dataclass
class Candidate:
    """An elector running its loop in a thread, as the controller runs it."""

    elector: LeaderElector
    clock: FakeClock
    agent: str
    stop: threading.Event = field(default_factory=threading.Event)
    thread: threading.Thread | None = None

    def start(self) -> Candidate:
        self.thread = threading.Thread(target=self.elector.run, args=(self.stop,), daemon=True)
        self.thread.start()
        return self

    def halt(self) -> None:
        self.stop.set()
        if self.thread is not None:
            self.thread.join(timeout=10)
            assert not self.thread.is_alive(), "the election loop did not stop"


@dataclass
class Election:
    """Candidates for one Lease in a namespace of the test's own."""

    kubeconfig: Path
    namespace: str
    name: str
    candidates: list[Candidate] = field(default_factory=list)

    @property
    def path(self) -> str:
        return resource_path("coordination.k8s.io", "v1", "leases", self.namespace, self.name)

    def candidate(self, identity: str) -> Candidate:
        agent = f"elector-{identity}"
        kube = Kube.connect(ConnectionOptions(kubeconfig=str(self.kubeconfig)), user_agent=agent)
        clock = FakeClock()
        elector = LeaderElector(kube, self.namespace, self.name, identity, clock=clock, **TIMINGS)
        candidate = Candidate(elector, clock, agent)
        self.candidates.append(candidate)
        return candidate

    def leading(self, candidate: Candidate) -> Candidate:
        candidate.start()
        wait_for(lambda: candidate.elector.is_leader, what=f"{candidate.agent} to lead")
        return candidate


@pytest.fixture
def kube(kubeconfig: Path) -> Kube:
    return Kube.connect(ConnectionOptions(kubeconfig=str(kubeconfig)))


@pytest.fixture
def election(cluster: Cluster) -> Iterator[Election]:
    current = Election(cluster.kubeconfig, cluster.namespace("leader"), cluster.unique("accurate"))
    yield current
    for candidate in current.candidates:
        candidate.halt()


def spec_of(kube: Kube, election: Election) -> dict[str, Any]:
    return dict(kube.get(election.path)["spec"])


def reads_again(apiserver: ApiServer, election: Election, candidate: Candidate) -> None:
    """Wait until the candidate has read the Lease twice more, so at least once after now."""

    def reads() -> int:
        return sum(
            1
            for request in apiserver.requests
            if request.path == election.path
            and request.user_agent == candidate.agent
            and request.method == "GET"
        )

    target = reads() + 2
    wait_for(lambda: reads() >= target, what=f"{candidate.agent} to read the lease")


def go_lease(election: Election, holder: str, renew_time: str, transitions: int) -> dict[str, Any]:
    """A Lease as client-go's LeaseLock writes it for controller-runtime."""
    return {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": election.name, "namespace": election.namespace},
        "spec": {
            "holderIdentity": holder,
            "leaseDurationSeconds": 15,
            "acquireTime": "2020-01-01T00:00:00.000000Z",
            "renewTime": renew_time,
            "leaseTransitions": transitions,
        },
    }


def test_one_of_two_candidates_leads_and_writes_the_lease_as_client_go_does(
    election: Election, kube: Kube
) -> None:
    first, second = election.candidate("a").start(), election.candidate("b").start()
    wait_for(lambda: first.elector.is_leader or second.elector.is_leader, what="a leader")
    leader, other = (first, second) if first.elector.is_leader else (second, first)
    assert not other.elector.is_leader
    spec = spec_of(kube, election)
    assert spec["holderIdentity"] == leader.elector.identity
    assert spec["leaseDurationSeconds"] == 3
    assert spec["leaseTransitions"] == 0
    assert MICRO_TIME.match(spec["acquireTime"]) and MICRO_TIME.match(spec["renewTime"])
    wait_for(lambda: spec_of(kube, election)["renewTime"] != spec["renewTime"], what="a renewal")
    renewed = spec_of(kube, election)
    assert renewed["acquireTime"] == spec["acquireTime"]
    assert renewed["holderIdentity"] == leader.elector.identity
    assert leader.elector.is_leader and not other.elector.is_leader


def test_releasing_hands_the_lease_over_at_once(election: Election, kube: Kube) -> None:
    first = election.leading(election.candidate("a"))
    second = election.candidate("b").start()
    outcome: list[bool] = []
    waiter = threading.Thread(
        target=lambda: outcome.append(second.elector.wait_until_leader(second.stop))
    )
    waiter.start()
    first.halt()
    first.elector.release()
    assert not first.elector.is_leader
    waiter.join(timeout=10)
    assert outcome == [True] and second.elector.is_leader
    spec = spec_of(kube, election)
    assert spec["holderIdentity"] == "b" and spec["leaseTransitions"] == 1
    assert not first.elector.wait_until_leader(first.stop)


@pytest.mark.fault_injection
def test_a_lease_held_by_the_go_controller_is_respected_until_it_expires(
    election: Election, kube: Kube, apiserver: ApiServer
) -> None:
    go_holder = "accurate-controller-6c9d8b7f4-x2x7q_5d0e1f2a-3b4c-4d5e-8f90-a1b2c3d4e5f6"
    # A renewTime years ago by the wall clock: only changes seen on our own clock count.
    kube.create(
        resource_path("coordination.k8s.io", "v1", "leases", election.namespace),
        go_lease(election, go_holder, "2020-01-01T00:00:00.000000Z", 3),
    )
    ours = election.candidate("py").start()
    reads_again(apiserver, election, ours)
    assert not ours.elector.is_leader
    ours.clock.advance(10)
    lease = kube.get(election.path)
    lease["spec"]["renewTime"] = "2020-01-01T00:00:10.000000Z"
    kube.replace(election.path, lease)
    reads_again(apiserver, election, ours)
    ours.clock.advance(10)  # 20 s since first seen, but only 10 s since the renewal
    reads_again(apiserver, election, ours)
    assert not ours.elector.is_leader
    assert spec_of(kube, election)["holderIdentity"] == go_holder
    ours.clock.advance(5.1)
    wait_for(lambda: ours.elector.is_leader, what="taking over the expired lease")
    spec = spec_of(kube, election)
    assert spec["holderIdentity"] == "py" and spec["leaseTransitions"] == 4
    assert spec["acquireTime"] != "2020-01-01T00:00:00.000000Z"


def test_a_leader_steps_down_when_another_holder_takes_the_lease(
    election: Election, kube: Kube
) -> None:
    leader = election.leading(election.candidate("a"))

    def take_over() -> bool:
        """As any other client writes a Lease that its holder renews: again on a conflict."""
        lease = kube.get(election.path)
        lease["spec"].update(holderIdentity="intruder", leaseDurationSeconds=15)
        try:
            kube.replace(election.path, lease)
        except ApiError as error:
            if error.conflict:
                return False
            raise
        return True

    wait_for(take_over, what="the intruder to write the lease")
    wait_for(lambda: not leader.elector.is_leader, what="the leader to step down")
    assert spec_of(kube, election)["holderIdentity"] == "intruder"


@pytest.mark.fault_injection
def test_failing_renewals_end_leadership_at_the_renew_deadline(
    election: Election, kube: Kube, apiserver: ApiServer
) -> None:
    leader = election.leading(election.candidate("a"))
    apiserver.fail(503, path=re.escape(election.path), times=1_000_000)
    reads_again(apiserver, election, leader)
    leader.clock.advance(1.9)
    assert leader.elector.is_leader
    leader.clock.advance(0.2)
    assert not leader.elector.is_leader
    apiserver.faults.clear()
    wait_for(lambda: leader.elector.is_leader, what="leading again once renewals work")
    spec = spec_of(kube, election)
    assert spec["holderIdentity"] == "a" and spec["leaseTransitions"] == 0


@pytest.mark.parametrize(
    ("settings", "named"),
    [
        ({"identity": ""}, "non-empty identity"),
        ({"retry_period": 0}, "retry period must be positive"),
        ({"renew_deadline": 0.05}, r"renew deadline \(0.05s\) must be longer"),
        ({"lease_duration": 2.0}, r"lease duration \(2.0s\) must be longer"),
    ],
)
def test_bad_settings_are_refused_by_name(kube: Kube, settings: dict[str, Any], named: str) -> None:
    arguments: dict[str, Any] = {**TIMINGS, "identity": "a", **settings}
    with pytest.raises(ValueError, match=named):
        LeaderElector(kube, "default", "accurate", **arguments)
