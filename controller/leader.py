"""Leader election on a coordination.k8s.io/v1 Lease, by client-go's rules, so that replicas of
this controller, and the Go Accurate (controller-runtime) during a migration, never lead at once.

The rules, as client-go's leaderelection package has them:
- The Lease names its holder, how long a holder's claim lasts (leaseDurationSeconds), when it was
  acquired and last renewed, and how many times it changed hands.
- Timestamps in the Lease are never compared with the local clock (clocks of different machines
  disagree). A candidate only notes, on its own monotonic clock, when it last saw the Lease change;
  the claim is over when it has not changed for leaseDurationSeconds since then.
- Every write carries the resourceVersion read, so of two candidates racing for a free Lease only
  one succeeds.
- A holder that cannot renew for renew_deadline stops leading, before any candidate can take over
  (renew_deadline < lease_duration); an empty holderIdentity means free at once (a release).
"""

from __future__ import annotations

import logging
import math
import random
import threading
import time
from collections.abc import Callable
from datetime import datetime, timezone
from typing import Any

from libaccurate.network.kube import ApiError, Kube, KubeError, resource_path

JITTER = 1.2  # client-go's: candidates retry after retry_period * (1 + up to 1.2)
WAIT_POLL = 0.1  # how often wait_until_leader looks at its stop event

log = logging.getLogger(__name__)


class LeaderElector:
    """One candidate for the Lease ``namespace``/``name``; ``identity`` must be unique per process
    (controller-runtime uses "<hostname>_<uuid>")."""

    def __init__(
        self,
        kube: Kube,
        namespace: str,
        name: str,
        identity: str,
        lease_duration: float = 15,
        renew_deadline: float = 10,
        retry_period: float = 2,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        _check_settings(identity, lease_duration, renew_deadline, retry_period)
        # Bounded requests: a renewal hanging on a dead connection must not outlive the deadline.
        self._kube = kube.with_timeout(renew_deadline)
        self._collection = resource_path("coordination.k8s.io", "v1", "leases", namespace)
        self._path = resource_path("coordination.k8s.io", "v1", "leases", namespace, name)
        self._namespace, self._name = namespace, name
        self.identity = identity
        self.lease_duration = lease_duration
        self.renew_deadline = renew_deadline
        self.retry_period = retry_period
        self._clock = clock
        self._attempt = threading.Lock()  # one read-modify-write of the Lease at a time
        self._became_leader = threading.Condition()
        self._lease: dict[str, Any] | None = None  # as last read or written: resourceVersion
        self._observed: dict[str, Any] | None = None  # its spec, and when we saw it change
        self._observed_at = 0.0
        self._renewed_at: float | None = None  # when our last successful claim was sent
        self._released = False
        self._reported_leading = False

    @property
    def is_leader(self) -> bool:
        """True only while our last successful claim is younger than renew_deadline, so a
        replica that cannot reach the API stops writing even if its renewal loop is stuck."""
        renewed = self._renewed_at
        return renewed is not None and self._clock() - renewed < self.renew_deadline

    def run(self, stop: threading.Event) -> None:
        """Campaign, lead and renew until ``stop`` is set or the Lease is released. A replica
        that loses the Lease steps down and becomes a candidate again."""
        while not stop.is_set() and not self._released:
            leading = self._attempt_once()
            pause = self.retry_period
            if not leading:
                pause *= 1 + random.random() * JITTER
            stop.wait(pause)

    def wait_until_leader(self, stop: threading.Event) -> bool:
        """Block until this replica leads (True) or ``stop`` is set (False)."""
        with self._became_leader:
            while not stop.is_set():
                if self.is_leader:
                    return True
                self._became_leader.wait(WAIT_POLL)
        return False

    def release(self) -> None:
        """Stop leading at once and, if we hold the Lease, mark it free so another replica takes
        over without waiting for it to expire. Meant for shutdown: the elector does not campaign
        again. A failure is logged, not raised: the Lease then simply expires."""
        with self._attempt:
            self._released = True
            self._renewed_at = None
            self._reported_leading = False
            if self._lease is None or self._holder(self._lease.get("spec")) != self.identity:
                return
            spec = self._lease.get("spec") or {}
            now = _micro_time()
            free = {
                "holderIdentity": "",
                "leaseDurationSeconds": 1,
                "acquireTime": now,
                "renewTime": now,
                "leaseTransitions": spec.get("leaseTransitions") or 0,
            }
            try:
                self._write(free)
            except KubeError as error:
                log.warning(
                    "could not release the lease", extra={**self._fields(), "error": str(error)}
                )
                return
            log.info("released the lease", extra=self._fields())

    def _attempt_once(self) -> bool:
        """One acquire-or-renew; failures to reach the API only ever make us lead less."""
        with self._attempt:
            if self._released:
                return False
            started = self._clock()
            try:
                claimed = self._try_acquire_or_renew()
            except KubeError as error:
                doing = "renew" if self._reported_leading else "read"
                log.warning(
                    "could not %s the lease", doing, extra={**self._fields(), "error": str(error)}
                )
                claimed = False
            if claimed:
                self._renewed_at = started
            leading = self.is_leader
            self._report(leading)
        return leading

    def _report(self, leading: bool) -> None:
        """Log each change of leadership once, including a lapse noticed only by the clock."""
        if leading == self._reported_leading:
            return
        self._reported_leading = leading
        if leading:
            log.info("became the leader", extra=self._fields())
            with self._became_leader:
                self._became_leader.notify_all()
        else:
            holder = self._holder(self._observed)
            log.warning("stopped leading", extra={**self._fields(), "holder": holder})

    def _try_acquire_or_renew(self) -> bool:
        """True when the Lease now names us, renewed; False when another holder's claim stands.
        The fast path renews from the Lease we last wrote; a conflict there means someone else
        wrote it, so read it and decide again."""
        if self.is_leader and self._lease is not None:
            try:
                self._write(self._claim(self._lease.get("spec") or {}))
                return True
            except ApiError as error:
                log.debug("renewal failed, reading the lease", extra={"error": str(error)})
        try:
            lease = self._kube.get(self._path)
        except ApiError as error:
            if not error.not_found:
                raise
            self._create(self._claim({}))
            return True
        spec = lease.get("spec") or {}
        self._lease = lease
        self._observe(spec)
        holder = self._holder(spec)
        if holder and holder != self.identity and not self._expired():
            self._renewed_at = None
            log.debug("the lease is held by another replica", extra={"holder": holder})
            return False
        self._write(self._claim(spec))
        return True

    def _claim(self, current: dict[str, Any]) -> dict[str, Any]:
        """The spec naming us: a renewal keeps acquireTime and the transition count; taking the
        Lease over counts one more transition."""
        now = _micro_time()
        transitions = int(current.get("leaseTransitions") or 0)
        renewing = self._holder(current) == self.identity
        return {
            "holderIdentity": self.identity,
            "leaseDurationSeconds": math.ceil(self.lease_duration),
            "acquireTime": current.get("acquireTime") if renewing else now,
            "renewTime": now,
            "leaseTransitions": transitions if renewing or not current else transitions + 1,
        }

    def _create(self, spec: dict[str, Any]) -> None:
        lease = {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": self._name, "namespace": self._namespace},
            "spec": spec,
        }
        self._remember(self._kube.create(self._collection, lease))

    def _write(self, spec: dict[str, Any]) -> None:
        """Replace the Lease we last saw; the resourceVersion in it makes a stale write a 409."""
        assert self._lease is not None
        self._remember(self._kube.replace(self._path, {**self._lease, "spec": spec}))

    def _remember(self, lease: dict[str, Any]) -> None:
        self._lease = lease
        self._observe(lease.get("spec") or {})

    def _observe(self, spec: dict[str, Any]) -> None:
        if spec != self._observed:
            self._observed = spec
            self._observed_at = self._clock()

    def _expired(self) -> bool:
        seconds = int((self._observed or {}).get("leaseDurationSeconds") or 0)
        return self._observed_at + seconds <= self._clock()

    @staticmethod
    def _holder(spec: dict[str, Any] | None) -> str:
        return str((spec or {}).get("holderIdentity") or "")

    def _fields(self) -> dict[str, str]:
        return {"lease": f"{self._namespace}/{self._name}", "identity": self.identity}


def _check_settings(
    identity: str, lease_duration: float, renew_deadline: float, retry_period: float
) -> None:
    """client-go's constraints: the holder must give up before anyone may take over, and have
    time for more than one try before it gives up."""
    if not identity:
        raise ValueError("leader election needs a non-empty identity")
    if retry_period <= 0:
        raise ValueError(f"retry period must be positive, not {retry_period}")
    if renew_deadline <= JITTER * retry_period:
        raise ValueError(
            f"renew deadline ({renew_deadline}s) must be longer than {JITTER} times the "
            f"retry period ({retry_period}s)"
        )
    if lease_duration <= renew_deadline:
        raise ValueError(
            f"lease duration ({lease_duration}s) must be longer than the renew deadline "
            f"({renew_deadline}s)"
        )


def _micro_time() -> str:
    """Kubernetes MicroTime: RFC 3339 in UTC with exactly six fractional digits."""
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
