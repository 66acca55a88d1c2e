"""The hierarchical quota webhook: judges updates of the status of the ResourceQuotas kept for
HRQs, which kube-apiserver's quota admission makes as part of every write it counts.

A refusal here refuses that write, with the HRQ's message. Decisions are taken one at a time,
on the webhook process's cache corrected by the ledger of what was admitted but is not in the
cache yet (libaccurate.quotaledger), so that concurrent writes in sibling namespaces never
both pass when only one fits; docs/hierarchical-quotas.md says why that is enough. The same
picture serves the namespace webhook's check of moves (``deciding``).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from controller.cache import HRQ_QUOTAS, HRQS, Cache
from controller.reviews import admission_request, admission_response, unavailable
from libaccurate import quota
from libaccurate.admission import ALLOWED, UPDATE, Verdict
from libaccurate.forest import Forest
from libaccurate.network.kube import ApiError, Kube, KubeError, resource_path
from libaccurate.quantity import ZERO, Quantity
from libaccurate.quotaledger import Ledger, Seen

Answer = tuple[dict[str, Any], bool]
MoveCheck = Callable[[str, "str | None", Forest], "str | None"]
# kube-controller-manager's quota controller recounts what exists; refusing it would only make
# the status wrong (its own account, or the manager's without per-controller accounts).
RECOUNTERS = frozenset(
    {
        "system:serviceaccount:kube-system:resourcequota-controller",
        "system:kube-controller-manager",
    }
)

NOT_DECIDING = (
    "this replica does not decide hierarchical quotas now (another holds the quota Lease); "
    "try again"
)


class QuotaReviews:
    """The status-update verdicts and the ledger they share; safe to call from many threads."""

    def __init__(
        self,
        cache: Cache,
        kube: Kube,
        deciding: Callable[[], bool] = lambda: True,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._cache = cache
        self._kube = kube
        self._deciding = deciding
        self._clock = clock
        self._ledger = Ledger()
        self._lock = threading.Lock()
        # Parsed statuses by quota, with the resourceVersion they were parsed at.
        self._parsed: dict[quota.QuotaKey, Seen] = {}
        # The HRQs as last parsed, and the cache generation they were parsed at.
        self._hrqs: tuple[int, list[quota.Hrq]] = (-1, [])

    def validate_status(self, body: Any) -> Answer:
        request = admission_request(body, "", "ResourceQuota", needs_name=True)
        new, old = request.new or {}, request.old or {}
        if request.operation != UPDATE or request.user in RECOUNTERS:
            return admission_response(request, ALLOWED), True
        if not self._deciding():
            return unavailable(request, NOT_DECIDING), False
        verdict = self._judge(new, old)
        return admission_response(request, verdict), verdict.allowed

    def _judge(self, new: Mapping[str, Any], old: Mapping[str, Any]) -> Verdict:
        hrq_key = quota.hrq_of_quota(new)
        if hrq_key is None:
            return ALLOWED
        try:
            after = _used(new)
            before = _used(old)
        except quota.QuotaError as error:
            return Verdict(False, f"status.used cannot be read: {error}")
        metadata = new["metadata"]
        namespace, name = str(metadata.get("namespace") or ""), str(metadata["name"])
        with self._lock:
            now = self._clock()
            self._ledger.sync(self._seen)
            try:
                self._confirm_expired(now)
            except KubeError as error:
                message = f"cannot check the hierarchical quota against the cluster: {error}"
                return Verdict(False, message)
            with self._cache.reading() as forest:
                hrqs = self._current_hrqs()
                hrq = next((h for h in hrqs if h.key == hrq_key), None)
                if hrq is None:
                    return ALLOWED
                denial = quota.review_usage(
                    forest, hrqs, self._ledger, namespace, hrq, before, after
                )
            if denial is not None:
                return Verdict(False, denial)
            version = str(metadata.get("resourceVersion") or "")
            if any(q.value > before.get(r, ZERO).value for r, q in after.items()):
                self._ledger.reserve((namespace, name), version, after, now)
        return ALLOWED

    @contextmanager
    def deciding(self) -> Iterator[MoveCheck]:
        """Hold the decisions still while a namespace review runs, and give it the check of a
        move. Enter this before the cache's forest: decisions take the two in that order."""
        with self._lock:
            self._ledger.sync(self._seen)
            yield self._move_denial

    def _move_denial(self, name: str, parent: str | None, forest: Forest) -> str | None:
        """Why namespace ``name`` may not move under ``parent`` (``forest`` as it is, without
        the move), or None."""
        return quota.review_move(forest, self._current_hrqs(), self._ledger, name, parent)

    def _current_hrqs(self) -> list[quota.Hrq]:
        """The cached HRQs, parsed again only when one of them changed."""
        generation = self._cache.generation(HRQS)
        if self._hrqs[0] != generation:
            self._hrqs = (generation, quota.read_hrqs(self._cache.items(HRQS))[0])
        return self._hrqs[1]

    def _seen(self, key: quota.QuotaKey) -> Seen | None:
        """A cached quota's version and usage, parsed once per version."""
        obj = self._cache.get(HRQ_QUOTAS, *key)
        if obj is None:
            self._parsed.pop(key, None)
            return None
        version = str((obj.get("metadata") or {}).get("resourceVersion") or "")
        known = self._parsed.get(key)
        if known is None or known.version != version:
            known = Seen(version, quota.usage_of([obj]).get(key) or {})
            self._parsed[key] = known
        return known

    def _confirm_expired(self, now: float) -> None:
        """Read live the quotas whose reservations are too old to wait for the cache."""
        for namespace, name in self._ledger.expired(now):
            path = resource_path("", "v1", "resourcequotas", namespace, name)
            try:
                obj = self._kube.get(path)
            except ApiError as error:
                if not error.not_found:
                    raise
                self._ledger.confirm((namespace, name), None, now)
                continue
            version = str((obj.get("metadata") or {}).get("resourceVersion") or "")
            used = quota.usage_of([obj]).get((namespace, name)) or {}
            self._ledger.confirm((namespace, name), Seen(version, used), now)


def _used(obj: Mapping[str, Any]) -> dict[str, Quantity]:
    status = obj.get("status") or {}
    if not isinstance(status, Mapping):
        raise quota.QuotaError("status must be an object")
    return quota.read_resource_list(status.get("used"), "status.used")
